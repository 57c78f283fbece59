package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xmq-io/xmq/internal/config"
)

// TestClusterSecretCommand: xmq cluster secret prints a new secret each
// time, long enough for cluster.secret; anything else is a usage error.
func TestClusterSecretCommand(t *testing.T) {
	secret := func() string {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"cluster", "secret"}, &out, &out); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out.String())
	}
	a, b := secret(), secret()
	if len(a) < 40 || a == b || strings.ContainsAny(a, " \n") {
		t.Fatalf("secrets %q and %q", a, b)
	}
	var ue config.UsageError
	if err := run(context.Background(), []string{"cluster", "nope"}, &bytes.Buffer{}, &bytes.Buffer{}); !errors.As(err, &ue) {
		t.Fatalf("xmq cluster nope: %v, want a usage error", err)
	}
}

// TestClusterSecretRequired: a node whose routes reach beyond loopback
// does not start without a secret, and the problem names the key; a
// secret_file gives it, secret and secret_file together do not go.
func TestClusterSecretRequired(t *testing.T) {
	secretFile := writeFile(t, "0123456789abcdef0123456789\n")
	for _, tt := range []struct{ name, cluster, want string }{
		{"no secret", "listen: 10.0.0.1:6222\n      routes: [10.0.0.2:6222]", "cluster.secret_file: required"},
		{"loopback", "listen: 127.0.0.1:6222\n      routes: [127.0.0.1:6223]", ""},
		{"secret file", "listen: 10.0.0.1:6222", ""},
		{"both", "listen: 10.0.0.1:6222", "secret and secret_file exclude each other"},
		{"missing file", "listen: 127.0.0.1:6222", "cluster.secret_file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			top := ""
			switch tt.name {
			case "secret file":
				top = "  secret_file: " + secretFile + "\n"
			case "both":
				top = "  secret_file: " + secretFile + "\n  secret: 0123456789abcdef0123\n"
			case "missing file":
				top = "  secret_file: " + filepath.Join(t.TempDir(), "nope") + "\n"
			}
			file := writeFile(t, "cluster:\n  enabled: true\n  node: n1\n"+top+"  nats:\n    embedded:\n      "+tt.cluster+"\n")
			_, _, err := loadConfigEnv([]string{"-c", file}, nil)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// TestCertsNode: xmq certs -node issues a node certificate from the
// development CA that is both a server and a client certificate, for
// this machine's names and the -host ones, and prints the tls section.
func TestCertsNode(t *testing.T) {
	data := t.TempDir()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"certs", "-data", data, "-node", "n1", "-host", "10.0.0.1"}, &out, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	dir := filepath.Join(data, "certs")
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "node-n1.pem"), filepath.Join(dir, "node-n1-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	leaf := pair.Leaf
	if leaf.Subject.CommonName != "n1" || !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) ||
		!slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		t.Errorf("node certificate %v %v", leaf.Subject, leaf.ExtKeyUsage)
	}
	for _, h := range []string{"10.0.0.1", "localhost", "127.0.0.1"} {
		if err := leaf.VerifyHostname(h); err != nil {
			t.Errorf("node certificate: %v", err)
		}
	}
	if !strings.Contains(out.String(), "cluster.nats.embedded.tls: {cert_file: "+filepath.Join(dir, "node-n1.pem")) {
		t.Errorf("output lacks the tls section:\n%s", out.String())
	}
}
