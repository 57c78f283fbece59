package mosquitto

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/bridge"
	"github.com/xmq-io/xmq/internal/config"
	"github.com/xmq-io/xmq/internal/config/configtest"
	"github.com/xmq-io/xmq/listeners"
)

// importFile runs the importer on path and returns its output and the
// configuration it built.
func importFile(t *testing.T, path string) (string, *Import) {
	t.Helper()
	mc, err := ReadConf(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	im := Convert(mc, path, "")
	var out strings.Builder
	if err := im.Render(&out); err != nil {
		t.Fatalf("render: %v", err)
	}
	return out.String(), im
}

// roundTrip loads the output through the configuration loader, as
// `xmq -c` would, and checks it gives exactly the configuration the
// importer built: the YAML cannot drift from what -c accepts.
func roundTrip(t *testing.T, out string, im *Import) config.Config {
	t.Helper()
	got, _, err := config.LoadEnv([]string{"-c", configtest.WriteFile(t, out)}, nil, config.Checks{})
	if err != nil {
		t.Fatalf("the imported configuration does not load: %v\n%s", err, out)
	}
	want := im.cfg
	want.SetDefaults()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loaded configuration differs from the imported one:\n got %+v\nwant %+v\n%s", got, want, out)
	}
	return got
}

// accountedFor checks that every option line of the Mosquitto files
// appears in the output, as a key's comment or in the list of what was
// not carried over (an unknown one as far as mosqUnknown keeps it).
func accountedFor(t *testing.T, out string, files ...string) {
	t.Helper()
	for _, f := range files {
		budget := int64(MaxConfBytes)
		err := readMosqLines(f, &budget, func(l mosqLine) error {
			want := l.where() + ": " + l.key
			if _, ok := mosqKindOf(l.key); !ok {
				want = mosqUnknown(l).quoted() // the key only, if that
			}
			if !strings.Contains(out, want) {
				t.Errorf("%s (%s) is not accounted for in the output", l.where(), l.key)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestImportMosquittoExample converts Mosquitto's own example
// configuration (Debian's mosquitto package): every option in it is
// commented out, so the result is Mosquitto 2's local-only mode. Every
// option the example documents is one the importer knows.
func TestImportMosquittoExample(t *testing.T) {
	const example = "/usr/share/doc/mosquitto/examples/mosquitto.conf"
	data, err := os.ReadFile(example)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s: %v (.ci/deps installs the mosquitto package)", example, err)
		}
		t.Skipf("%s: %v (apt-get install mosquitto)", example, err)
	}
	out, im := importFile(t, example)
	cfg := roundTrip(t, out, im)
	if len(cfg.Listeners) != 1 || cfg.Listeners[0].Address != "127.0.0.1:1883" || cfg.Auth.AllowAnonymous != auth.AnonymousAllow {
		t.Errorf("example: listeners %+v, allow_anonymous %q; want Mosquitto's local-only mode", cfg.Listeners, cfg.Auth.AllowAnonymous)
	}
	documented := regexp.MustCompile(`(?m)^#([a-z_0-9.]+)( |$)`)
	n := 0
	for _, m := range documented.FindAllStringSubmatch(string(data), -1) {
		if _, ok := mosqKindOf(m[1]); !ok {
			t.Errorf("the example documents %s, which the importer does not know", m[1])
		}
		n++
	}
	if n < 80 {
		t.Errorf("found %d documented options in the example, want the 80 or more it has", n)
	}
}

// TestImportRealistic converts configurations as operators write them:
// Debian's layout with include_dir, per_listener_settings with TLS
// client certificates and a PSK listener, and a bridge with a password.
func TestImportRealistic(t *testing.T) {
	dir := "testdata"
	tests := []struct {
		file  string
		files []string // the files read
		check func(t *testing.T, c config.Config, out string)
	}{
		{"debian.conf", []string{"debian.conf", "conf.d/10-listeners.conf", "conf.d/20-security.conf", "conf.d/30-limits.conf"},
			func(t *testing.T, c config.Config, out string) {
				want := []config.Listener{
					{Name: "tcp-1883", Transport: listeners.TransportTCP, Address: ":1883"},
					{Name: "tls-8883", Transport: listeners.TransportTLS, Address: ":8883"},
					{Name: "ws-9001", Transport: listeners.TransportWS, Address: ":9001"},
					{Name: "wss-9443", Transport: listeners.TransportWSS, Address: "10.0.0.5:9443"},
				}
				for i, w := range want {
					if i >= len(c.Listeners) || c.Listeners[i].Name != w.Name || c.Listeners[i].Transport != w.Transport || c.Listeners[i].Address != w.Address {
						t.Errorf("listener %d = %+v, want %+v", i, c.Listeners[min(i, len(c.Listeners)-1)], w)
					}
				}
				if c.Listeners[2].Path != "*" || c.Listeners[3].Path != "*" {
					t.Errorf("websockets listeners' paths %q, %q; want * (every path, as Mosquitto)", c.Listeners[2].Path, c.Listeners[3].Path)
				}
				if tl := c.Listeners[1].TLS; tl.CertFile != "/etc/mosquitto/certs/server.crt" || tl.MinVersion != "1.2" || tl.ClientCAFile == "" {
					t.Errorf("tls listener: %+v", tl)
				}
				b := c.Broker
				if b.MaxQueued != 5000 || b.MaxInflight != 40 || b.MaxKeepAlive != 300 || b.SysInterval != 30*time.Second ||
					b.MaxSessionExpiry != 14*86400 || b.MaxPacketSize != 262144+64<<10 || b.RetainDisabled {
					t.Errorf("broker: %+v", b)
				}
				if a := c.Auth; a.PasswordFile != "/etc/mosquitto/passwd" || a.ACLFile != "/etc/mosquitto/acl" || a.AllowAnonymous != auth.AnonymousDeny {
					t.Errorf("auth: %+v", a)
				}
				if c.DataDir != "/var/lib/mosquitto" || c.Log.Level != "info" {
					t.Errorf("data_dir %q, log level %q", c.DataDir, c.Log.Level)
				}
				for _, want := range []string{"pid_file", "log_dest file", "autosave_interval 600"} {
					if !strings.Contains(out, want) {
						t.Errorf("output does not list %q as not carried over", want)
					}
				}
			}},
		{"per-listener.conf", []string{"per-listener.conf"}, func(t *testing.T, c config.Config, out string) {
			if len(c.Listeners) != 2 {
				t.Fatalf("%d listeners, want 2 (the PSK one is not carried over): %+v", len(c.Listeners), c.Listeners)
			}
			sensors, ops := c.Listeners[0], c.Listeners[1]
			if sensors.Address != "192.168.10.1:1883" || sensors.AllowAnonymous != auth.AnonymousAllow {
				t.Errorf("sensors listener: %+v", sensors)
			}
			tl := ops.TLS
			if ops.AllowAnonymous != auth.AnonymousDeny || tl.Verify != "required" || tl.IdentityAsUsername != "cn" ||
				tl.ClientCRLFile == "" || !slices.Equal(tl.CipherSuites, []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}) ||
				ops.MaxConnections != 200 {
				t.Errorf("operators listener: %+v", ops)
			}
			if c.Auth.PasswordFile != "/etc/mosquitto/passwd.operators" || c.Auth.ACLFile != "/etc/mosquitto/acl.sensors" {
				t.Errorf("auth: %+v", c.Auth)
			}
			for _, want := range []string{"xmq has one acl_file for every listener", "tls-8883 (/etc/mosquitto/acl.operators) had another",
				"tcp-1883 had none and now use it too", "TLS-PSK", "dropped: HIGH:!aNULL"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q", want)
				}
			}
			if !c.Broker.RetainDisabled || c.Broker.SysInterval >= 0 || c.Broker.MaxPacketSize != 65536 {
				t.Errorf("broker: %+v", c.Broker)
			}
		}},
		{"bridge.conf", []string{"bridge.conf"}, func(t *testing.T, c config.Config, out string) {
			// The password is the bridge's setting, as in mosquitto.conf;
			// no comment repeats it, nor a plugin option's value.
			if strings.Count(out, "s3cret-do-not-leak") != 1 || strings.Contains(out, "dynamic-security.json") {
				t.Error("a secret or plugin option value was copied into a comment")
			}
			for _, want := range []string{"connection cloud", "remote_password <redacted>", "xmq loads no plugins"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q", want)
				}
			}
			want := []bridge.Config{{Name: "cloud", Addresses: []string{"mqtts://mqtt.example.com:8883"}, Protocol: "3.1.1",
				Username: "site-42", Password: "s3cret-do-not-leak", TLS: bridge.TLS{CAFile: "/etc/mosquitto/certs/cloud-ca.pem"},
				Topics: []bridge.Rule{{Topic: "telemetry/#", Direction: bridge.Out, QoS: 1, RemotePrefix: "site-42/"},
					{Topic: "commands/#", Direction: bridge.In, QoS: 1, RemotePrefix: "site-42/"}}}}
			if got := c.BridgeConfigs(); !reflect.DeepEqual(got, want) {
				t.Errorf("bridges\n  %+v\nwant\n  %+v", got, want)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			out, im := importFile(t, filepath.Join(dir, tt.file))
			cfg := roundTrip(t, out, im)
			var files []string
			for _, f := range tt.files {
				files = append(files, filepath.Join(dir, f))
			}
			accountedFor(t, out, files...)
			tt.check(t, cfg, out)
		})
	}
}

// mosqSamples is a plausible value of every Mosquitto option, for
// TestImportEveryOption.
var mosqSamples = map[string]string{
	"acl_file": "/etc/mosquitto/acl", "allow_anonymous": "false", "allow_duplicate_messages": "true",
	"allow_zero_length_clientid": "false", "auth_opt_*": "db_host localhost", "auth_plugin": "/usr/lib/auth.so",
	"auth_plugin_deny_special_chars": "true", "auto_id_prefix": "auto-", "autosave_interval": "1800",
	"autosave_on_changes": "false", "check_retain_source": "true", "clientid_prefixes": "secure-",
	"connection_messages": "false", "include_dir": "conf.d", "log_dest": "syslog", "log_facility": "5",
	"log_timestamp": "true", "log_timestamp_format": "%Y-%m-%dT%H:%M:%S", "log_type": "all",
	"max_inflight_bytes": "0", "max_inflight_messages": "0", "max_keepalive": "120", "max_packet_size": "0",
	"max_queued_bytes": "1000000", "max_queued_messages": "0", "memory_limit": "0", "message_size_limit": "1000",
	"password_file": "/etc/mosquitto/passwd", "per_listener_settings": "false", "persistence": "false",
	"persistence_file": "mosquitto.db", "persistence_location": "/var/lib/mosquitto/",
	"persistent_client_expiration": "1y", "pid_file": "/run/mosquitto.pid", "plugin": "/usr/lib/dynsec.so",
	"plugin_opt_*": "config_file /var/lib/dynsec.json", "psk_file": "/etc/mosquitto/psk", "queue_qos0_messages": "true",
	"retain_available": "true", "retained_persistence": "false", "retry_interval": "20", "set_tcp_nodelay": "true",
	"sys_interval": "0", "upgrade_outgoing_qos": "true", "user": "mosquitto", "websockets_headers_size": "4096",
	"websockets_log_level": "0",
	// Listeners.
	"bind_address": "127.0.0.1", "bind_interface": "eth0", "http_dir": "/var/www", "listener": "8883",
	"max_connections": "-1", "max_qos": "1", "maximum_qos": "1", "max_topic_alias": "10", "mount_point": "tenant/",
	"port": "1884", "protocol": "mqtt", "socket_domain": "ipv4", "use_username_as_clientid": "true",
	// Listener TLS.
	"cafile": "/etc/ca.pem", "capath": "/etc/ssl/certs", "certfile": "/etc/server.pem",
	"ciphers": "ECDHE-RSA-AES256-GCM-SHA384", "ciphers_tls1.3": "TLS_AES_256_GCM_SHA384", "crlfile": "/etc/crl.pem",
	"dhparamfile": "/etc/dh.pem", "keyfile": "/etc/server-key.pem", "require_certificate": "true",
	"tls_engine": "pkcs11", "tls_engine_kpass_sha1": "0123", "tls_keyform": "pem", "tls_version": "tlsv1.1",
	"use_identity_as_username": "true", "use_subject_as_username": "true", "psk_hint": "hint",
	// Bridges.
	"connection": "cloud", "address": "cloud.example.com:8883", "addresses": "a.example.com b.example.com",
	"bridge_attempt_unsubscribe": "false", "bridge_bind_address": "10.0.0.2", "bridge_max_packet_size": "0",
	"bridge_outgoing_retain": "true", "bridge_protocol_version": "mqttv50", "cleansession": "true",
	"local_cleansession": "false", "keepalive_interval": "60", "idle_timeout": "60", "local_clientid": "local.cloud",
	"local_password": "lp", "local_username": "lu", "notifications": "true", "notifications_local_only": "false",
	"notification_topic": "bridge/state", "remote_clientid": "site-1", "clientid": "site-1", "remote_password": "rp",
	"password": "rp", "remote_username": "ru", "username": "ru", "restart_timeout": "5 30", "round_robin": "false",
	"start_type": "automatic", "threshold": "10", "topic": "# both 1", "try_private": "true", "bridge_alpn": "mqtt",
	"bridge_cafile": "/etc/ca.pem", "bridge_capath": "/etc/ssl/certs", "bridge_certfile": "/etc/c.pem",
	"bridge_identity": "id", "bridge_insecure": "false", "bridge_keyfile": "/etc/k.pem", "bridge_psk": "abcd",
	"bridge_require_ocsp": "false", "bridge_tls_version": "tlsv1.2",
}

// TestImportEveryOption writes a file with every option Mosquitto 2.0
// knows and checks each line is accounted for, with the result loading.
func TestImportEveryOption(t *testing.T) {
	var global, listener, bridge []string
	for _, opt := range sortedKeys(mosqOptions) {
		v, ok := mosqSamples[opt]
		if !ok {
			t.Errorf("no sample value for %s", opt)
			continue
		}
		key := strings.ReplaceAll(opt, "*", "x")
		switch line := key + " " + v; {
		case opt == "include_dir" || opt == "listener" || opt == "connection":
		case mosqOptions[opt] == mosqBridge:
			bridge = append(bridge, line)
		case mosqOptions[opt] == mosqListener:
			listener = append(listener, line)
		default:
			global = append(global, line)
		}
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "conf.d"), 0o700); err != nil {
		t.Fatal(err)
	}
	body := strings.Join(global, "\n") + "\nlistener 8883\n" + strings.Join(listener, "\n") +
		"\nconnection cloud\n" + strings.Join(bridge, "\n") + "\nnot_an_option 1\ninclude_dir " + filepath.Join(dir, "conf.d") + "\n"
	path := filepath.Join(dir, "mosquitto.conf")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	out, im := importFile(t, path)
	roundTrip(t, out, im)
	accountedFor(t, out, path)
	if !strings.Contains(out, ": not_an_option\n#     not a Mosquitto 2.0 option") {
		t.Errorf("an unknown option is not reported as such:\n%s", out)
	}
}

