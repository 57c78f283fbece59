package config

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/xmq-io/xmq/bridge"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/config/configtest"
)

const examplePath = "../../xmq.example.yaml"

// load is cmd/xmq's loadConfig without the web and cluster checks, which
// live there.
func load(args []string) (Config, error) {
	cfg, _, err := LoadEnv(args, os.Environ(), Checks{})
	return cfg, err
}

func mustLoad(t *testing.T, args ...string) Config {
	t.Helper()
	cfg, err := load(args)
	if err != nil {
		t.Fatalf("load(%q): %v", args, err)
	}
	return cfg
}

// commentedList is the list whose entry xmq.example.yaml shows in a
// comment (any entry would change the defaults it must keep).
const commentedList = "cluster.nats.embedded.users[]"

// TestExampleListsEveryKey checks that every configuration key appears in
// xmq.example.yaml, including those whose default is zero.
func TestExampleListsEveryKey(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var inFile []string
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, prefix)
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, prefix+"[]")
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				key := strings.TrimPrefix(prefix+"."+n.Content[i].Value, ".")
				if !slices.Contains(inFile, key) {
					inFile = append(inFile, key)
				}
				walk(n.Content[i+1], key)
			}
		}
	}
	walk(&doc, "")

	var inStruct []string
	var fields func(typ reflect.Type, prefix string)
	fields = func(typ reflect.Type, prefix string) {
		for f := range typ.Fields() {
			if !f.IsExported() || f.Tag.Get("yaml") == "-" {
				continue // flag-only settings such as -pprof: not keys
			}
			key := strings.TrimPrefix(prefix+"."+f.Tag.Get("yaml"), ".")
			if prefix == commentedList {
				// An entry would not be the default: the example shows
				// one in a comment, which must name every key.
				if !strings.Contains(string(data), f.Tag.Get("yaml")+":") {
					t.Errorf("%s: the commented entry lacks %s", examplePath, key)
				}
				continue
			}
			inStruct = append(inStruct, key)
			switch ft := f.Type; {
			case ft.Kind() == reflect.Struct:
				fields(ft, key)
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				fields(ft.Elem(), key+"[]")
			}
		}
	}
	fields(reflect.TypeFor[Config](), "")

	slices.Sort(inFile)
	slices.Sort(inStruct)
	if !slices.Equal(inFile, inStruct) {
		t.Errorf("keys in %s:\n  %v\nconfiguration keys:\n  %v", examplePath, inFile, inStruct)
	}
}

