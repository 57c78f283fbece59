package config

import (
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/internal/config/configtest"
)

// loadEnv loads the configuration from args and env (KEY=VALUE strings).
func loadEnv(t *testing.T, env []string, args ...string) (Config, Sources, error) {
	t.Helper()
	return LoadEnv(args, env, Checks{})
}

func TestEnvSetsKeys(t *testing.T) {
	oneListener := configtest.WriteFile(t, "listeners:\n  - name: lan\n    address: 10.0.0.1:1883\nbroker:\n  max_queued: 10\n")
	sum := strings.Repeat("ab", 32)
	tests := []struct {
		name  string
		env   []string
		args  []string
		check func(t *testing.T, c Config)
	}{
		{"number", []string{"XMQ_BROKER_MAX_QUEUED=5000"}, nil, func(t *testing.T, c Config) {
			if c.Broker.MaxQueued != 5000 {
				t.Errorf("max_queued %d", c.Broker.MaxQueued)
			}
		}},
		{"longest key first", []string{"XMQ_BROKER_MAX_QUEUED_BYTES=100"}, nil, func(t *testing.T, c Config) {
			if c.Broker.MaxQueuedBytes != 100 || c.Broker.MaxQueued != 0 {
				t.Errorf("max_queued_bytes %d, max_queued %d", c.Broker.MaxQueuedBytes, c.Broker.MaxQueued)
			}
		}},
		{"duration", []string{"XMQ_BROKER_WRITE_TIMEOUT=1m30s"}, nil, func(t *testing.T, c Config) {
			if c.Broker.WriteTimeout != 90*time.Second {
				t.Errorf("write_timeout %v", c.Broker.WriteTimeout)
			}
		}},
		{"text stays text", []string{"XMQ_DATA_DIR=null", "XMQ_LOG_LEVEL=warn"}, nil, func(t *testing.T, c Config) {
			if c.DataDir != "null" || c.Log.Level != "warn" {
				t.Errorf("data_dir %q, log.level %q", c.DataDir, c.Log.Level)
			}
		}},
		{"empty is the zero value", []string{"XMQ_DATA_DIR="}, nil, func(t *testing.T, c Config) {
			if c.DataDir != "" {
				t.Errorf("data_dir %q", c.DataDir)
			}
		}},
		{"bool and named string", []string{"XMQ_WEB_ALLOW_ANONYMOUS_LOOPBACK=true", "XMQ_AUTH_ALLOW_ANONYMOUS=true"}, nil, func(t *testing.T, c Config) {
			if !c.Web.AllowAnonymousLoopback || c.Auth.AllowAnonymous != auth.Anonymous("true") {
				t.Errorf("web.allow_anonymous_loopback %v, auth.allow_anonymous %q", c.Web.AllowAnonymousLoopback, c.Auth.AllowAnonymous)
			}
		}},
		{"comma list", []string{"XMQ_LISTENERS_2_ALLOWED_ORIGINS=https://a.example, https://b.example,"}, nil, func(t *testing.T, c Config) {
			if got := c.Listeners[2].AllowedOrigins; !reflect.DeepEqual(got, []string{"https://a.example", "https://b.example"}) {
				t.Errorf("allowed_origins %q", got)
			}
		}},
		{"flow list", []string{"XMQ_LISTENERS_2_TRUSTED_PROXIES=[10.0.0.0/8, '192.168.0.1']"}, nil, func(t *testing.T, c Config) {
			if got := c.Listeners[2].TrustedProxies; !reflect.DeepEqual(got, []string{"10.0.0.0/8", "192.168.0.1"}) {
				t.Errorf("trusted_proxies %q", got)
			}
		}},
		{"list entry over the defaults", []string{"XMQ_LISTENERS_0_ADDRESS=127.0.0.1:1884", "XMQ_LISTENERS_1_TLS_VERIFY=required"}, nil, func(t *testing.T, c Config) {
			if len(c.Listeners) != 5 || c.Listeners[0].Address != "127.0.0.1:1884" || c.Listeners[0].Name != "tcp" ||
				c.Listeners[1].TLS.Verify != "required" || c.Listeners[2].Address != ":8083" {
				t.Errorf("listeners %+v", c.Listeners)
			}
		}},
		{"list entry added after the file's", []string{"XMQ_LISTENERS_1_TRANSPORT=ws"}, []string{"-c", oneListener}, func(t *testing.T, c Config) {
			want := []Listener{{Name: "lan", Transport: "tcp", Address: "10.0.0.1:1883"}, {Name: "ws", Transport: "ws", Address: ":8083", Path: "/mqtt"}}
			if !reflect.DeepEqual(c.Listeners, want) {
				t.Errorf("listeners %+v, want %+v", c.Listeners, want)
			}
		}},
		{"whole list, then its entries", []string{"XMQ_LISTENERS_0_NAME=main", `XMQ_LISTENERS=[{transport: tcp, address: "127.0.0.1:1"}, {transport: quic}]`}, nil, func(t *testing.T, c Config) {
			if len(c.Listeners) != 2 || c.Listeners[0].Name != "main" || c.Listeners[0].Address != "127.0.0.1:1" || c.Listeners[1].Transport != "quic" {
				t.Errorf("listeners %+v", c.Listeners)
			}
		}},
		{"map entries", []string{"XMQ_WEB_API_KEYS_CI_ROLE=viewer", "XMQ_WEB_API_KEYS_CI_SHA256=" + sum}, nil, func(t *testing.T, c Config) {
			if want := (map[string]APIKey{"ci": {SHA256: sum, Role: "viewer"}}); !reflect.DeepEqual(c.Web.APIKeys, want) {
				t.Errorf("api_keys %+v", c.Web.APIKeys)
			}
		}},
		{"section in flow style", []string{"XMQ_BROKER={max_queued: 7, retain_disabled: true}"}, []string{"-c", oneListener}, func(t *testing.T, c Config) {
			if c.Broker.MaxQueued != 7 || !c.Broker.RetainDisabled {
				t.Errorf("broker %+v", c.Broker)
			}
		}},
		{"environment over file", []string{"XMQ_BROKER_MAX_QUEUED=20"}, []string{"-c", oneListener}, func(t *testing.T, c Config) {
			if c.Broker.MaxQueued != 20 {
				t.Errorf("max_queued %d, want the environment's 20 over the file's 10", c.Broker.MaxQueued)
			}
		}},
		{"flags over environment", []string{"XMQ_DATA_DIR=/from/env", "XMQ_LOG_FORMAT=json"}, []string{"-data", "/from/flag"}, func(t *testing.T, c Config) {
			if c.DataDir != "/from/flag" || c.Log.Format != "json" {
				t.Errorf("data_dir %q, log.format %q", c.DataDir, c.Log.Format)
			}
		}},
		{"other variables are left alone", []string{"XMQ_ADMIN_PASSWORD=x", "XMQ_CORE_TCP=1", "XMQ_SCREENSHOT_DIR=/tmp", "PATH=/bin", "xmq_broker_max_queued=3"}, nil, func(t *testing.T, c Config) {
			if want := mustLoad(t); !reflect.DeepEqual(c, want) {
				t.Errorf("configuration %+v, want the defaults", c)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, err := loadEnv(t, tt.env, tt.args...)
			if err != nil {
				t.Fatalf("load with %q: %v", tt.env, err)
			}
			tt.check(t, c)
		})
	}
}

func TestEnvErrors(t *testing.T) {
	tests := []struct {
		env  string
		want string // substring of the error
	}{
		{"XMQ_BROKER_MAX_QUEUD=1", "closest: XMQ_BROKER_MAX_QUEUED"},
		{"XMQ_BROKER_NOPE=1", "XMQ_BROKER_NOPE is not a configuration variable"},
		{"XMQ_DATADIR=/x", "closest: XMQ_DATA_DIR"},
		{"XMQ_LISTENERS_3_ADRESS=:1", "closest: XMQ_LISTENERS_3_ADDRESS"},
		{"XMQ_LISTENERS_X_ADDRESS=:1", "XMQ_LISTENERS_X_ADDRESS is not a configuration variable"},
		{"XMQ_LISTENERS_7_ADDRESS=:1", "entry 7 of a list of 5"},
		{"XMQ_BROKER_MAX_QUEUED=many", `environment XMQ_BROKER_MAX_QUEUED: broker.max_queued: "many" is not a number`},
		{"XMQ_BROKER_WRITE_TIMEOUT=10", "environment XMQ_BROKER_WRITE_TIMEOUT: broker.write_timeout: 10 is not a duration (write 10s)"},
		{"XMQ_BROKER={bogus: 1}", "environment XMQ_BROKER: broker.bogus: unknown key (the keys here: connect_timeout,"},
		{"XMQ_LISTENERS=[{adress: ':1'}]", `environment XMQ_LISTENERS: listeners[0].adress: unknown key (did you mean "address"?)`},
		{"XMQ_LOG_LEVEL=loud", `environment XMQ_LOG_LEVEL: log.level: "loud" is not a log level`}, // validation runs after the environment
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			_, _, err := loadEnv(t, []string{tt.env})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("load with %s: %v, want an error containing %q", tt.env, err, tt.want)
			}
		})
	}
}

