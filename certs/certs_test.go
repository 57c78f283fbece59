package certs_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/certs"
	"github.com/xmq-io/xmq/certs/certstest"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

func containsStr(s, sub string) bool { return strings.Contains(s, sub) }

func TestEnsureDev(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	first, err := certs.EnsureDev(dir, false)
	if err != nil {
		t.Fatalf("EnsureDev: %v", err)
	}
	if !first.Created {
		t.Error("first EnsureDev did not report creating the files")
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{first.CAFile, 0o644}, {first.CAKeyFile, 0o600}, {first.CertFile, 0o644}, {first.KeyFile, 0o600}} {
		fi, err := os.Stat(f.path)
		if err != nil {
			t.Fatalf("%s: %v", f.path, err)
		}
		if fi.Mode().Perm() != f.mode {
			t.Errorf("%s mode %v, want %v", f.path, fi.Mode().Perm(), f.mode)
		}
	}
	leaf := first.Cert.Leaf
	for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
		if err := leaf.VerifyHostname(h); err != nil {
			t.Errorf("server certificate: %v", err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: first.CA.Pool()}); err != nil {
		t.Errorf("server certificate does not verify against ca.pem: %v", err)
	}

	again, err := certs.EnsureDev(dir, false)
	if err != nil || again.Created {
		t.Fatalf("second EnsureDev = created %v, %v; want the files reused", again.Created, err)
	}
	if !bytes.Equal(again.CA.CertPEM, first.CA.CertPEM) || !bytes.Equal(again.Cert.Certificate[0], first.Cert.Certificate[0]) {
		t.Error("second EnsureDev did not reuse the CA and server certificate")
	}

	// A server certificate that is gone is issued again by the same CA.
	if err := os.Remove(first.CertFile); err != nil {
		t.Fatal(err)
	}
	third, err := certs.EnsureDev(dir, false)
	if err != nil || !third.Created || !bytes.Equal(third.CA.CertPEM, first.CA.CertPEM) {
		t.Fatalf("EnsureDev without server.pem: created %v, same CA %v, %v", third.Created, bytes.Equal(third.CA.CertPEM, first.CA.CertPEM), err)
	}

	regen, err := certs.EnsureDev(dir, true)
	if err != nil || bytes.Equal(regen.CA.CertPEM, first.CA.CertPEM) {
		t.Fatalf("EnsureDev(regenerate) kept the CA: %v", err)
	}

	mem, err := certs.EnsureDev("", false)
	if err != nil || mem.CAFile != "" || mem.Cert.Leaf == nil {
		t.Fatalf("in-memory EnsureDev = %+v, %v", mem, err)
	}
}

