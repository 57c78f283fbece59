package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xmq-io/xmq/certs/certstest"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// checkConfig runs `xmq check-config ARGS` with no XMQ_ environment and
// returns its output and error.
func checkConfig(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := runCheckConfig(args, nil, &out)
	return out.String(), err
}

// busyPort holds a TCP port on 127.0.0.1 for the test and returns it.
func busyPort(t *testing.T) string {
	t.Helper()
	return mqtttest.Listen(t).Addr().String()
}

// TestCheckConfig: check-config passes a good file and lists every problem
// of a bad one — keys and values, a port in use, a bad port, files that
// cannot be read, a certificate that does not match its key, an ACL that
// does not parse — each with its line, and exits non-zero; it never
// creates the store.
func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	ca := certstest.NewCA(t)
	certFile, keyFile := ca.WriteServerFiles("localhost")
	_, otherKey := certstest.NewCA(t).WriteServerFiles("localhost")
	acl := certstest.WriteFile(t, dir, "acl", []byte("user bob\ntopic readwrite sensors/#\n"))
	badACL := certstest.WriteFile(t, dir, "bad-acl", []byte("user bob\ntopic scribble sensors/#\n"))
	passwd := passwordFile(t)
	data := filepath.Join(dir, "data")
	good := fmt.Sprintf(`data_dir: %s
listeners:
  - address: %s
  - transport: tls
    address: %s
    tls: {cert_file: %s, key_file: %s}
  - transport: quic
    address: %s
auth:
  password_file: %s
  acl_file: %s
web:
  address: %s
`, data, mqtttest.FreeAddr(t), mqtttest.FreeAddr(t), certFile, keyFile, mqtttest.FreeAddr(t), passwd, acl, mqtttest.FreeAddr(t))

	tests := []struct {
		name string
		file string
		want []string // lines of the output, FILE standing for the file
	}{
		{name: "good", file: good, want: []string{"FILE: ok (3 listeners"}},
		{name: "port in use", file: fmt.Sprintf("data_dir: %s\nlisteners:\n  - address: %s\nweb: {address: ''}\n", data, busyPort(t)),
			want: []string{"FILE: 1 problem\n", "FILE:3: listeners[0].address: tcp port", "is in use"}},
		{name: "two listeners on one port", file: fmt.Sprintf("data_dir: %s\nlisteners:\n  - {name: a, address: '%[2]s'}\n  - {name: b, address: '%[2]s'}\nweb: {address: ''}\n", data, mqtttest.FreeAddr(t)),
			want: []string{"FILE:4: listeners[1].address: tcp port", "is in use"}},
		{name: "bad port", file: "listeners:\n  - address: 127.0.0.1:99999\nweb: {address: ''}\n",
			want: []string{`FILE:2: listeners[0].address: port "99999" is not a number from 0 to 65535`}},
		{name: "unreadable files", file: fmt.Sprintf("data_dir: %s\nlisteners: [{address: '%s'}]\nweb: {address: ''}\nauth:\n  password_file: %s/nope\n  acl_file: %s\n", data, mqtttest.FreeAddr(t), dir, badACL),
			want: []string{"FILE: 2 problems", "FILE:5: auth.password_file: password file " + dir + "/nope", "no such file",
				"FILE:6: auth.acl_file: acl file " + badACL}},
		{name: "certificate and key do not match", file: fmt.Sprintf("data_dir: %s\nlisteners:\n  - transport: tls\n    address: %s\n    tls:\n      cert_file: %s\n      key_file: %s\nweb: {address: ''}\n", data, mqtttest.FreeAddr(t), certFile, otherKey),
			want: []string{"FILE:6: listeners[0].tls.cert_file: the key in " + otherKey + " does not belong to the certificate in " + certFile}},
		{name: "missing client CA", file: fmt.Sprintf("data_dir: %s\nlisteners:\n  - transport: tls\n    address: %s\n    tls: {verify: required, client_ca_file: %s/ca.pem}\nweb: {address: ''}\n", data, mqtttest.FreeAddr(t), dir),
			want: []string{"FILE:5: listeners[0].tls.client_ca_file:", "no such file"}},
		{name: "missing HTTP auth service CA", file: fmt.Sprintf("data_dir: %s\nlisteners: [{address: '%s'}]\nweb: {address: ''}\nauth:\n  http:\n    url: https://auth.example/\n    tls: {ca_file: %s/auth-ca.pem}\n", data, mqtttest.FreeAddr(t), dir),
			want: []string{"FILE:7: auth.http.tls.ca_file:", "no such file"}},
		{name: "data_dir is a file", file: fmt.Sprintf("data_dir: %s\nlisteners: [{address: '%s'}]\nweb: {address: ''}\n", acl, mqtttest.FreeAddr(t)),
			want: []string{"FILE:1: data_dir: " + acl + " is not a directory"}},
		{name: "every problem at once", file: fmt.Sprintf("data_dir: %s\nlisteners:\n  - adress: x\n    address: %s\nbroker:\n  connect_timeout: 10\nauth:\n  acl_file: %s\nweb: {address: ''}\n", data, busyPort(t), badACL),
			want: []string{"FILE: 4 problems",
				`FILE:3: listeners[0].adress: unknown key (did you mean "address"?)`,
				"FILE:4: listeners[0].address: tcp port",
				"FILE:6: broker.connect_timeout: 10 is not a duration (write 10s)",
				"FILE:8: auth.acl_file: acl file " + badACL}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := writeFile(t, tt.file)
			out, err := checkConfig(t, "-c", file)
			out = strings.ReplaceAll(out, file, "FILE")
			if (tt.name == "good") != (err == nil) {
				t.Errorf("error %v for %s:\n%s", err, tt.name, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not contain %q:\n%s", w, out)
				}
			}
			if _, err := os.Stat(storeDir(data)); err == nil {
				t.Errorf("check-config created the store in %s", data)
			}
		})
	}
}