// TestEveryKeyHasAVariable resolves the variable of every configuration
// key (xmq config env's list) back to its key, so a key added to the
// config struct is settable from the environment with no more code.
func TestEveryKeyHasAVariable(t *testing.T) {
	tpls := envTemplates(reflect.TypeFor[Config](), envPrefix, "")
	if len(tpls) < 60 {
		t.Fatalf("only %d variables", len(tpls))
	}
	seen := map[string]bool{}
	for _, tpl := range tpls {
		name := strings.NewReplacer("<N>", "3", "<NAME>", "GRAFANA").Replace(tpl.Name)
		key := strings.NewReplacer("<N>", "3", "<NAME>", "grafana").Replace(tpl.Key)
		path, ok := resolveEnv(reflect.TypeFor[Config](), strings.TrimPrefix(name, envPrefix))
		if !ok || strings.Join(path, ".") != key {
			t.Errorf("%s resolves to %q, %v; want %s", name, path, ok, key)
		}
		if seen[name] {
			t.Errorf("%s names two keys", name)
		}
		seen[name] = true
	}
	for _, want := range []string{"XMQ_BROKER_MAX_QUEUED", "XMQ_LISTENERS_<N>_TLS_CLIENT_CA_FILE", "XMQ_WEB_API_KEYS_<NAME>_SHA256", "XMQ_STORE_DURABILITY"} {
		if !seen[strings.NewReplacer("<N>", "3", "<NAME>", "GRAFANA").Replace(want)] {
			t.Errorf("no variable %s", want)
		}
	}
}

