package bridge

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/listeners"
)

// Direction says which way a topic rule forwards.
type Direction string

// Directions, as in Mosquitto's topic lines.
const (
	Out  Direction = "out"  // local → remote
	In   Direction = "in"   // remote → local
	Both Direction = "both" // each way
)

// Protocol versions a bridge speaks to its remote.
const (
	ProtocolV5   = "5"
	ProtocolV311 = "3.1.1"
)

// Defaults of a bridge's settings; Config documents each.
const (
	DefaultKeepAlive      = 60 * time.Second
	DefaultSessionExpiry  = 24 * time.Hour
	DefaultMaxInflight    = 100
	DefaultConnectTimeout = 10 * time.Second
	DefaultBackoffMin     = time.Second
	DefaultBackoffMax     = 2 * time.Minute
	// DefaultInflightTimeout: a healthy broker answers a PUBLISH or a
	// PUBREL within milliseconds; half a minute is far past any store
	// write, and short enough that a remote holding messages does not
	// wedge the bridge for long.
	DefaultInflightTimeout = 30 * time.Second
)

// Rule is one topic rule, Mosquitto's
//
//	topic PATTERN [out|in|both [QOS [LOCAL_PREFIX REMOTE_PREFIX]]]
//
// The local side sees LocalPrefix+Topic, the remote side
// RemotePrefix+Topic: a message on local topic LocalPrefix+T goes out on
// RemotePrefix+T, and the other way in. Topic may be empty when the
// prefixes are whole topics or filters.
type Rule struct {
	Topic     string
	Direction Direction // default out
	// QoS caps the QoS of what the rule forwards: a message goes at the
	// lower of its own QoS and this one (Mosquitto's default, 0, forwards
	// everything at most once; 1 or 2 is what no-loss forwarding needs).
	QoS          byte
	LocalPrefix  string
	RemotePrefix string
}

// TLS is the client side of a TLS connection to the remote (mqtts://,
// wss://, quic://). Without CAFile the system roots verify the remote.
type TLS struct {
	CAFile     string // PEM CAs that verify the remote's certificate
	CertFile   string // client certificate (PEM), with KeyFile
	KeyFile    string
	ServerName string // default: the host of the address dialled
}

// Config is one bridge. The zero value of each field means its default.
type Config struct {
	// Name identifies the bridge in logs, metrics and the admin API, and
	// names its local session ("$bridge:NAME"): letters, digits, '.', '-'
	// and '_'.
	Name string
	// Addresses are the remote's URLs (listeners.Dial: mqtt://, mqtts://,
	// ws://, wss://, quic://, or host:port), tried in turn: the first that
	// accepts the connection is used, and each reconnection starts again
	// from the first.
	Addresses []string
	// Protocol is the MQTT version spoken to the remote: "5" (default) or
	// "3.1.1".
	Protocol string
	// ClientID is the client identifier at the remote (default
	// HOSTNAME.NAME, as Mosquitto's bridges).
	ClientID string
	// Username and Password log in to the remote.
	Username string
	Password string
	TLS      TLS
	// KeepAlive is the keepalive towards the remote (default 60s).
	KeepAlive time.Duration
	// CleanStart starts a new remote session at every connection. The
	// default (false) resumes it, so what the remote holds for the
	// bridge while the link is down is delivered when it returns.
	CleanStart bool
	// SessionExpiry is how long the remote keeps the bridge's session
	// after the link goes down (MQTT 5; default 24h). A 3.1.1 remote keeps
	// a session that is not clean until it is cleaned.
	SessionExpiry time.Duration
	// PlainProtocol stops a 3.1.1 bridge from setting Mosquitto's bridge
	// bit (Mosquitto's try_private false). By default the bit is tried,
	// and dropped for an address that refuses it; without it, messages the
	// remote sends back are recognised by origin tracking.
	PlainProtocol bool
	// MaxInflight bounds the QoS 1/2 messages sent to the remote and not
	// yet acknowledged (default 100); an MQTT 5 remote's Receive Maximum
	// lowers it.
	MaxInflight int
	// InflightTimeout bounds each step of a QoS 1/2 exchange in flight,
	// either way: the remote's PUBACK, PUBREC, PUBREL or PUBCOMP, counted
	// from when the bridge wrote the packet it answers to the connection
	// (time in the bridge's own buffer behind a slow link does not count;
	// time in the system's socket buffer does: a link so slow that that
	// takes longer to drain needs more), and the local broker's. A link
	// with a step unanswered for longer (looked at every eighth of it) is
	// closed and made again with backoff; the sessions resend what was
	// unfinished, as MQTT requires: PUBLISH with DUP, or PUBREL after
	// PUBREC (default 30s).
	InflightTimeout time.Duration
	// ConnectTimeout bounds a connection attempt: dial, TLS and CONNACK
	// (default 10s).
	ConnectTimeout time.Duration
	// BackoffMin and BackoffMax bound the wait between failed connection
	// rounds (defaults 1s and 2m): it doubles after each failure, with
	// jitter, and falls back to BackoffMin once a link has stayed up.
	BackoffMin time.Duration
	BackoffMax time.Duration
	// Disabled configures the bridge without starting it; the admin API
	// starts it.
	Disabled bool
	// Topics are the topic rules.
	Topics []Rule
}

