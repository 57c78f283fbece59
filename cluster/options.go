package cluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// Defaults of Options.
const (
	DefaultName          = "xmq"
	DefaultSubjectPrefix = "mqtt"
	// DefaultListen is the embedded NATS server's route port, where the
	// other nodes connect: loopback, so that a node reachable from the
	// network is a choice (and one to protect, docs/cluster.md).
	DefaultListen = "127.0.0.1:6222"
	// DefaultMaxNodes bounds the node table (Options.MaxNodes).
	DefaultMaxNodes = 64
	// DefaultForgetAfter is how long a silent node stays in the table.
	DefaultForgetAfter = time.Hour
	// MinSecretLen is the shortest cluster secret accepted: xmq cluster
	// secret makes 32 random bytes, base64.
	MinSecretLen = 16
	// SharedHashClient and SharedHashTopic are the values of
	// Options.SharedHash: a shared group's messages go to the node the
	// hash of their publisher's client id, or of their topic, picks.
	SharedHashClient = "clientid"
	SharedHashTopic  = "topic"
	// DefaultReplayWindow and DefaultReplayMaxBytes bound the messages a
	// node keeps for replays (Options.ReplayWindow).
	DefaultReplayWindow   = 30 * time.Second
	DefaultReplayMaxBytes = 64 << 20
	// DefaultHeartbeatInterval is how often a node tells the others how
	// it is; one not heard from for three intervals is unreachable.
	DefaultHeartbeatInterval = 2 * time.Second
)

// Options configure a node. The zero value plus Node is an embedded NATS
// server with no peers.
type Options struct {
	// Name is the cluster's name: the embedded NATS cluster's name and
	// the namespace of the JetStream buckets (default "xmq").
	Name string
	// Node is this node's name, unique in the cluster (default: the host name).
	Node string
	// SubjectPrefix is the root of the MQTT topic ↔ NATS subject mapping
	// (default "mqtt"; subject.go).
	SubjectPrefix string
	// Secret is the cluster's shared secret: the embedded NATS servers'
	// route authorization (a route that does not present it is refused).
	// Required when Embedded.Listen, Advertise or a route is not on
	// loopback; unused with an external NATS, whose own users secure it.
	Secret string
	// MaxNodes bounds the node table built from heartbeats (default
	// DefaultMaxNodes): a heartbeat from one more node is ignored and
	// logged. ForgetAfter drops a node silent that long (default
	// DefaultForgetAfter).
	MaxNodes    int
	ForgetAfter time.Duration
	// URL joins an existing NATS cluster (comma-separated URLs); empty
	// runs an embedded NATS server (Embedded).
	URL string
	// CredentialsFile, User/Password and Token authenticate to URL; TLS
	// files secure the connection to it.
	CredentialsFile string
	User            string
	Password        string
	Token           string
	CAFile          string
	CertFile        string
	KeyFile         string
	// Replicas is the replica count of the JetStream buckets (client id
	// registry, retained messages); 0 = min(3, the number of nodes).
	Replicas int
	// SessionReplicas is the number of copies of each persistent
	// session's records (subscriptions, queued and inflight messages,
	// inbound QoS 2 state, pending will): 1 (default) keeps them in the
	// node's store only; 2 or 3 replicates them in a JetStream stream
	// (replica.go) so that another node rebuilds a session whose node is
	// gone for good, at the cost of a replicated write before each
	// acknowledgement that covers them (docs/cluster.md). It is capped
	// at the number of nodes.
	SessionReplicas int
	// Embedded configures the embedded NATS server (when URL is empty).
	Embedded EmbeddedOptions
	// NodeLocalIDs are client id prefixes held per node, never claimed
	// cluster-wide: the bridges' local sessions ($bridge:NAME), which
	// every node configured with the bridge runs, must not take each
	// other over.
	NodeLocalIDs []string
	// HeartbeatInterval is how often the node sends its heartbeat
	// (nodes.go; default DefaultHeartbeatInterval, 100ms to 1m).
	HeartbeatInterval time.Duration
	// ReplayWindow and ReplayMaxBytes bound how long, and in how many
	// bytes, a node keeps the QoS 1/2 messages it forwarded, for the
	// survivor that rebuilds a dead node's sessions, or the node that
	// comes back, to fetch those published while no node held them
	// (replay.go; defaults DefaultReplayWindow, 1s to 10m, and
	// DefaultReplayMaxBytes, at least 1 MiB). The window must outlast the
	// time from a node's death to its sessions' rebuilding (seconds), or
	// to its return.
	ReplayWindow   time.Duration
	ReplayMaxBytes int64
	// SharedHash makes shared groups sticky across nodes (sticky.go):
	// SharedHashClient or SharedHashTopic, the broker's hash_clientid or
	// hash_topic strategy; "" leaves the node of a group's message to
	// NATS (any node with members).
	SharedHash string
	// MarksFile is where the node keeps, per other node, the last
	// message of theirs its store has (replay.go): when it comes back
	// after a crash or a restart, it fetches from the other nodes what
	// they published for its sessions meanwhile (with SessionReplicas
	// above 1 too: a node that stopped gracefully keeps its sessions).
	// Empty: it does not (cmd/xmq puts it in the data directory).
	MarksFile string
}

