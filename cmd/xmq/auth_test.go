package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/config"
	"github.com/xmq-io/xmq/internal/config/configtest"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// TestExampleAuthIsDefault: the auth section of xmq.example.yaml spells
// out auth's defaults.
func TestExampleAuthIsDefault(t *testing.T) {
	example, bare := mustLoad(t, "-c", examplePath), mustLoad(t)
	got, def := example.AuthOptions(), bare.AuthOptions()
	got.SetDefaults()
	def.SetDefaults()
	if got.PasswordFile != def.PasswordFile || got.ACLFile != def.ACLFile || got.AllowAnonymous != def.AllowAnonymous ||
		got.ReloadInterval != def.ReloadInterval || got.ACLCacheSize != def.ACLCacheSize || got.LoginCacheTTL != def.LoginCacheTTL ||
		got.Limits != def.Limits || got.JWT != def.JWT || got.HTTP != def.HTTP ||
		len(got.ListenerAnonymous) != 0 || len(got.CertListeners) != 0 {
		t.Errorf("example auth section gives\n  %+v\nwant auth's defaults\n  %+v", got, def)
	}
}

func TestAuthConfig(t *testing.T) {
	file := writeFile(t, `
listeners:
  - name: lan
    address: "127.0.0.1:0"
    allow_anonymous: "false"
  - name: mtls
    transport: tls
    tls:
      verify: required
      identity_as_username: cn
auth:
  password_file: /etc/mosquitto/passwd
  acl_file: /etc/mosquitto/acl
  allow_anonymous: true
  connection_rate: 2.5
  http:
    url: https://auth.example/mqtt/auth
    acl_url: https://auth.example/mqtt/acl
    timeout: 2s
    queue_wait: 500ms
    cache_ttl: 30s
    cache_key: credentials
    max_inflight: 16
    fail_open: true
    tls: {ca_file: /etc/xmq/auth-ca.pem, cert_file: /etc/xmq/broker.pem, key_file: /etc/xmq/broker-key.pem, server_name: auth.internal}
`)
	cfg := mustLoad(t, "-c", file)
	o := cfg.AuthOptions()
	if want := (auth.HTTPOptions{URL: "https://auth.example/mqtt/auth", ACLURL: "https://auth.example/mqtt/acl",
		Timeout: 2 * time.Second, QueueWait: 500 * time.Millisecond, CacheTTL: 30 * time.Second, CacheKey: auth.HTTPCacheCredentials,
		MaxInflight: 16, FailOpen: true, CAFile: "/etc/xmq/auth-ca.pem", CertFile: "/etc/xmq/broker.pem",
		KeyFile: "/etc/xmq/broker-key.pem", ServerName: "auth.internal"}); o.HTTP != want {
		t.Errorf("auth.http gives\n  %+v\nwant\n  %+v", o.HTTP, want)
	}
	if o.PasswordFile != "/etc/mosquitto/passwd" || o.ACLFile != "/etc/mosquitto/acl" || o.AllowAnonymous != auth.AnonymousAllow ||
		o.Limits.ConnectionRate != 2.5 || o.Limits.MaxFailedLogins != 0 {
		t.Errorf("options %+v", o)
	}
	if !reflect.DeepEqual(o.ListenerAnonymous, map[string]auth.Anonymous{"lan": auth.AnonymousDeny}) ||
		!reflect.DeepEqual(o.CertListeners, []string{"mtls"}) {
		t.Errorf("per listener: anonymous %v, certificate listeners %v", o.ListenerAnonymous, o.CertListeners)
	}
	cfg = mustLoad(t, "-c", file, "-password-file", "/tmp/p", "-acl-file", "")
	if cfg.Auth.PasswordFile != "/tmp/p" || cfg.Auth.ACLFile != "" {
		t.Errorf("flags did not override the file: %+v", cfg.Auth)
	}

	for _, tt := range []struct{ name, file, err string }{
		{"bad allow_anonymous", "auth:\n  allow_anonymous: sometimes\n", "want true, false or loopback"},
		{"bad listener allow_anonymous", "listeners:\n  - allow_anonymous: yes\n", `listeners[0].allow_anonymous: "yes" is not an anonymous policy: want true, false or loopback`},
		{"negative duration", "auth:\n  flap_ban: -1m\n", "flap_ban"},
		{"unknown key", "auth:\n  password: x\n", `auth.password: unknown key (did you mean "password_file"?)`},
		{"http url", "auth:\n  http:\n    url: ftp://auth.example/\n", "want an http:// or https:// URL"},
		{"http cache key", "auth:\n  http:\n    url: http://127.0.0.1/\n    cache_key: user\n", `auth.http.cache_key: "user" is not a cache key`},
		{"http tls for plain http", "auth:\n  http:\n    url: http://127.0.0.1/\n    tls: {ca_file: ca.pem}\n", "neither url nor acl_url is https"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig([]string{"-c", writeFile(t, tt.file)})
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("error = %v, want one containing %q", err, tt.err)
			}
		})
	}
}

