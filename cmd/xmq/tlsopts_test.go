package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/certs"
	"github.com/xmq-io/xmq/certs/certstest"
	"github.com/xmq-io/xmq/internal/config"
)

// TestListenerTLSOptionErrors: min_version, cipher_suites and
// client_crl_file are checked when the configuration loads.
func TestListenerTLSOptionErrors(t *testing.T) {
	for _, tt := range []struct{ name, file, err string }{
		{"old version", "listeners:\n  - transport: tls\n    tls:\n      min_version: '1.1'\n", "RFC 8996"},
		{"unknown version", "listeners:\n  - transport: tls\n    tls:\n      min_version: '4'\n", "want 1.2 or 1.3"},
		{"unknown suite", "listeners:\n  - transport: tls\n    tls:\n      cipher_suites: [ECDHE-RSA-AES128-GCM-SHA256]\n", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"},
		{"suites with 1.3", "listeners:\n  - transport: wss\n    tls:\n      min_version: '1.3'\n      cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n", "never be used"},
		{"suites on quic", "listeners:\n  - transport: quic\n    tls:\n      cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n", "QUIC speaks only TLS 1.3"},
		{"unknown curve", "listeners:\n  - transport: tls\n    tls:\n      curves: [X25519, X448]\n", "listeners[0].tls.curves: curve \"X448\": want one of X25519, P256"},
		{"crl without verify", "listeners:\n  - transport: tls\n    tls:\n      client_crl_file: crl.pem\n", "listeners[0].tls.client_crl_file: needs tls.verify optional or required"},
		{"protocol on tcp", "listeners:\n  - transport: tcp\n    tls:\n      min_version: '1.3'\n", "tls settings are for"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig([]string{"-c", writeFile(t, tt.file)})
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("error = %v, want one containing %q", err, tt.err)
			}
		})
	}
}

