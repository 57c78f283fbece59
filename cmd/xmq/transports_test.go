package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/certs"
	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// allTransportsConfig listens on every transport on free loopback ports.
const allTransportsConfig = `
listeners:
  - {name: tcp, transport: tcp, address: "127.0.0.1:0"}
  - {name: tls, transport: tls, address: "127.0.0.1:0"}
  - {name: ws, transport: ws, address: "127.0.0.1:0"}
  - {name: wss, transport: wss, address: "127.0.0.1:0"}
  - {name: quic, transport: quic, address: "127.0.0.1:0"}
log:
  format: json
`

// TestRunServesEveryTransport starts xmq with every transport and the
// development CA, finds the CA where the issue promises it and connects
// over each transport trusting only that CA.
func TestRunServesEveryTransport(t *testing.T) {
	data := t.TempDir()
	b := startRun(t, "-c", writeFile(t, allTransportsConfig), "-data", data)
	caFile := filepath.Join(data, "certs", "ca.pem")
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatalf("development CA not at %s: %v", caFile, err)
	}
	if log := b.stderr.String(); !strings.Contains(log, caFile) {
		t.Errorf("log does not say where the CA is (%s):\n%s", caFile, log)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tlsConf := &tls.Config{RootCAs: pool, ServerName: "localhost"}
	schemes := []string{"mqtt", "mqtts", "ws", "wss", "quic"}
	if len(b.addrs) != len(schemes) {
		t.Fatalf("ready reported %v, want %d addresses", b.addrs, len(schemes))
	}
	for i, scheme := range schemes {
		t.Run(scheme, func(t *testing.T) {
			c := mqtttest.DialConn(t, scheme+"://"+b.addrs[i].String()+"/mqtt", tlsConf, codec.V5)
			c.Timeout = 10 * time.Second
			c.Connect(mqtttest.ConnectPacket(codec.V5, "cmd-test", func(p *codec.Connect) { p.KeepAlive = 30 }))
		})
	}
	if err := b.stop(t); err != nil {
		t.Errorf("run: %v", err)
	}
}

// TestRunTemporaryDevCA checks that with no data directory the development
// CA lives in a temporary directory that is logged and removed at exit.
func TestRunTemporaryDevCA(t *testing.T) {
	b := startRun(t, "-c", writeFile(t, allTransportsConfig), "-data", "")
	log := b.stderr.String()
	i := strings.Index(log, `"ca_file":"`)
	if i < 0 {
		t.Fatalf("log does not name the temporary CA file:\n%s", log)
	}
	caFile, _, _ := strings.Cut(log[i+len(`"ca_file":"`):], `"`)
	if _, err := os.Stat(caFile); err != nil {
		t.Fatalf("logged CA file %s: %v", caFile, err)
	}
	if err := b.stop(t); err != nil {
		t.Errorf("run: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(caFile)); !os.IsNotExist(err) {
		t.Errorf("temporary CA directory %s still there after exit: %v", filepath.Dir(caFile), err)
	}
}

func TestRunCertsCommand(t *testing.T) {
	data := t.TempDir()
	run1 := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(context.Background(), append([]string{"certs", "-data", data}, args...), &out, &out); err != nil {
			t.Fatalf("xmq certs %q: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	out := run1()
	caFile := filepath.Join(data, "certs", certs.CAFileName)
	if !strings.Contains(out, caFile) || !strings.Contains(out, "(created)") {
		t.Errorf("first xmq certs printed\n%s\nwant the new CA at %s", out, caFile)
	}
	first, _ := os.ReadFile(caFile)
	if out := run1(); !strings.Contains(out, "(existing)") {
		t.Errorf("second xmq certs printed\n%s\nwant the existing CA", out)
	}
	if again, _ := os.ReadFile(caFile); !bytes.Equal(first, again) {
		t.Error("xmq certs replaced an existing CA without -regen")
	}
	out = run1("-regen", "-client", "sensor-7")
	if again, _ := os.ReadFile(caFile); bytes.Equal(first, again) {
		t.Error("xmq certs -regen kept the old CA")
	}
	clientFile := filepath.Join(data, "certs", "client-sensor-7.pem")
	if !strings.Contains(out, clientFile) {
		t.Errorf("xmq certs -client printed\n%s\nwant %s", out, clientFile)
	}
	pair, err := tls.LoadX509KeyPair(clientFile, filepath.Join(data, "certs", "client-sensor-7-key.pem"))
	if err != nil {
		t.Fatalf("client certificate: %v", err)
	}
	ca, err := certs.LoadCA(caFile, filepath.Join(data, "certs", certs.CAKeyFileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate does not verify against the CA: %v", err)
	}
	if pair.Leaf.Subject.CommonName != "sensor-7" {
		t.Errorf("client certificate CN = %q, want sensor-7", pair.Leaf.Subject.CommonName)
	}

	var help bytes.Buffer
	if err := run(context.Background(), []string{"certs", "-h"}, &help, &help); err != nil || !strings.Contains(help.String(), "-regen") {
		t.Errorf("xmq certs -h = %v:\n%s", err, help.String())
	}
	if err := run(context.Background(), []string{"certs", "-data", ""}, &help, &help); err == nil {
		t.Error("xmq certs -data \"\" succeeded, want a usage error")
	}
}