// snake turns a Go field name into its configuration key: MaxKeepAlive → max_keep_alive.
func snake(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) && i > 0 && unicode.IsLower(rune(name[i-1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// TestBrokerConfigCoversOptions fails when core.Options gains a field the
// configuration does not expose, or options() forgets to copy one.
func TestBrokerConfigCoversOptions(t *testing.T) {
	bt := reflect.TypeFor[Broker]()
	var bc Broker
	bv := reflect.ValueOf(&bc).Elem()
	for f := range reflect.TypeFor[core.Options]().Fields() {
		if f.Name == "Version" || f.Name == "AnySessionOwner" {
			continue // the build's version; session_owner_check, its opposite (TestSessionOwnerCheckKey)
		}
		bf, ok := bt.FieldByName(f.Name)
		if !ok {
			t.Errorf("core.Options.%s has no configuration key (add it to Broker, Options() and xmq.example.yaml)", f.Name)
			continue
		}
		if bf.Type != f.Type {
			t.Errorf("brokerConfig.%s is %v, core.Options.%s is %v", f.Name, bf.Type, f.Name, f.Type)
		}
		if tag, want := bf.Tag.Get("yaml"), snake(f.Name); tag != want {
			t.Errorf("brokerConfig.%s has key %q, want %q", f.Name, tag, want)
		}
		// Give the field a non-zero value so the copy below can be checked.
		v := bv.FieldByName(f.Name)
		switch v.Kind() {
		case reflect.Bool:
			v.SetBool(true)
		case reflect.String:
			v.SetString("x")
		case reflect.Int, reflect.Int64:
			v.SetInt(7)
		case reflect.Uint16, reflect.Uint32:
			v.SetUint(7)
		default:
			t.Fatalf("brokerConfig.%s: kind %v not handled by this test", f.Name, v.Kind())
		}
	}
	opts := reflect.ValueOf(bc.Options())
	for f := range reflect.TypeFor[core.Options]().Fields() {
		if f.Name != "Version" && f.Name != "AnySessionOwner" && opts.FieldByName(f.Name).IsZero() {
			t.Errorf("brokerConfig.options() does not copy %s", f.Name)
		}
	}
}

// TestSessionOwnerCheckKey: session_owner_check defaults to true and
// false lets any identity resume a session (core's AnySessionOwner).
func TestSessionOwnerCheckKey(t *testing.T) {
	on, off := true, false
	for _, tc := range []struct {
		v    *bool
		want bool
	}{{nil, false}, {&on, false}, {&off, true}} {
		if got := (Broker{SessionOwnerCheck: tc.v}).Options().AnySessionOwner; got != tc.want {
			t.Errorf("session_owner_check %v: AnySessionOwner %v, want %v", tc.v, got, tc.want)
		}
	}
}

func TestFlagsOverrideFile(t *testing.T) {
	file := configtest.WriteFile(t, `
listeners:
  - name: lan
    address: "10.0.0.1:1883"
data_dir: /var/lib/xmq
log:
  level: debug
  format: json
broker:
  connect_timeout: 3s
  shared_strategy: hash_topic
`)
	tlsDefaults := TLS{ReloadInterval: defaultReloadInterval, HandshakeTimeout: defaultHandshakeTimeout}
	allListeners := Default()
	allListeners.SetDefaults()
	tests := []struct {
		name string
		args []string
		want Config
	}{
		{
			name: "file only",
			args: []string{"-c", file},
			want: Config{
				Listeners: []Listener{{Name: "lan", Transport: "tcp", Address: "10.0.0.1:1883"}},
				TLS:       tlsDefaults,
				DataDir:   "/var/lib/xmq",
				Log:       Log{Level: "debug", Format: "json", MaxSizeMB: defaultLogMaxSizeMB, MaxBackups: defaultLogMaxBackups},
				Broker:    Broker{ConnectTimeout: 3 * time.Second, SharedStrategy: core.SharedHashTopic},
				Web:       defaultWebConfig(),
			},
		},
		{
			name: "flags win",
			args: []string{"-config", file, "-listen", "127.0.0.1:1,127.0.0.1:2", "-listen", "127.0.0.1:3",
				"-log-level", "warn", "-data", ""},
			want: Config{
				Listeners: []Listener{
					{Name: "tcp", Transport: "tcp", Address: "127.0.0.1:1"},
					{Name: "tcp-2", Transport: "tcp", Address: "127.0.0.1:2"},
					{Name: "tcp-3", Transport: "tcp", Address: "127.0.0.1:3"},
				},
				TLS:     tlsDefaults,
				DataDir: "",
				Log:     Log{Level: "warn", Format: "json", MaxSizeMB: defaultLogMaxSizeMB, MaxBackups: defaultLogMaxBackups},
				Broker:  Broker{ConnectTimeout: 3 * time.Second, SharedStrategy: core.SharedHashTopic},
				Web:     defaultWebConfig(),
			},
		},
		{
			name: "flags without file",
			args: []string{"-log-format", "console", "-data", "/tmp/x"},
			want: Config{
				Listeners: allListeners.Listeners,
				TLS:       tlsDefaults,
				DataDir:   "/tmp/x",
				Log:       Log{Level: "info", Format: "console", MaxSizeMB: defaultLogMaxSizeMB, MaxBackups: defaultLogMaxBackups},
				Web:       defaultWebConfig(),
			},
		},
		{
			name: "defaults",
			want: Config{
				Listeners: []Listener{
					{Name: "tcp", Transport: "tcp", Address: ":1883"},
					{Name: "tls", Transport: "tls", Address: ":8883", TLS: ListenerTLS{Verify: "none"}},
					{Name: "ws", Transport: "ws", Address: ":8083", Path: "/mqtt"},
					{Name: "wss", Transport: "wss", Address: ":8084", Path: "/mqtt", TLS: ListenerTLS{Verify: "none"}},
					{Name: "quic", Transport: "quic", Address: ":14567", TLS: ListenerTLS{Verify: "none"}},
				},
				TLS:     tlsDefaults,
				DataDir: "./data",
				Log:     Log{Level: "info", Format: "auto", MaxSizeMB: defaultLogMaxSizeMB, MaxBackups: defaultLogMaxBackups},
				Web:     defaultWebConfig(),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustLoad(t, tt.args...); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("load(%q) =\n  %+v\nwant\n  %+v", tt.args, got, tt.want)
			}
		})
	}
}

func TestEmptyFileIsDefault(t *testing.T) {
	got := mustLoad(t, "-c", configtest.WriteFile(t, "# nothing set\n"))
	if want := mustLoad(t); !reflect.DeepEqual(got, want) {
		t.Errorf("empty file gives %+v, want %+v", got, want)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		file string   // configuration file body; "" = no file
		args []string // extra flags
		err  string   // substring of the error
	}{
		{name: "unknown key", file: "listen: [':1883']\n", err: `listen: unknown key (did you mean "listeners"?)`},
		{name: "unknown nested key", file: "broker:\n  max_conections: 5\n", err: `broker.max_conections: unknown key (did you mean "max_connections"?)`},
		{name: "unknown listener key", file: "listeners:\n  - adress: ':1883'\n", err: `listeners[0].adress: unknown key (did you mean "address"?)`},
		{name: "bad duration", file: "broker:\n  connect_timeout: 10x\n", err: `broker.connect_timeout: "10x" is not a duration (write it with a unit`},
		{name: "duration without unit", file: "broker:\n  write_timeout: 10\n", err: "broker.write_timeout: 10 is not a duration (write 10s)"},
		{name: "negative timeout", file: "broker:\n  connect_timeout: -1s\n", err: "must not be negative"},
		{name: "number out of range", file: "broker:\n  receive_maximum: 70000\n", err: "broker.receive_maximum: 70000 is not a whole number from 0 to 65535"},
		{name: "wrong type", file: "broker:\n  retain_disabled: maybe\n", err: `broker.retain_disabled: "maybe" is not true or false`},
		{name: "tls settings on tcp", file: "listeners:\n  - transport: tcp\n    tls:\n      verify: required\n", err: "tls settings are for"},
		{name: "bad verify", file: "listeners:\n  - transport: tls\n    tls:\n      verify: always\n", err: `listeners[0].tls.verify: "always" is not a client-certificate policy: want none, optional or required`},
		{name: "identity without verify", file: "listeners:\n  - transport: tls\n    tls:\n      identity_as_username: cn\n", err: "listeners[0].tls.identity_as_username: needs tls.verify optional or required"},
		{name: "cert without key", file: "listeners:\n  - transport: wss\n    tls:\n      cert_file: a.pem\n", err: "go together"},
		{name: "acme and files", file: "tls:\n  cert_file: a.pem\n  key_file: b.pem\nacme:\n  domains: [mqtt.example.com]\n", err: "exclude each other"},
		{name: "unknown tls key", file: "tls:\n  certfile: a.pem\n", err: `tls.certfile: unknown key (did you mean "cert_file"?)`},
		{name: "unknown transport", file: "listeners:\n  - transport: udp\n", err: `listeners[0].transport: "udp" is not a transport: want tcp, tls, ws, wss or quic`},
		{name: "duplicate names", file: "listeners:\n  - address: ':1'\n  - address: ':2'\n", err: `listeners[1].name: "tcp" is the name of listeners[0] already`},
		{name: "no listeners", file: "listeners: []\n", err: "no listeners"},
		{name: "bad log level", args: []string{"-log-level", "loud"}, err: `flag -log-level: log.level: "loud" is not a log level: want debug, info, warn or error`},
		{name: "bad log format", file: "log:\n  format: xml\n", err: `log.format: "xml" is not a log format: want auto, console or json`},
		{name: "missing file", args: []string{"-c", "/nonexistent/xmq.yaml"}, err: "no such file"},
		{name: "unknown flag", args: []string{"-bogus"}, err: "flag provided but not defined"},
		{name: "stray argument", args: []string{"serve"}, err: `unexpected argument "serve"`},
		{name: "bridge without topics", file: "bridges:\n  - name: b\n    addresses: [mqtt://h]\n", err: "no topics"},
		{name: "bridge address", file: "bridges:\n  - name: b\n    addresses: [http://h]\n    topics: [{topic: '#'}]\n", err: "unknown scheme"},
		{name: "bridge direction", file: "bridges:\n  - name: b\n    addresses: [h:1]\n    topics: [{topic: '#', direction: up}]\n", err: `direction "up"`},
		{name: "bridge names twice", file: "bridges:\n  - {name: b, addresses: [h:1], topics: [{topic: a}]}\n  - {name: b, addresses: [h:1], topics: [{topic: a}]}\n", err: "used twice"},
		{name: "unknown bridge key", file: "bridges:\n  - name: b\n    adress: h:1\n", err: `bridges[0].adress: unknown key (did you mean "addresses"?)`},
		{name: "listener named like a bridge", file: "listeners:\n  - name: bridge:x\n", err: "are the bridges'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" {
				args = append([]string{"-c", configtest.WriteFile(t, tt.file)}, args...)
			}
			_, err := load(args)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("load(%q) error = %v, want one containing %q", args, err, tt.err)
			}
		})
	}
}