func TestEnvSources(t *testing.T) {
	_, src, err := loadEnv(t, []string{"XMQ_BROKER_MAX_QUEUED=5", "XMQ_LISTENERS_0_ADDRESS=127.0.0.1:1", "XMQ_DATA_DIR=/env"},
		"-data", "/flag", "-log-level", "debug")
	if err != nil {
		t.Fatal(err)
	}
	want := Sources{"broker.max_queued": "XMQ_BROKER_MAX_QUEUED", "listeners.0.address": "XMQ_LISTENERS_0_ADDRESS",
		"data_dir": "-data", "log.level": "-log-level"}
	if !reflect.DeepEqual(src, want) {
		t.Errorf("sources %v, want %v", src, want)
	}
	// -listen replaces the list the environment changed.
	_, src, err = loadEnv(t, []string{"XMQ_LISTENERS_0_ADDRESS=127.0.0.1:1"}, "-listen", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Sources{"listeners": "-listen"}); !reflect.DeepEqual(src, want) {
		t.Errorf("sources %v, want %v", src, want)
	}
}

// TestFlagKeys checks that every configuration flag names the key it
// overrides, as config print marks it.
func TestFlagKeys(t *testing.T) {
	keys := map[string]bool{}
	for _, tpl := range envTemplates(reflect.TypeFor[Config](), envPrefix, "") {
		keys[tpl.Key] = true
	}
	Flags().VisitAll(func(f *flag.Flag) {
		switch f.Name {
		case "c", "config", "pprof", "version":
			return // not configuration keys
		}
		if k, ok := flagKeys[f.Name]; !ok || !keys[k] {
			t.Errorf("-%s: flagKeys has %q, not a configuration key", f.Name, k)
		}
	})
}