// TestImportPerListenerDefault: with per_listener_settings, security
// options before the first listener configure Mosquitto's default
// listener on port 1883, which Mosquitto then starts.
func TestImportPerListenerDefault(t *testing.T) {
	path := configtest.WriteFile(t, "per_listener_settings true\npassword_file /etc/pw\nallow_anonymous true\nlistener 8883\ncertfile /c.pem\nkeyfile /k.pem\n")
	out, im := importFile(t, path)
	c := roundTrip(t, out, im)
	if len(c.Listeners) != 2 || c.Listeners[0].Address != ":1883" || c.Listeners[0].AllowAnonymous != auth.AnonymousAllow ||
		c.Listeners[1].AllowAnonymous != auth.AnonymousDeny || c.Auth.PasswordFile != "/etc/pw" {
		t.Errorf("listeners %+v, auth %+v", c.Listeners, c.Auth)
	}
	if !strings.Contains(out, "default listener") {
		t.Errorf("the default listener is not named:\n%s", out)
	}
}

// TestMigrationDocCoversEveryOption keeps docs/migrating-from-mosquitto.md
// in step with the importer: every Mosquitto option has its row.
func TestMigrationDocCoversEveryOption(t *testing.T) {
	doc, err := os.ReadFile("../../docs/migrating-from-mosquitto.md")
	if err != nil {
		t.Fatal(err)
	}
	for opt := range mosqOptions {
		if !strings.Contains(string(doc), fmt.Sprintf("| `%s`", opt)) {
			t.Errorf("docs/migrating-from-mosquitto.md has no row for `%s`", opt)
		}
	}
}

