package cluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Defaults of Options.
const (
	DefaultName          = "xmq"
	DefaultSubjectPrefix = "mqtt"
	// DefaultListen is the embedded NATS server's route port, where the
	// other nodes connect: loopback, so that a node reachable from the
	// network is a choice (and one to protect, docs/cluster.md).
	DefaultListen = "127.0.0.1:6222"
	// DefaultClientListen is the embedded NATS server's client port, for
	// NATS applications; xmq itself talks to it in process.
	DefaultClientListen = "127.0.0.1:4222"
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
	// MarksFile, with SessionReplicas 1, is where the node keeps, per
	// other node, the last message of theirs its store has (replay.go):
	// when it comes back after a crash, it fetches from the other nodes
	// what they published for its sessions meanwhile. Empty: it does not
	// (cmd/xmq puts it in the data directory).
	MarksFile string
}

// EmbeddedOptions configure the NATS server a node runs in process.
type EmbeddedOptions struct {
	// Listen is the route address other nodes connect to (default
	// DefaultListen); port 0 picks one.
	Listen string
	// ClientListen is the NATS client address (default
	// DefaultClientListen); port 0 picks one.
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
	if o.Embedded.ClientListen == "" {
		o.Embedded.ClientListen = DefaultClientListen
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
	if o.URL == "" {
		for _, a := range []struct{ opt, addr string }{{"Embedded.Listen", o.Embedded.Listen}, {"Embedded.ClientListen", o.Embedded.ClientListen}} {
			if _, _, err := splitHostPort(a.addr); err != nil {
				bad(a.opt, "%q: %v", a.addr, err)
			}
		}
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
