package bridge

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	ok := func() Config {
		return Config{Name: "cloud", Addresses: []string{"mqtt://127.0.0.1:1883"}, Topics: []Rule{{Topic: "#", QoS: 1}}}
	}
	tests := []struct {
		name string
		mod  func(*Config)
		err  string // "" = valid
	}{
		{"minimal", func(*Config) {}, ""},
		{"every transport", func(c *Config) {
			c.Addresses = []string{"mqtt://h", "mqtts://h", "ws://h/mqtt", "wss://h", "quic://h", "h:1883"}
		}, ""},
		{"3.1.1", func(c *Config) { c.Protocol = "3.1.1" }, ""},
		{"no name", func(c *Config) { c.Name = "" }, "no name"},
		{"bad name", func(c *Config) { c.Name = "a b" }, "letters, digits"},
		{"no address", func(c *Config) { c.Addresses = nil }, "no addresses"},
		{"bad address", func(c *Config) { c.Addresses = []string{"http://h"} }, "unknown scheme"},
		{"tls on plain tcp", func(c *Config) { c.TLS.CAFile = "ca.pem" }, "tls settings"},
		{"cert without key", func(c *Config) { c.Addresses = []string{"mqtts://h"}; c.TLS.CertFile = "c.pem" }, "go together"},
		{"protocol", func(c *Config) { c.Protocol = "4" }, "protocol"},
		{"3.1.1 password alone", func(c *Config) { c.Protocol = "3.1.1"; c.Password = "p" }, "without a user name"},
		{"keepalive fraction", func(c *Config) { c.KeepAlive = 1500 * time.Millisecond }, "keepalive"},
		{"keepalive too long", func(c *Config) { c.KeepAlive = 70000 * time.Second }, "keepalive"},
		{"inflight", func(c *Config) { c.MaxInflight = 70000 }, "max_inflight"},
		{"inflight timeout", func(c *Config) { c.InflightTimeout = -time.Second }, "inflight_timeout"},
		{"backoff", func(c *Config) { c.BackoffMin = time.Minute; c.BackoffMax = time.Second }, "backoff"},
		{"no topics", func(c *Config) { c.Topics = nil }, "no topics"},
		{"direction", func(c *Config) { c.Topics[0].Direction = "up" }, "direction"},
		{"qos", func(c *Config) { c.Topics[0].QoS = 3 }, "qos"},
		{"wildcard prefix", func(c *Config) { c.Topics[0].LocalPrefix = "a/+/" }, "wildcard"},
		{"bad filter", func(c *Config) { c.Topics[0].Topic = "a/#/b" }, "filter"},
		{"shared", func(c *Config) { c.Topics[0].Topic = "$share/g/#" }, "shared"},
		{"empty filter", func(c *Config) { c.Topics[0].Topic = "" }, "filter"},
		{"prefixes as whole topics", func(c *Config) { c.Topics[0] = Rule{LocalPrefix: "a/b", RemotePrefix: "c"} }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok()
			tt.mod(&c)
			c.SetDefaults()
			err := c.Validate()
			if tt.err == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.err)
			}
		})
	}
	if err := ValidateAll([]Config{ok(), ok()}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("two bridges with one name: %v", err)
	}
	c := ok()
	c.SetDefaults()
	if c.Protocol != ProtocolV5 || c.KeepAlive != DefaultKeepAlive || c.Topics[0].Direction != Out ||
		!strings.HasSuffix(c.ClientID, ".cloud") || c.BackoffMax != DefaultBackoffMax || c.InflightTimeout != DefaultInflightTimeout {
		t.Errorf("defaults: %+v", c)
	}
}