// TestImportBridges: Mosquitto's defaults where a connection leaves things
// out (MQTT 3.1.1, port 1883), start_type manual, restart_timeout, a name
// xmq does not take as it is, and a connection that cannot run.
func TestImportBridges(t *testing.T) {
	path := configtest.WriteFile(t, `listener 1883
connection site a/b
addresses broker.example.com other.example.com:1884
topic # both 2
start_type manual
restart_timeout 5 60
try_private false
keepalive_interval 30

connection empty
address nowhere.example.com
`)
	out, im := importFile(t, path)
	c := roundTrip(t, out, im)
	accountedFor(t, out, path)
	f := false
	want := []config.Bridge{{Name: "site-a-b", Enabled: &f, Addresses: []string{"mqtt://broker.example.com:1883", "mqtt://other.example.com:1884"},
		Protocol: "3.1.1", KeepAlive: 30 * time.Second, TryPrivate: &f, BackoffMin: 5 * time.Second, BackoffMax: time.Minute,
		Topics: []config.BridgeTopicRule{{Topic: "#", Direction: "both", QoS: 2}}}}
	if !reflect.DeepEqual(c.Bridges, want) {
		t.Errorf("bridges\n  %+v\nwant\n  %+v", c.Bridges, want)
	}
	for _, w := range []string{"bridge site-a-b speaks MQTT 3.1.1, Mosquitto's default", "letters, digits",
		"connection empty\n#     this bridge is not carried over: bridge empty: no topics"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// largeMosquittoConf writes a Mosquitto configuration of about n lines as
// a large site has them: listeners, security, logging, and many bridges,
// each with a few dozen topic lines and a password; returns its path
// and size.
func largeMosquittoConf(t *testing.T, n int) (string, int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mosquitto.conf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprint(w, "per_listener_settings false\nlistener 1883\nlistener 8883\ncertfile /etc/c.pem\nkeyfile /etc/k.pem\n"+
		"password_file /etc/mosquitto/passwd\nacl_file /etc/mosquitto/acl\nlog_type all\nlog_dest syslog\n")
	lines := 9
	for i := 0; lines < n; i++ {
		fmt.Fprintf(w, "\n# site %d\nconnection site%d\naddress h%d.example.com:8883\nbridge_cafile /etc/ca.pem\n"+
			"remote_username site%d\nremote_password pw%d\ncleansession false\nlocal_clientid l%d\n", i, i, i, i, i, i)
		lines += 9
		for j := 0; j < 24 && lines < n; j++ {
			fmt.Fprintf(w, "topic sensors/%d/%d/# out 1 \"\" site%d/\n", i, j, i)
			lines++
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, fi.Size()
}

// allocated is the bytes the Go runtime allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestImportLargeBoundedMemory: importing a large configuration allocates
// a bounded multiple of its size, reading and converting it as well as
// writing the result. A step quadratic in the lines (each bridge checked
// again with every earlier one) or an encoder that keeps the whole
// output's events (yaml.v3's emitter does, per Encode call) fails it at
// once: they allocated thousands of times the input, and held hundreds of
// times its size while writing.
func TestImportLargeBoundedMemory(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 5000
	}
	path, size := largeMosquittoConf(t, n)
	// The heap's peak depends on when the collector runs: pace it as by
	// default whatever GOGC says.
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	var im *Import
	read := allocated(func() {
		mc, err := ReadConf(path)
		if err != nil {
			t.Fatal(err)
		}
		im = Convert(mc, path, "")
	})
	var out countingWriter
	peak := peakHeap(func() {
		if err := im.Render(&out); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%d lines, %d bytes: read and converted with %d bytes allocated (%.1f× the input); rendered %d bytes with the heap %d bytes above where it was at most (%.1f×)",
		n, size, read, float64(read)/float64(size), out.n, peak, float64(peak)/float64(size))
	if read > 60*uint64(size) {
		t.Errorf("reading and converting %d bytes allocated %d, more than 60 times as much", size, read)
	}
	// The collector lets the first 4 MB of garbage be: a small input's
	// allowance.
	if peak > 60*uint64(size)+4<<20 {
		t.Errorf("rendering the import of %d bytes took the heap %d bytes higher, more than 60 times as much and 4 MB", size, peak)
	}
}

// peakHeap is how far above its size before f the heap's objects went
// while f ran, sampled every 200µs. Garbage counts until it is collected,
// so this is an upper bound on what f held.
func peakHeap(f func()) uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	runtime.GC()
	base := read()
	done, result := make(chan struct{}), make(chan uint64)
	go func() {
		peak := base
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for {
			peak = max(peak, read())
			select {
			case <-done:
				result <- peak - base
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(done)
	return <-result
}

// countingWriter counts the bytes written to it and keeps none.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

// TestImportRenderInParts: the output written a few list items at a time
// is the text one encoder writes for the whole configuration, whichever
// items a part boundary falls between: heavy bridges written key by key,
// head comments on a part's first key and on list items, the default
// listener's comment.
func TestImportRenderInParts(t *testing.T) {
	large, _ := largeMosquittoConf(t, 700)
	long := strings.Repeat("a-very-long-connection-name-", 4)
	crafted := configtest.WriteFile(t, "port 1884\nlog_type error\nlog_type debug\n"+
		"listener 8883\ncertfile /c.pem\nkeyfile /k.pem\nlistener 9001\nprotocol websockets\n"+
		"connection "+long+"\naddress a.example.com\ntopic # out\ntopic a/# in 1\ntopic b/# both 2 l/ r/\n"+
		"connection short\naddresses b.example.com c.example.com:1884\ntopic x/# out\nremote_password p\n")
	for _, path := range []string{"testdata/debian.conf", "testdata/per-listener.conf",
		"testdata/bridge.conf", large, crafted} {
		mc, err := ReadConf(path)
		if err != nil {
			t.Fatal(err)
		}
		var whole strings.Builder
		if err := Convert(mc, path, "").renderParts(&whole, math.MaxInt); err != nil {
			t.Fatal(err)
		}
		for _, chunk := range []int{1, 2, 7, yamlChunk} {
			mc, err := ReadConf(path)
			if err != nil {
				t.Fatal(err)
			}
			var parts strings.Builder
			if err := Convert(mc, path, "").renderParts(&parts, chunk); err != nil {
				t.Fatal(err)
			}
			if parts.String() != whole.String() {
				t.Errorf("%s in parts of %d differs from the whole:\n%s", path, chunk, lineDiff(whole.String(), parts.String()))
			}
		}
	}
}

// lineDiff shows the first line where a and b differ, with its number.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  whole: %q\n  parts: %q", i+1, x, y)
		}
	}
	return "(no difference)"
}

// TestImportIncludeOrder: include_dir's files are read in Mosquitto's
// order (src/conf.c, scmp_p), which decides the value of an option that
// two of them set.
func TestImportIncludeOrder(t *testing.T) {
	want := []string{"A.conf", "Ab.conf", "a.conf", "aa.conf", "aB.conf", "a_x.conf", "b.conf", "Z.conf", "_.conf"}
	got := slices.Clone(want)
	slices.Reverse(got)
	slices.SortFunc(got, mosqNameOrder)
	if !slices.Equal(got, want) {
		t.Errorf("order\n  %q\nwant Mosquitto's\n  %q", got, want)
	}

	// Names that differ in more than case, for file systems that do not.
	dir := t.TempDir()
	names := []string{"A.conf", "b.conf", "_.conf"}
	for i, name := range names {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(fmt.Sprintf("max_keepalive %d\n", 100+i)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, im := importFile(t, configtest.WriteFile(t, "include_dir "+dir+"\n"))
	var base []string
	for _, f := range im.includes {
		base = append(base, filepath.Base(f))
	}
	if !slices.Equal(base, names) || im.cfg.Broker.MaxKeepAlive != 102 {
		t.Errorf("read %q, max_keep_alive %d; want %q and 102, from _.conf, the last file Mosquitto reads", base, im.cfg.Broker.MaxKeepAlive, names)
	}
}

// TestImportRefusesEndlessInput: input of unknown size (a pipe) is read
// no further than the limit.
func TestImportRefusesEndlessInput(t *testing.T) {
	src := &endlessComments{}
	budget := int64(MaxConfBytes)
	err := scanMosqLines(src, "/dev/stdin", &budget, func(mosqLine) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "/dev/stdin is larger than 16 MiB") {
		t.Errorf("error = %v, want /dev/stdin refused as larger than 16 MiB", err)
	}
	if src.n > MaxConfBytes+1 {
		t.Errorf("read %d bytes of an endless input, more than the limit and one", src.n)
	}
}

// endlessComments is an input of comment lines that never ends.
type endlessComments struct{ n int64 }

func (r *endlessComments) Read(p []byte) (int, error) {
	const line = "# a comment line, again and again\n"
	for i := range p {
		p[i] = line[(r.n+int64(i))%int64(len(line))]
	}
	r.n += int64(len(p))
	return len(p), nil
}