// TestBridgesConfig: the bridges section in Mosquitto's terms, as YAML,
// and what it gives bridge.
func TestBridgesConfig(t *testing.T) {
	cfg := mustLoad(t, "-c", configtest.WriteFile(t, `
bridges:
  - name: cloud
    addresses: [mqtts://a.example:8883, "wss://b.example"]
    protocol: 3.1.1
    username: u
    password: p
    try_private: false
    tls: {ca_file: ca.pem, server_name: mqtt.example}
    keepalive: 30s
    topics:
      - {topic: "sensors/#", direction: out, qos: 1, remote_prefix: site1/}
      - {topic: "cmd/#", direction: in, qos: 2, local_prefix: cloud/}
      - {topic: "#", direction: both}
`))
	got := cfg.BridgeConfigs()
	want := []bridge.Config{{Name: "cloud", Addresses: []string{"mqtts://a.example:8883", "wss://b.example"},
		Protocol: "3.1.1", Username: "u", Password: "p", PlainProtocol: true,
		TLS: bridge.TLS{CAFile: "ca.pem", ServerName: "mqtt.example"}, KeepAlive: 30 * time.Second,
		Topics: []bridge.Rule{{Topic: "sensors/#", Direction: bridge.Out, QoS: 1, RemotePrefix: "site1/"},
			{Topic: "cmd/#", Direction: bridge.In, QoS: 2, LocalPrefix: "cloud/"}, {Topic: "#", Direction: bridge.Both}}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("bridges\n  %+v\nwant\n  %+v", got, want)
	}
	if p := mustLoad(t, "-c", configtest.WriteFile(t, "bridges:\n  - {name: b, addresses: [h:1], protocol: 5, topics: [{topic: a}]}\n")); p.BridgeConfigs()[0].Protocol != "5" {
		t.Errorf("protocol: 5 gives %q", p.BridgeConfigs()[0].Protocol)
	}
}

// TestConfigErrorsNameKeyAndFix: the errors of issue 17, which named Go
// types and no fix, name the key path, the line or variable, and the fix,
// whether the value comes from the file or from the environment; a file
// with several mistakes gets them all, in line order.
func TestConfigErrorsNameKeyAndFix(t *testing.T) {
	tests := []struct {
		name string
		file string
		env  []string
		want string // the whole error, FILE standing for the file's path
	}{
		{name: "unknown listener key", file: "listeners:\n  - adress: ':1883'\n",
			want: `FILE:2: listeners[0].adress: unknown key (did you mean "address"?)`},
		{name: "duration without unit", file: "broker:\n  connect_timeout: 10\n",
			want: `FILE:2: broker.connect_timeout: 10 is not a duration (write 10s)`},
		{name: "unknown strategy", file: "broker:\n  shared_strategy: roundrobin\n",
			want: `FILE:2: broker.shared_strategy: "roundrobin" is not a shared subscription strategy: want round_robin, random, least_inflight, hash_clientid or hash_topic (did you mean round_robin?)`},
		{name: "unknown key from the environment", env: []string{"XMQ_LISTENERS=[{adress: ':1883'}]"},
			want: `environment XMQ_LISTENERS: listeners[0].adress: unknown key (did you mean "address"?)`},
		{name: "duration from the environment", env: []string{"XMQ_BROKER_CONNECT_TIMEOUT=10"},
			want: `environment XMQ_BROKER_CONNECT_TIMEOUT: broker.connect_timeout: 10 is not a duration (write 10s)`},
		{name: "strategy from the environment", env: []string{"XMQ_BROKER_SHARED_STRATEGY=roundrobin"},
			want: `environment XMQ_BROKER_SHARED_STRATEGY: broker.shared_strategy: "roundrobin" is not a shared subscription strategy: want round_robin, random, least_inflight, hash_clientid or hash_topic (did you mean round_robin?)`},
		{name: "core's range under its key", file: "broker:\n  max_inflight: 70000\n  max_queued: -1\n",
			want: "2 problems in the configuration:\n  FILE:2: broker.max_inflight: max inflight 70000 out of range 1..65535\n" +
				"  FILE:3: broker.max_queued: max queued -1 must be at least 1"},
		{name: "every problem at once, in line order", file: "log:\n  level: loud\nlisteners:\n  - address: nowhere\n    transport: tpc\n  - name: x\n    tls: {verify: none}\nbroker:\n  write_timeout: soon\n",
			want: "4 problems in the configuration:\n" +
				"  FILE:2: log.level: \"loud\" is not a log level: want debug, info, warn or error\n" +
				"  FILE:5: listeners[0].transport: \"tpc\" is not a transport: want tcp, tls, ws, wss or quic (did you mean tcp?)\n" +
				"  FILE:7: listeners[1].tls: tls settings are for the tls, wss and quic transports, not tcp\n" +
				"  FILE:9: broker.write_timeout: \"soon\" is not a duration (write it with a unit: 500ms, 10s, 1m30s, 24h)"},
		{name: "what only the listeners check", file: "listeners:\n  - transport: ws\n    allowed_origins: [foo]\n  - name: b\n    proxy_protocol: true\n",
			want: "2 problems in the configuration:\n  FILE:2: listeners[0]: allowed origin \"foo\": want scheme://host[:port] or *\n" +
				"  FILE:4: listeners[1]: proxy protocol needs trusted proxies: the sources allowed to send the header"},
		{name: "key set twice", file: "broker:\n  max_queued: 5\n  max_queued: 6\n",
			want: "FILE:3: broker.max_queued: set twice (first on line 2)"},
		{name: "section where a value goes", file: "data_dir: {a: b}\n",
			want: "FILE:1: data_dir: want a single value, not a section"},
		{name: "not YAML", file: "broker: [\n", want: "FILE:1: not valid YAML: did not find expected node content"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args []string
			file := ""
			if tt.file != "" {
				file = configtest.WriteFile(t, tt.file)
				args = []string{"-c", file}
			}
			_, _, err := LoadEnv(args, tt.env, Checks{})
			if err == nil {
				t.Fatalf("no error, want %s", tt.want)
			}
			got := err.Error()
			if file != "" {
				got = strings.ReplaceAll(got, file, "FILE")
			}
			if got != tt.want {
				t.Errorf("error\n  %s\nwant\n  %s", got, tt.want)
			}
			if strings.Contains(got, "time.Duration") || strings.Contains(got, "main.") || strings.Contains(got, "!!") {
				t.Errorf("the error names a Go type: %s", got)
			}
		})
	}
}
