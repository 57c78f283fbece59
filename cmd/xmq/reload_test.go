package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/xmq-io/xmq/certs/certstest"
	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// TestReloadConfiguration: SIGHUP applies the configuration file again. A
// limit changes live (max_connections 1 refuses a second client while the
// first stays connected), the log level changes, and a listener's new
// address is logged as needing a restart while the old one keeps serving.
func TestReloadConfiguration(t *testing.T) {
	file := writeFile(t, "listeners:\n  - address: 127.0.0.1:0\nlog:\n  level: info\n")
	b := startRun(t, "-c", file, "-data", "", "-log-format", "json")
	addr := b.addrs[0].String()
	first, ack, err := dialMQTT(t, addr, "first", codec.V5, true)
	if err != nil || ack.ReasonCode != codec.Success {
		t.Fatalf("first client: %v %v", err, ack)
	}
	defer first.Close()
	if rc := connack(t, addr, "", ""); rc != codec.Success {
		t.Fatalf("a second client before the reload: %v", rc)
	}

	if err := os.WriteFile(file, []byte("listeners:\n  - address: 127.0.0.1:1\nlog:\n  level: debug\nbroker:\n  max_connections: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sighup(t) // signal_*_test.go
	waitUntil(t, "the reload", func() bool { return strings.Contains(b.stderr.String(), `"msg":"configuration reloaded"`) })
	log := b.stderr.String()
	for _, want := range []string{
		`"changed":["broker.max_connections","log.level"]`,
		`"needs_restart":["listeners[0].address"]`,
		`listeners[0].address changed in the configuration: needs a restart`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not say %s:\n%s", want, log)
		}
	}
	if rc := connack(t, addr, "", ""); rc != codec.ServerBusy {
		t.Errorf("a second client after max_connections 1: %v, want Server busy", rc)
	}
	// The first connection stayed up through the reload.
	first.Send(&codec.Pingreq{})
	mqtttest.Expect[*codec.Pingresp](first)
}

// TestReloadListenerCertificate: SIGHUP points a TLS listener at new
// certificate files named in the configuration; the next handshake serves
// them, with no restart.
func TestReloadListenerCertificate(t *testing.T) {
	ca1, ca2 := certstest.NewCA(t), certstest.NewCA(t)
	cert1, key1 := ca1.WriteServerFiles()
	cert2, key2 := ca2.WriteServerFiles()
	body := "listeners:\n  - transport: tls\n    address: 127.0.0.1:0\n    tls: {cert_file: %s, key_file: %s}\n"
	file := writeFile(t, fmt.Sprintf(body, cert1, key1))
	b := startRun(t, "-c", file, "-data", "", "-log-format", "json")
	addr := b.addrs[0].String()
	handshake := func(ca *certstest.CA) error {
		c, err := tls.Dial("tcp", addr, ca.ClientConfig())
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := handshake(ca1); err != nil {
		t.Fatalf("before the reload: %v", err)
	}
	if err := os.WriteFile(file, fmt.Appendf(nil, body, cert2, key2), 0o600); err != nil {
		t.Fatal(err)
	}
	sighup(t)
	waitUntil(t, "the new certificate", func() bool { return handshake(ca2) == nil })
	if err := handshake(ca1); err == nil {
		t.Error("the old certificate is still served")
	}
	if log := b.stderr.String(); !strings.Contains(log, `"changed":["listeners[0].tls.cert_file","listeners[0].tls.key_file"]`) {
		t.Errorf("the reload does not say what changed:\n%s", log)
	}
}
