package listeners

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/xmq-io/xmq/certs/certstest"
)

// TestWebSocketAnyPath: with Path "*" a ws listener answers MQTT on every
// path, as Mosquitto does, so its clients keep working unchanged.
func TestWebSocketAnyPath(t *testing.T) {
	l := listen(t, Options{Transport: TransportWS, Path: AnyPath})
	for _, path := range []string{"/", "/mqtt", "/ws/anything"} {
		d := websocket.Dialer{Subprotocols: []string{"mqtt"}, HandshakeTimeout: 5 * time.Second}
		ws, resp, err := d.Dial("ws://"+l.Addr().String()+path, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Errorf("%s: status %d", path, resp.StatusCode)
		}
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
		_ = ws.Close()
	}
	if err := (&Options{Transport: TransportWS, Path: "mqtt"}).Validate(); err == nil {
		t.Error("a path without / was accepted")
	}
}

// TestHandshakeHint: a client that does not trust the listener's
// certificate makes the listener log its failed handshake with a hint
// about the certificate, not only TLS's own words.
func TestHandshakeHint(t *testing.T) {
	ca := certstest.NewCA(t)
	core, logs := observer.New(zap.InfoLevel)
	l := listen(t, Options{Transport: TransportTLS, TLS: ca.ServerConfig(), Log: zap.New(core)})
	// No RootCAs: the client does not trust the test CA and aborts.
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", l.Addr().String(), &tls.Config{ServerName: "localhost"})
	if err == nil {
		_ = c.Close()
		t.Fatal("the handshake succeeded without trusting the CA")
	}
	deadline := time.Now().Add(5 * time.Second)
	for logs.FilterMessage("refusing connection: handshake failed").Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	entries := logs.FilterMessage("refusing connection: handshake failed").All()
	if len(entries) == 0 {
		t.Fatal("no handshake failure logged")
	}
	if h, _ := entries[0].ContextMap()["hint"].(string); !strings.Contains(h, "xmq certs -host") {
		t.Errorf("log %v has no certificate hint", entries[0].ContextMap())
	}
	if handshakeHint(errors.New("tls: first record does not look like a TLS handshake")) != "" {
		t.Error("a hint for an unrelated failure")
	}
}