// TestFileReload replaces the certificate files under a running Source:
// the new certificate serves the next handshake, a broken pair keeps the
// old one, and Reload (SIGHUP) applies a change at once.
func TestFileReload(t *testing.T) {
	ca := certstest.NewCA(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	write := func(host string) {
		t.Helper()
		certPEM, keyPEM, err := ca.IssueServer(host)
		if err != nil {
			t.Fatal(err)
		}
		certstest.WriteFile(t, dir, "server-key.pem", keyPEM)
		certstest.WriteFile(t, dir, "server.pem", certPEM)
	}
	write("one.example")
	src, err := certs.New(certs.Options{CertFile: certFile, KeyFile: keyFile, ReloadInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = src.Close() })
	served := func() string {
		c, err := src.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf.DNSNames[0]
	}
	if got := served(); got != "one.example" {
		t.Fatalf("serving %s, want one.example", got)
	}
	write("two.example")
	mqtttest.WaitFor(t, "the watcher to load the new files", func() bool { return served() == "two.example" })

	// A broken pair keeps the previous certificate.
	certstest.WriteFile(t, dir, "server.pem", []byte("not a certificate"))
	time.Sleep(100 * time.Millisecond)
	if got := served(); got != "two.example" {
		t.Errorf("after a broken write serving %s, want two.example still", got)
	}
	if err := src.Reload(); err == nil {
		t.Error("Reload of a broken pair succeeded")
	}

	// Reload applies at once, watcher or not.
	noWatch, err := certs.New(certs.Options{CertFile: certFile, KeyFile: keyFile, ReloadInterval: -1})
	if err == nil {
		_ = noWatch.Close()
		t.Fatal("New with a broken pair succeeded")
	}
	write("three.example")
	if err := src.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if got := served(); got != "three.example" {
		t.Errorf("after Reload serving %s, want three.example", got)
	}
	// NotAfter is the end of the certificate in service.
	c, _ := src.GetCertificate(&tls.ClientHelloInfo{})
	if got := src.NotAfter(); got.IsZero() || !got.Equal(c.Leaf.NotAfter) {
		t.Errorf("NotAfter() = %v, want the served leaf's %v", got, c.Leaf.NotAfter)
	}
}

func TestServerConfig(t *testing.T) {
	src, err := certs.New(certs.Options{DevDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	other := certstest.NewCA(t)
	tests := []struct {
		name string
		auth certs.ClientAuth
		want tls.ClientAuthType
		pool bool
		err  string
	}{
		{"none", certs.ClientAuth{}, tls.NoClientCert, false, ""},
		{"optional: dev CA", certs.ClientAuth{Verify: certs.VerifyOptional}, tls.VerifyClientCertIfGiven, true, ""},
		{"required: file", certs.ClientAuth{Verify: certs.VerifyRequired, CAFile: other.WriteCAFile()}, tls.RequireAndVerifyClientCert, true, ""},
		{"missing file", certs.ClientAuth{Verify: certs.VerifyRequired, CAFile: "/nonexistent.pem"}, 0, false, "no such file"},
		{"bad mode", certs.ClientAuth{Verify: "sometimes"}, 0, false, "want none, optional or required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := src.ServerConfig(tt.auth)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ServerConfig = %v, want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ClientAuth != tt.want || (cfg.ClientCAs != nil) != tt.pool || cfg.MinVersion != tls.VersionTLS12 {
				t.Errorf("ClientAuth %v, ClientCAs %v, MinVersion %x", cfg.ClientAuth, cfg.ClientCAs != nil, cfg.MinVersion)
			}
		})
	}
	files, err := certs.New(certs.Options{CertFile: "a.pem"})
	if err == nil {
		_ = files.Close()
		t.Error("New with cert_file but no key_file succeeded")
	}
}

// TestDevCoversInterfaces: the development certificate covers every
// non-link-local address of this machine's interfaces, so a device on the
// LAN dialling the broker's address verifies it, not only localhost.
func TestDevCoversInterfaces(t *testing.T) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("no interface addresses: %v", err)
	}
	dev, err := certs.EnsureDev(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		n++
		if err := dev.Cert.Leaf.VerifyHostname(ipn.IP.String()); err != nil {
			t.Errorf("interface address %s: %v", ipn.IP, err)
		}
	}
	if n == 0 {
		t.Fatal("no interface address to check (not even loopback)")
	}
}

// TestDevExtraHosts: names added with AddExtraHosts (xmq certs -host) are
// kept in the CA's directory; the next EnsureDev issues a certificate for
// them from the same CA, and a running Source serves it after Reload
// (SIGHUP) without a restart.
func TestDevExtraHosts(t *testing.T) {
	dir := t.TempDir()
	src, err := certs.New(certs.Options{DevDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	before := src.Certificate().Leaf
	if before.VerifyHostname("broker.lan") == nil {
		t.Fatal("certificate covers broker.lan before it was added")
	}
	if _, err := certs.AddExtraHosts(dir, []string{"*.lan"}); err == nil {
		t.Error("a wildcard was accepted")
	}
	if _, err := certs.AddExtraHosts(dir, []string{"bad name"}); err == nil {
		t.Error("a name with a space was accepted")
	}
	hosts, err := certs.AddExtraHosts(dir, []string{"broker.lan", "192.0.2.7", "broker.lan"})
	if err != nil || len(hosts) != 2 {
		t.Fatalf("AddExtraHosts = %v, %v; want two names", hosts, err)
	}
	if err := src.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	after := src.Certificate().Leaf
	for _, h := range []string{"broker.lan", "192.0.2.7", "localhost"} {
		if err := after.VerifyHostname(h); err != nil {
			t.Errorf("after Reload: %v", err)
		}
	}
	if err := after.CheckSignatureFrom(src.Dev().CA.Cert); err != nil {
		t.Errorf("new certificate not issued by the same CA: %v", err)
	}
	again, err := certs.EnsureDev(dir, false)
	if err != nil || again.Created || !again.Cert.Leaf.Equal(after) {
		t.Errorf("EnsureDev after the names were added: created %v, %v; want the certificate kept", again.Created, err)
	}
}
