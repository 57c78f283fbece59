package certs_test

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/certs"
	"github.com/xmq-io/xmq/certs/certstest"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// writeCRL writes a PEM revocation list of ca revoking the given client
// certificates, replacing path.
func writeCRL(t *testing.T, ca *certstest.CA, path string, number int64, revoked ...tls.Certificate) {
	t.Helper()
	tmpl := &x509.RevocationList{Number: big.NewInt(number), ThisUpdate: time.Now().Add(-time.Minute),
		NextUpdate: time.Now().Add(time.Hour)}
	for _, c := range revoked {
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries,
			x509.RevocationListEntry{SerialNumber: c.Leaf.SerialNumber, RevocationTime: time.Now()})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der})
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// handshake runs one TLS handshake of client against a server with
// config cfg over a pipe and returns the server's error.
func handshake(t *testing.T, cfg *tls.Config, client *tls.Config) error {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	done := make(chan error, 1)
	go func() {
		c := tls.Client(b, client)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		err := c.Handshake()
		if err == nil {
			// TLS 1.3: the server checks the client's certificate after
			// the client's handshake is done; read its verdict.
			_, err = io.Copy(io.Discard, c)
		}
		done <- err
	}()
	s := tls.Server(a, cfg)
	_ = s.SetDeadline(time.Now().Add(5 * time.Second))
	err := s.Handshake()
	_ = s.Close()
	<-done
	return err
}

// TestClientCRL: a client certificate listed in client_crl_file is
// refused, the others pass; a changed file is picked up by the watcher
// and by Reload (SIGHUP); a certificate of a CA without a list in the file
// is refused, as Mosquitto (OpenSSL) does; a file that holds no list
// fails at start.
func TestClientCRL(t *testing.T) {
	ca, other := certstest.NewCA(t), certstest.NewCA(t)
	alice, bob := ca.ClientCert("alice"), ca.ClientCert("bob")
	stranger := other.ClientCert("stranger")
	dir := t.TempDir()
	crlFile := filepath.Join(dir, "crl.pem")
	writeCRL(t, ca, crlFile, 1, alice)
	bundle := certstest.WriteFile(t, dir, "cas.pem", append(append([]byte{}, ca.CertPEM...), other.CertPEM...))
	certFile, keyFile := ca.WriteServerFiles()

	src, err := certs.New(certs.Options{CertFile: certFile, KeyFile: keyFile, ReloadInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	cfg, err := src.ServerConfig(certs.ClientAuth{Verify: certs.VerifyOptional, CAFile: bundle, CRLFile: crlFile})
	if err != nil {
		t.Fatal(err)
	}
	client := func(c ...tls.Certificate) *tls.Config {
		cc := ca.ClientConfig(c...)
		cc.ServerName = "localhost"
		return cc
	}
	if err := handshake(t, cfg, client(alice)); !errors.Is(err, certs.ErrRevoked) {
		t.Errorf("revoked alice: handshake error %v, want ErrRevoked", err)
	}
	if err := handshake(t, cfg, client(bob)); err != nil {
		t.Errorf("bob: %v", err)
	}
	if err := handshake(t, cfg, client()); err != nil {
		t.Errorf("no client certificate (verify optional): %v", err)
	}
	if err := handshake(t, cfg, client(stranger)); err == nil || !strings.Contains(err.Error(), "no revocation list") {
		t.Errorf("certificate of a CA without a list: %v, want a refusal", err)
	}

	// The watcher sees a new list: bob is revoked, alice is back.
	writeCRL(t, ca, crlFile, 2, bob)
	mqtttest.WaitFor(t, "the new list to revoke bob", func() bool { return handshake(t, cfg, client(bob)) != nil })
	if err := handshake(t, cfg, client(alice)); err != nil {
		t.Errorf("alice after the new list: %v", err)
	}

	// A broken file keeps the lists in force; Reload reports it.
	certstest.WriteFile(t, dir, "crl.pem", []byte("not a list"))
	if err := src.Reload(); err == nil {
		t.Error("Reload of a broken list succeeded")
	}
	if err := handshake(t, cfg, client(bob)); !errors.Is(err, certs.ErrRevoked) {
		t.Errorf("bob after a broken write: %v, want still revoked", err)
	}

	// At start, a bad file or a list without client verification is an error.
	if _, err := src.ServerConfig(certs.ClientAuth{Verify: certs.VerifyRequired, CAFile: bundle, CRLFile: filepath.Join(dir, "cas.pem")}); err == nil {
		t.Error("a client_crl_file without a list was accepted")
	}
	if _, err := src.ServerConfig(certs.ClientAuth{Verify: certs.VerifyNone, CRLFile: crlFile}); err == nil {
		t.Error("a client_crl_file with verify none was accepted")
	}
}

func TestMinVersionAndCipherSuites(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want uint16
		err  string
	}{
		{"", tls.VersionTLS12, ""}, {"1.2", tls.VersionTLS12, ""}, {"1.3", tls.VersionTLS13, ""},
		{"tlsv1.3", tls.VersionTLS13, ""}, {"1.1", 0, "RFC 8996"}, {"2", 0, "want 1.2 or 1.3"},
	} {
		got, err := certs.MinVersion(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("MinVersion(%q) = %v, want an error with %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("MinVersion(%q) = %x, %v; want %x", tt.in, got, err, tt.want)
		}
	}
	ids, err := certs.CipherSuites([]string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "tls_ecdhe_rsa_with_chacha20_poly1305_sha256"})
	if err != nil || len(ids) != 2 || ids[0] != tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 || ids[1] != tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 {
		t.Errorf("CipherSuites = %v, %v", ids, err)
	}
	// TLS 1.3 suites and OpenSSL's names are not TLS 1.2 suite names.
	for _, bad := range []string{"TLS_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256"} {
		if _, err := certs.CipherSuites([]string{bad}); err == nil || !strings.Contains(err.Error(), "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") {
			t.Errorf("CipherSuites(%s) = %v, want an error listing the valid names", bad, err)
		}
	}
}

func TestCurves(t *testing.T) {
	ids, err := certs.Curves([]string{"X25519", "p256", "prime256v1", "X25519MLKEM768", "CurveP384"})
	want := []tls.CurveID{tls.X25519, tls.CurveP256, tls.X25519MLKEM768, tls.CurveP384}
	if err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Errorf("Curves with P256 twice = %v, %v; want an error", ids, err)
	}
	ids, err = certs.Curves([]string{"X25519", "p256", "X25519MLKEM768", "CurveP384"})
	if err != nil || !slices.Equal(ids, want) {
		t.Errorf("Curves = %v, %v; want %v", ids, err, want)
	}
	if ids, err := certs.Curves(nil); ids != nil || err != nil {
		t.Errorf("Curves(nil) = %v, %v; want Go's default (nil)", ids, err)
	}
	if _, err := certs.Curves([]string{"X448"}); err == nil || !strings.Contains(err.Error(), "X25519MLKEM768") {
		t.Errorf("Curves(X448) = %v, want an error listing the valid names", err)
	}
}