// TestListenerTLSOptions runs xmq with a TLS 1.3-only, X25519-only listener and a
// TLS 1.2 listener with one cipher suite and a client CRL: a client below
// the minimum, one offering another suite and one whose certificate is
// revoked are refused; the others connect.
func TestListenerTLSOptions(t *testing.T) {
	ca := certstest.NewCA(t)
	certFile, keyFile := ca.WriteServerFiles()
	good, revoked := ca.ClientCert("good"), ca.ClientCert("revoked")
	dir := t.TempDir()
	tmpl := &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: time.Now().Add(-time.Minute), NextUpdate: time.Now().Add(time.Hour),
		RevokedCertificateEntries: []x509.RevocationListEntry{{SerialNumber: revoked.Leaf.SerialNumber, RevocationTime: time.Now()}}}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	crl := certstest.WriteFile(t, dir, "crl.pem", pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}))
	cfgFile := writeFile(t, fmt.Sprintf(`
tls: {cert_file: %q, key_file: %q}
listeners:
  - {name: modern, transport: tls, address: "127.0.0.1:0", tls: {min_version: "1.3", curves: [X25519]}}
  - name: strict
    transport: tls
    address: "127.0.0.1:0"
    tls:
      cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]
      verify: required
      client_ca_file: %q
      client_crl_file: %q
log: {format: json}
`, certFile, keyFile, ca.WriteCAFile(), crl))
	b := startRun(t, "-c", cfgFile, "-data", "")
	t.Cleanup(func() { _ = b.stop(t) })

	client := func(maxV uint16, suites []uint16, c ...tls.Certificate) *tls.Config {
		cc := ca.ClientConfig(c...)
		cc.ServerName, cc.MaxVersion, cc.CipherSuites = "localhost", maxV, suites
		return cc
	}
	dial := func(i int, conf *tls.Config) error {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", b.addrs[i].String(), conf)
		if err != nil {
			return err
		}
		defer conn.Close()
		// TLS 1.3: a refused client certificate shows on the first read.
		_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err = conn.Read(make([]byte, 1))
		if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
			return nil
		}
		return err
	}
	for _, tt := range []struct {
		name string
		i    int
		conf *tls.Config
		ok   bool
	}{
		{"1.3 on modern", 0, client(0, nil), true},
		{"1.2 on modern", 0, client(tls.VersionTLS12, nil), false},
		{"P-256 only on modern (X25519 only)", 0, withCurves(client(0, nil), tls.CurveP256), false},
		{"X25519MLKEM768 or X25519 on modern", 0, withCurves(client(0, nil), tls.X25519MLKEM768, tls.X25519), true},
		{"the suite on strict", 1, client(tls.VersionTLS12, []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}, good), true},
		{"another suite on strict", 1, client(tls.VersionTLS12, []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, good), false},
		{"revoked on strict", 1, client(0, nil, revoked), false},
		{"good on strict", 1, client(0, nil, good), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := dial(tt.i, tt.conf); (err == nil) != tt.ok {
				t.Errorf("handshake error %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// withCurves sets the key exchanges a client offers.
func withCurves(c *tls.Config, curves ...tls.CurveID) *tls.Config {
	c.CurvePreferences = curves
	return c
}

// TestDevCAWarning: a configuration file whose TLS listeners have no
// certificate starts, with a warning naming each listener and the fix;
// tls.dev_ca: true silences it; a bare run (no file) never warns. The
// hint to try the CA names the TLS listener's port from the file.
func TestDevCAWarning(t *testing.T) {
	body := "listeners:\n  - {name: mqtts-lan, transport: tls, address: \"127.0.0.1:0\"}\n  - {name: plain, transport: tcp, address: \"127.0.0.1:0\"}\nlog: {format: json}\n"
	b := startRun(t, "-c", writeFile(t, body), "-data", t.TempDir())
	log := b.stderr.String()
	_ = b.stop(t)
	for _, want := range []string{"listener mqtts-lan (tls on 127.0.0.1:0) has no certificate", "listeners[0].tls.cert_file", "tls.dev_ca: true", `"level":"warn"`} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "listener plain") {
		t.Errorf("the tcp listener was warned about:\n%s", log)
	}

	b = startRun(t, "-c", writeFile(t, body+"tls: {dev_ca: true}\n"), "-data", t.TempDir())
	log = b.stderr.String()
	_ = b.stop(t)
	if strings.Contains(log, "has no certificate") {
		t.Errorf("tls.dev_ca: true still warns:\n%s", log)
	}

	cfg := config.Default()
	cfg.Listeners[1].Address = "0.0.0.0:9883"
	if got := mosquittoSubHint("ca.pem", &cfg); !strings.HasSuffix(got, "-p 9883") {
		t.Errorf("hint %q does not name the tls listener's port 9883", got)
	}
}

// TestNoDevCAForOwnCertificates: when every TLS listener has certificate
// files of its own (an imported Mosquitto configuration), xmq makes no
// development CA and names none in its log; a hint never names the port
// of a listener that serves its own certificate.
func TestNoDevCAForOwnCertificates(t *testing.T) {
	certFile, keyFile := certstest.NewCA(t).WriteServerFiles("localhost")
	body := fmt.Sprintf("listeners:\n  - {name: mqtts, transport: tls, address: \"127.0.0.1:0\", tls: {cert_file: %s, key_file: %s}}\nlog: {format: json}\n", certFile, keyFile)
	data := t.TempDir()
	b := startRun(t, "-c", writeFile(t, body), "-data", data)
	log := b.stderr.String()
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log, "development CA") || strings.Contains(log, "mosquitto_sub --cafile") {
		t.Errorf("a development CA is advertised though every listener has its own certificate:\n%s", log)
	}
	if _, err := os.Stat(filepath.Join(data, devCertsDir)); !os.IsNotExist(err) {
		t.Errorf("development CA made in %s: %v", data, err)
	}

	cfg := config.Default()
	cfg.Listeners[1].Address = "0.0.0.0:9883"
	cfg.Listeners[1].TLS.CertFile, cfg.Listeners[1].TLS.KeyFile = certFile, keyFile
	if got := mosquittoSubHint("ca.pem", &cfg); strings.Contains(got, "9883") {
		t.Errorf("hint %q names a port that serves the operator's certificate", got)
	}
}

// TestCertsHostAndPort: xmq certs -host adds names to the development
// certificate, keeps them for the next run, refuses what is no name, and
// its hint uses the configuration's TLS port, not always 8883.
func TestCertsHostAndPort(t *testing.T) {
	data := t.TempDir()
	cfgFile := writeFile(t, "listeners:\n  - {transport: tls, address: ':9883'}\n  - {transport: wss, address: ':9443', path: /ws}\n")
	certsRun := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"certs", "-c", cfgFile, "-data", data}, args...), &out, &out)
		return out.String(), err
	}
	out, err := certsRun("-host", "broker.example.lan,192.0.2.44")
	if err != nil {
		t.Fatalf("xmq certs -host: %v\n%s", err, out)
	}
	for _, want := range []string{"broker.example.lan", "192.0.2.44", "-p 9883", "wss://localhost:9443/ws"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(data, "certs", certs.CertFileName), filepath.Join(data, "certs", certs.CertKeyFileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"broker.example.lan", "192.0.2.44", "localhost"} {
		if err := pair.Leaf.VerifyHostname(h); err != nil {
			t.Errorf("server.pem: %v", err)
		}
	}
	if hosts, err := os.ReadFile(filepath.Join(data, "certs", certs.HostsFileName)); err != nil || !strings.Contains(string(hosts), "broker.example.lan") {
		t.Errorf("hosts file: %q, %v", hosts, err)
	}
	// The next run without -host keeps the names.
	if out, err := certsRun(); err != nil || !strings.Contains(out, "broker.example.lan") {
		t.Errorf("xmq certs after -host: %v\n%s", err, out)
	}
	if _, err := certsRun("-host", "not a name"); err == nil {
		t.Error("xmq certs -host 'not a name' succeeded")
	}
}