// EmbeddedOptions configure the NATS server a node runs in process.
type EmbeddedOptions struct {
	// Listen is the route address other nodes connect to (default
	// DefaultListen); port 0 picks one.
	Listen string
	// ClientListen is the NATS client address for NATS applications
	// (Users); empty (the default) opens no client port: xmq itself talks
	// to its server in process. Port 0 picks one.
	ClientListen string
	// Routes are the route addresses (host:port or nats-route://host:port)
	// of the other nodes; this node's own may be listed too.
	Routes []string
	// Advertise is the route address the other nodes are told to use
	// for this one (host:port), when it differs from Listen: behind NAT,
	// a container's published port, a proxy. Empty: Listen.
	Advertise string
	// Dir holds JetStream's files (cmd/xmq: <data_dir>/nats); empty keeps
	// them in a temporary directory removed at Close.
	Dir string
	// TLS secures the routes (both ends present a certificate the CA
	// signed, verified) and the client port (server certificate).
	TLS EmbeddedTLS
	// Users are the NATS applications' users on the client port, all in
	// one account that sees the mapped MQTT subjects only (embedded.go).
	Users []User
}

// EmbeddedTLS are the PEM files of a node's certificate for routes and
// the client port, and the CA that signed every node's.
type EmbeddedTLS struct {
	CertFile string
	KeyFile  string
	CAFile   string
}

// User is a NATS application's user of the embedded server: a password
// or an nkey (public user key, "U..."), and the subjects it may publish
// and subscribe to, each within SubjectPrefix.> (empty: all of it).
type User struct {
	Name      string
	Password  string
	NKey      string
	Publish   []string
	Subscribe []string
}

