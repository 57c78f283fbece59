package config

import (
	"strings"
	"time"

	"github.com/xmq-io/xmq/bridge"
)

// Bridge is one entry of the bridges section (bridge.Config with
// YAML names). Zero values mean bridge's defaults, so the defaults live in
// one place: bridge.
type Bridge struct {
	Name string `yaml:"name"`
	// Enabled false configures the bridge without starting it (the admin
	// API starts it); nil: true.
	Enabled         *bool             `yaml:"enabled"`
	Addresses       []string          `yaml:"addresses"`
	Protocol        string            `yaml:"protocol"` // "5" or "3.1.1"
	ClientID        string            `yaml:"client_id"`
	Username        string            `yaml:"username"`
	Password        string            `yaml:"password" secret:"true"`
	TLS             ClientTLS         `yaml:"tls"`
	KeepAlive       time.Duration     `yaml:"keepalive"`
	CleanStart      bool              `yaml:"clean_start"`
	SessionExpiry   time.Duration     `yaml:"session_expiry"`
	TryPrivate      *bool             `yaml:"try_private"` // nil: true (Mosquitto's default)
	MaxInflight     int               `yaml:"max_inflight"`
	InflightTimeout time.Duration     `yaml:"inflight_timeout"`
	ConnectTimeout  time.Duration     `yaml:"connect_timeout"`
	BackoffMin      time.Duration     `yaml:"backoff_min"`
	BackoffMax      time.Duration     `yaml:"backoff_max"`
	Topics          []BridgeTopicRule `yaml:"topics"`
}

// ClientTLS is the client side of TLS towards a remote: a bridge's
// broker, auth.http's service.
type ClientTLS struct {
	CAFile     string `yaml:"ca_file"`
	CertFile   string `yaml:"cert_file"`
	KeyFile    string `yaml:"key_file"`
	ServerName string `yaml:"server_name"`
}

// BridgeTopicRule is Mosquitto's `topic PATTERN DIRECTION QOS LOCAL_PREFIX
// REMOTE_PREFIX` as YAML fields.
type BridgeTopicRule struct {
	Topic        string `yaml:"topic"`
	Direction    string `yaml:"direction"` // out (default), in or both
	QoS          byte   `yaml:"qos"`
	LocalPrefix  string `yaml:"local_prefix"`
	RemotePrefix string `yaml:"remote_prefix"`
}

// BridgeConfigs converts the bridges section.
func (c *Config) BridgeConfigs() []bridge.Config {
	out := make([]bridge.Config, 0, len(c.Bridges))
	for _, b := range c.Bridges {
		bc := bridge.Config{
			Name: b.Name, Addresses: b.Addresses, Protocol: b.Protocol, ClientID: b.ClientID,
			Username: b.Username, Password: b.Password,
			TLS:       bridge.TLS{CAFile: b.TLS.CAFile, CertFile: b.TLS.CertFile, KeyFile: b.TLS.KeyFile, ServerName: b.TLS.ServerName},
			KeepAlive: b.KeepAlive, CleanStart: b.CleanStart, SessionExpiry: b.SessionExpiry,
			PlainProtocol: b.TryPrivate != nil && !*b.TryPrivate, MaxInflight: b.MaxInflight,
			InflightTimeout: b.InflightTimeout, ConnectTimeout: b.ConnectTimeout, BackoffMin: b.BackoffMin, BackoffMax: b.BackoffMax,
			Disabled: b.Enabled != nil && !*b.Enabled,
		}
		for _, r := range b.Topics {
			bc.Topics = append(bc.Topics, bridge.Rule{Topic: r.Topic, Direction: bridge.Direction(r.Direction), QoS: r.QoS,
				LocalPrefix: r.LocalPrefix, RemotePrefix: r.RemotePrefix})
		}
		out = append(out, bc)
	}
	return out
}

// validateBridges checks the bridges section, and that no listener takes
// a name the bridges' in-process connections use.
func (c *Config) validateBridges(ps *Problems) {
	for i, l := range c.Listeners {
		if strings.HasPrefix(l.Name, bridge.ListenerPrefix) {
			ps.Add(Path("listeners", i, "name"), "names starting with %q are the bridges'", bridge.ListenerPrefix)
		}
	}
	seen := map[string]int{}
	for i, bc := range c.BridgeConfigs() {
		bc.SetDefaults()
		if err := bc.Validate(); err != nil {
			ps.Add(Path("bridges", i), "%s", strings.TrimPrefix(strings.TrimPrefix(err.Error(), "bridge "+bc.Name+": "), "bridge: "))
		}
		if first, dup := seen[bc.Name]; dup {
			ps.Add(Path("bridges", i, "name"), "%q is the name of bridges[%d] already: the name is used twice", bc.Name, first)
		} else {
			seen[bc.Name] = i
		}
	}
}