func TestRunPasswd(t *testing.T) {
	file := filepath.Join(t.TempDir(), "passwd")
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"passwd", "-b", "-cost", "4", file, "alice", "s3cret"}, &out, &errOut); err != nil {
		t.Fatalf("xmq passwd: %v", err)
	}
	data, err := os.ReadFile(file)
	if err != nil || !strings.HasPrefix(string(data), "alice:$2a$04$") || !strings.Contains(string(data), ":$scram-sha-256$") {
		t.Errorf("password file %q, %v", data, err)
	}
	var ue config.UsageError
	if err := run(context.Background(), []string{"passwd", file}, &out, &errOut); !errors.As(err, &ue) {
		t.Errorf("xmq passwd with a missing argument: %v, want a usage error", err)
	}
}

// connack connects to addr and returns the CONNACK reason code.
func connack(t *testing.T, addr, user, pass string) codec.ReasonCode {
	t.Helper()
	c := codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, ClientID: []byte("auth-test")}
	if user != "" {
		c.UsernameFlag, c.Username, c.PasswordFlag, c.Password = true, []byte(user), true, []byte(pass)
	}
	return connackOf(t, addr, c)
}

// connackOf sends c to addr and returns the CONNACK reason code (for
// MQTT 3.1.1, the reason code its return code maps from).
func connackOf(t *testing.T, addr string, c codec.Connect) codec.ReasonCode {
	t.Helper()
	conn := mqtttest.DialConn(t, "mqtt://"+addr, nil, c.ProtocolVersion)
	defer conn.Close()
	conn.Timeout = 30 * time.Second
	return conn.ConnectRC(&c).ReasonCode
}

// passwordFile writes the auth fixture (bob / hunter2) to a temporary file.
func passwordFile(t *testing.T) string {
	return configtest.CopyFile(t, "../../auth/testdata/mosquitto.passwd", "passwd")
}

// TestRunAuth runs xmq with a password file, then changes it and sends
// SIGHUP: the new password works at once.
func TestRunAuth(t *testing.T) {
	file := passwordFile(t)
	cfgFile := writeFile(t, "auth:\n  reload_interval: -1s\n  allow_anonymous: false\n")
	b := startRun(t, "-c", cfgFile, "-listen", "127.0.0.1:0", "-data", "", "-log-format", "json", "-password-file", file)
	addr := b.addrs[0].String()
	for _, tt := range []struct {
		user, pass string
		want       codec.ReasonCode
	}{
		{"bob", "hunter2", codec.Success}, // written by mosquitto_passwd
		{"bob", "hunter3", codec.BadUserNameOrPassword},
		{"nobody", "x", codec.BadUserNameOrPassword},
		{"", "", codec.NotAuthorized},
	} {
		if got := connack(t, addr, tt.user, tt.pass); got != tt.want {
			t.Errorf("%q/%q: CONNACK %v, want %v", tt.user, tt.pass, got, tt.want)
		}
	}
	if err := auth.SetPassword(file, "bob", []byte("hunter3"), false, auth.PasswordOptions{Cost: 4, SCRAM: auth.PasswordSCRAMs}); err != nil {
		t.Fatal(err)
	}
	sighup(t) // signal_*_test.go
	deadline := time.Now().Add(5 * time.Second)
	for connack(t, addr, "bob", "hunter3") != codec.Success {
		if time.Now().After(deadline) {
			t.Fatalf("SIGHUP did not reload the password file\n%s", b.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
	log := b.stderr.String()
	for _, secret := range []string{"hunter2", "hunter3", "$7$"} {
		if strings.Contains(log, secret) {
			t.Errorf("the log holds %q:\n%s", secret, log)
		}
	}
	if !strings.Contains(log, `"logger":"auth"`) || !strings.Contains(log, "password file loaded") {
		t.Errorf("auth does not log through zap:\n%s", log)
	}
}