// SetDefaults fills every unset field with its default.
func (o *Options) SetDefaults() {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Node == "" {
		// A host name may hold dots (a domain): those become '-'.
		h, _ := os.Hostname()
		o.Node = strings.Map(func(r rune) rune {
			if token(string(r)) {
				return r
			}
			return '-'
		}, h)
	}
	if o.SubjectPrefix == "" {
		o.SubjectPrefix = DefaultSubjectPrefix
	}
	if o.SessionReplicas == 0 {
		o.SessionReplicas = 1
	}
	if o.Embedded.Listen == "" {
		o.Embedded.Listen = DefaultListen
	}
	if o.MaxNodes == 0 {
		o.MaxNodes = DefaultMaxNodes
	}
	if o.ForgetAfter == 0 {
		o.ForgetAfter = DefaultForgetAfter
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.ReplayWindow == 0 {
		o.ReplayWindow = DefaultReplayWindow
	}
	if o.ReplayMaxBytes == 0 {
		o.ReplayMaxBytes = DefaultReplayMaxBytes
	}
}

// OptionError names the option a problem is about.
type OptionError struct {
	Option string
	Msg    string
}

func (e *OptionError) Error() string { return "cluster: " + e.Option + ": " + e.Msg }

// Validate checks the options (after SetDefaults) and returns every
// problem, joined.
func (o *Options) Validate() error {
	var errs []error
	bad := func(opt, format string, a ...any) { errs = append(errs, &OptionError{opt, fmt.Sprintf(format, a...)}) }
	if !token(o.Name) {
		bad("Name", "%q must be one NATS subject token: letters, digits, '-' and '_'", o.Name)
	}
	if !token(o.Node) {
		bad("Node", "%q must be letters, digits, '-' and '_' (it names this NATS server)", o.Node)
	}
	if !server.IsValidLiteralSubject(o.SubjectPrefix) || strings.ContainsAny(o.SubjectPrefix, "$%") {
		bad("SubjectPrefix", "%q must be a literal NATS subject without '$' or '%%'", o.SubjectPrefix)
	}
	if o.Replicas < 0 || o.Replicas > 5 {
		bad("Replicas", "%d is not from 0 (automatic) to 5", o.Replicas)
	}
	if o.SessionReplicas < 1 || o.SessionReplicas > 3 {
		bad("SessionReplicas", "%d is not from 1 (the node's store only) to 3", o.SessionReplicas)
	}
	if o.SharedHash != "" && o.SharedHash != SharedHashClient && o.SharedHash != SharedHashTopic {
		bad("SharedHash", "%q is not %q, %q or empty", o.SharedHash, SharedHashClient, SharedHashTopic)
	}
	if o.ReplayWindow < time.Second || o.ReplayWindow > 10*time.Minute {
		bad("ReplayWindow", "%v is not from 1s to 10m", o.ReplayWindow)
	}
	if o.ReplayMaxBytes < 1<<20 {
		bad("ReplayMaxBytes", "%d is below 1 MiB", o.ReplayMaxBytes)
	}
	if o.HeartbeatInterval < 100*time.Millisecond || o.HeartbeatInterval > time.Minute {
		bad("HeartbeatInterval", "%v is not from 100ms to 1m", o.HeartbeatInterval)
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		bad("CertFile", "cert_file and key_file go together")
	}
	if o.MaxNodes < 2 || o.MaxNodes > 1024 {
		bad("MaxNodes", "%d is not from 2 to 1024", o.MaxNodes)
	}
	if o.ForgetAfter < time.Minute {
		bad("ForgetAfter", "%v is below 1m", o.ForgetAfter)
	}
	if o.URL == "" {
		if _, _, err := splitHostPort(o.Embedded.Listen); err != nil {
			bad("Embedded.Listen", "%q: %v", o.Embedded.Listen, err)
		}
		if a := o.Embedded.ClientListen; a != "" {
			if _, _, err := splitHostPort(a); err != nil {
				bad("Embedded.ClientListen", "%q: %v", a, err)
			}
		}
		o.validateTrust(bad)
		if o.Embedded.Advertise != "" {
			if _, _, err := splitHostPort(o.Embedded.Advertise); err != nil {
				bad("Embedded.Advertise", "%q: %v", o.Embedded.Advertise, err)
			}
		}
		for _, r := range o.Embedded.Routes {
			if _, _, err := splitHostPort(strings.TrimPrefix(r, "nats-route://")); err != nil {
				bad("Embedded.Routes", "%q: %v", r, err)
			}
		}
	} else if o.CredentialsFile != "" && (o.User != "" || o.Token != "") {
		bad("CredentialsFile", "credentials_file excludes user and token: pick one way to log in")
	}
	return errors.Join(errs...)
}

// validateTrust checks the secret, TLS and users of an embedded server.
func (o *Options) validateTrust(bad func(opt, format string, a ...any)) {
	switch {
	case o.Secret == "":
		// Without a secret anyone who reaches a route port joins the
		// cluster: only loopback, where that is this machine's users, may
		// go without.
		addrs := append([]string{o.Embedded.Listen, o.Embedded.Advertise}, o.Embedded.Routes...)
		for _, a := range addrs {
			if a != "" && !loopback(strings.TrimPrefix(a, "nats-route://")) {
				bad("Secret", "required: %s is not on loopback, and a route that knows no secret would join the cluster (make one with `xmq cluster secret`)", a)
				break
			}
		}
	case len(o.Secret) < MinSecretLen:
		bad("Secret", "shorter than %d characters (`xmq cluster secret` makes one)", MinSecretLen)
	}
	t := o.Embedded.TLS
	if (t.CertFile == "") != (t.KeyFile == "") || (t.CertFile != "") != (t.CAFile != "") {
		bad("Embedded.TLS", "cert_file, key_file and ca_file go together (the CA verifies the other nodes' certificates)")
	}
	names := map[string]bool{}
	for i, u := range o.Embedded.Users {
		switch {
		case u.Name == "":
			bad("Embedded.Users", "user %d has no name", i+1)
		case names[u.Name]:
			bad("Embedded.Users", "user %q appears twice", u.Name)
		case (u.Password == "") == (u.NKey == ""):
			bad("Embedded.Users", "user %q needs a password or an nkey, not both", u.Name)
		case u.NKey != "" && !nkeys.IsValidPublicUserKey(u.NKey):
			bad("Embedded.Users", "user %q: nkey is not a public user key (U...)", u.Name)
		}
		names[u.Name] = true
		for _, s := range append(slices.Clone(u.Publish), u.Subscribe...) {
			if !server.IsValidSubject(s) || !server.SubjectMatchesFilter(s, o.SubjectPrefix+".>") {
				bad("Embedded.Users", "user %q: %q is not a subject within %s.>", u.Name, s, o.SubjectPrefix)
			}
		}
	}
	if len(o.Embedded.Users) > 0 && o.Embedded.ClientListen == "" {
		bad("Embedded.ClientListen", "users are set but no client port is: set client_listen")
	}
}

// loopback reports whether host:port names a loopback address (an empty
// host means every interface, not loopback).
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// token reports a name that is one plain NATS subject token.
func token(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// splitHostPort splits host:port with a numeric port from 0 to 65535.
func splitHostPort(addr string) (string, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.Atoi(ps)
	if err != nil || p < 0 || p > 65535 {
		return "", 0, fmt.Errorf("port %q is not a number from 0 to 65535", ps)
	}
	return host, p, nil
}