// SetDefaults fills every unset field with its default.
func (c *Config) SetDefaults() {
	if c.Protocol == "" {
		c.Protocol = ProtocolV5
	}
	if c.ClientID == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "xmq"
		}
		c.ClientID = host + "." + c.Name
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.SessionExpiry == 0 {
		c.SessionExpiry = DefaultSessionExpiry
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = DefaultMaxInflight
	}
	if c.InflightTimeout == 0 {
		c.InflightTimeout = DefaultInflightTimeout
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.BackoffMin == 0 {
		c.BackoffMin = DefaultBackoffMin
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	for i := range c.Topics {
		if c.Topics[i].Direction == "" {
			c.Topics[i].Direction = Out
		}
	}
}

// version is the protocol level spoken to the remote.
func (c *Config) version() byte {
	if c.Protocol == ProtocolV311 {
		return codec.V311
	}
	return codec.V5
}

// Validate reports the first setting that cannot work; call SetDefaults
// first.
func (c *Config) Validate() error {
	if err := validName(c.Name); err != nil {
		return err
	}
	errf := func(format string, a ...any) error {
		return fmt.Errorf("bridge %s: %s", c.Name, fmt.Sprintf(format, a...))
	}
	if len(c.Addresses) == 0 {
		return errf("no addresses")
	}
	tlsSet := c.TLS != TLS{}
	for _, a := range c.Addresses {
		transport, _, _, err := listeners.ParseURL(a)
		if err != nil {
			return errf("address %q: %v", a, err)
		}
		if tlsSet && !isTLS(transport) {
			return errf("tls settings are for mqtts, wss and quic addresses, not %q", a)
		}
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return errf("tls cert_file and key_file go together")
	}
	switch c.Protocol {
	case ProtocolV5, ProtocolV311:
	default:
		return errf("protocol %q: want %q or %q", c.Protocol, ProtocolV5, ProtocolV311)
	}
	if c.ClientID == "" || !codec.ValidUTF8([]byte(c.ClientID)) || len(c.ClientID) > 65535 {
		return errf("client id %q is not a valid MQTT string", c.ClientID)
	}
	if c.Password != "" && c.Username == "" && c.Protocol == ProtocolV311 {
		return errf("MQTT 3.1.1 sends no password without a user name")
	}
	switch {
	case c.KeepAlive < 0 || c.KeepAlive > 65535*time.Second || c.KeepAlive%time.Second != 0:
		return errf("keepalive %v: want whole seconds up to 65535s", c.KeepAlive)
	case c.SessionExpiry < 0 || c.SessionExpiry%time.Second != 0:
		return errf("session_expiry %v: want whole seconds", c.SessionExpiry)
	case c.MaxInflight < 1 || c.MaxInflight > 65535:
		return errf("max_inflight %d: want 1 to 65535", c.MaxInflight)
	case c.InflightTimeout <= 0:
		return errf("inflight_timeout %v: want more than 0", c.InflightTimeout)
	case c.ConnectTimeout < 0:
		return errf("connect_timeout %v must not be negative", c.ConnectTimeout)
	case c.BackoffMin <= 0 || c.BackoffMax < c.BackoffMin:
		return errf("backoff_min %v and backoff_max %v: want 0 < min <= max", c.BackoffMin, c.BackoffMax)
	}
	if len(c.Topics) == 0 {
		return errf("no topics: nothing would be forwarded")
	}
	for i, r := range c.Topics {
		if err := r.validate(); err != nil {
			return errf("topic %d (%q): %v", i+1, r.Topic, err)
		}
	}
	return nil
}

func (r *Rule) validate() error {
	switch r.Direction {
	case Out, In, Both:
	default:
		return fmt.Errorf("direction %q: want out, in or both", r.Direction)
	}
	if r.QoS > 2 {
		return fmt.Errorf("qos %d: want 0, 1 or 2", r.QoS)
	}
	for _, p := range []string{r.LocalPrefix, r.RemotePrefix} {
		if strings.ContainsAny(p, "+#") {
			return fmt.Errorf("prefix %q has a wildcard", p)
		}
	}
	for _, f := range []string{r.LocalPrefix + r.Topic, r.RemotePrefix + r.Topic} {
		if codec.IsShared([]byte(f)) {
			return fmt.Errorf("%q is a shared subscription: a bridge forwards every message", f)
		}
		if err := codec.ValidFilter([]byte(f)); err != nil {
			return fmt.Errorf("filter %q: %v", f, err)
		}
	}
	return nil
}

// validName checks a bridge name: it goes into a client id, a listener
// name and metric labels.
func validName(name string) error {
	if name == "" {
		return errors.New("bridge: a bridge has no name")
	}
	if len(name) > 64 {
		return fmt.Errorf("bridge: name %q is longer than 64 bytes", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return fmt.Errorf("bridge: name %q: use letters, digits, '.', '-' and '_'", name)
		}
	}
	return nil
}

func isTLS(transport string) bool {
	return transport == listeners.TransportTLS || transport == listeners.TransportWSS || transport == listeners.TransportQUIC
}

// ValidateAll checks a list of bridges, defaults filled in: each one, and
// that no name is used twice.
func ValidateAll(cfgs []Config) error {
	seen := map[string]bool{}
	for i := range cfgs {
		c := cfgs[i]
		c.SetDefaults()
		if err := c.Validate(); err != nil {
			return err
		}
		if seen[c.Name] {
			return fmt.Errorf("bridge %s: the name is used twice", c.Name)
		}
		seen[c.Name] = true
	}
	return nil
}