// TestCheckConfigQuotesNoForeignFile: a file that is not what its key
// expects — /etc/shadow or a token as the ACL or password file, a secret
// given as the configuration itself — is reported by file and line, and
// nothing of its content is in the report.
func TestCheckConfigQuotesNoForeignFile(t *testing.T) {
	dir := t.TempDir()
	shadow := certstest.WriteFile(t, dir, "shadow", []byte("root:$6$leak-1$leak-2:19000:0:99999:7:::\n"))
	token := certstest.WriteFile(t, dir, "token", []byte("sk-live-leak-3\n"))
	conf := writeFile(t, fmt.Sprintf("data_dir: ''\nlisteners: [{address: '%s'}]\nweb: {address: ''}\nauth:\n  acl_file: %s\n  password_file: %s\n",
		mqtttest.FreeAddr(t), shadow, token))
	out, err := checkConfig(t, "-c", conf)
	if err == nil {
		t.Fatalf("check-config passed:\n%s", out)
	}
	for _, w := range []string{"auth.acl_file: acl file " + shadow + ": line 1: not an ACL line",
		"auth.password_file: password file " + token + ": line 1: no password hash"} {
		if !strings.Contains(out, w) {
			t.Errorf("output does not contain %q:\n%s", w, out)
		}
	}
	secret := certstest.WriteFile(t, dir, "secret.yaml", []byte("sk-live-leak-4\n"))
	out2, err := checkConfig(t, "-c", secret)
	if err == nil || !strings.Contains(out2, secret+": want a section of keys, not a single value") {
		t.Errorf("a configuration that is one value: %v\n%s", err, out2)
	}
	if strings.Contains(out+out2, "leak") {
		t.Errorf("the report quotes a file that is not what its key expects:\n%s%s", out, out2)
	}
}

// TestCheckConfigFlagsAndEnv: check-config takes the broker's flags and
// XMQ_ variables, and names them in its problems.
func TestCheckConfigFlagsAndEnv(t *testing.T) {
	var out bytes.Buffer
	err := runCheckConfig([]string{"-listen", busyPort(t), "-web", "", "-data", ""}, []string{"XMQ_BROKER_MAX_QUEUED=lots"}, &out)
	if err == nil {
		t.Fatalf("no error:\n%s", out.String())
	}
	for _, w := range []string{"2 problems", `environment XMQ_BROKER_MAX_QUEUED: broker.max_queued: "lots" is not a number`,
		"flag -listen: listeners[0].address: tcp port"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output does not contain %q:\n%s", w, out.String())
		}
	}
}

// TestRunBindsBeforeTheStore: a port in use stops xmq before it opens (or
// creates) the store, and the error says the port is in use.
func TestRunBindsBeforeTheStore(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	addr := busyPort(t)
	var stderr bytes.Buffer
	err := run(t.Context(), []string{"-listen", addr, "-data", data, "-web", "", "-log-format", "json"}, &bytes.Buffer{}, &stderr)
	if err == nil || !strings.Contains(err.Error(), "listener tcp: tcp port") || !strings.Contains(err.Error(), "is in use") {
		t.Fatalf("run with %s in use: %v, want the port named as in use", addr, err)
	}
	if _, err := os.Stat(storeDir(data)); err == nil {
		t.Errorf("the store was opened before the port was bound:\n%s", stderr.String())
	}
}
