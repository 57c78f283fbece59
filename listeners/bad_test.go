package listeners

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/quic-go/quic-go"

	"github.com/xmq-io/xmq/certs/certstest"
)

// TestTLSStalledHandshake opens TLS connections that never finish the
// handshake: a normal client is served meanwhile, and the stalled ones are
// closed when the handshake timeout passes.
func TestTLSStalledHandshake(t *testing.T) {
	ca := certstest.NewCA(t)
	l := listen(t, Options{Transport: TransportTLS, TLS: ca.ServerConfig(), HandshakeTimeout: 500 * time.Millisecond})
	tests := []struct {
		name string
		send []byte // what the stalled client sends before going silent
	}{
		{"nothing", nil},
		{"half a ClientHello", []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}},
	}
	var stalled []net.Conn
	for _, tt := range tests {
		c, err := net.DialTimeout("tcp", l.Addr().String(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := c.Write(tt.send); err != nil {
			t.Fatal(err)
		}
		stalled = append(stalled, c)
	}
	// Others are unaffected: a real client connects at once.
	start := time.Now()
	client, server := mustConnect(t, l, dialURL("mqtts", l), ca.ClientConfig())
	roundTrip(t, client, server, []byte{0xc0, 0x00})
	if took := time.Since(start); took > 400*time.Millisecond {
		t.Errorf("a good client waited %v behind stalled handshakes", took)
	}
	for i, c := range stalled {
		t.Run(tests[i].name, func(t *testing.T) {
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err := io.ReadAll(c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("stalled handshake still open after 5s")
			}
		})
	}
}

// refusal dials url as a client the listener must refuse, without anyone
// calling Accept, and returns how the refusal showed: the Dial error or,
// when the handshake completed on the client's side (TLS 1.3 checks client
// certificates after it, QUIC may close after it), the first Read's error.
// A timeout means the server did not refuse.
func refusal(t *testing.T, url string, conf *tls.Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, url, conf)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err = c.Read(make([]byte, 1))
	if err == nil {
		t.Fatalf("%s: read a byte, want the connection refused", url)
	}
	return err
}

// TestTLSRefusals covers handshakes the server refuses, each with an alert
// the client can report.
func TestTLSRefusals(t *testing.T) {
	ca := certstest.NewCA(t)
	mutual := ca.ServerConfig()
	mutual.ClientAuth = tls.RequireAndVerifyClientCert
	mutual.ClientCAs = ca.Pool()
	l := listen(t, Options{Transport: TransportTLS, TLS: mutual, IdentityAsUsername: IdentitySAN})
	tests := []struct {
		name string
		conf *tls.Config
		err  string
	}{
		{"no client certificate", ca.ClientConfig(), "certificate required"},
		{"certificate of another CA", ca.ClientConfig(certstest.NewCA(t).ClientCert("x", "x.example")), "unknown certificate authority"},
		{"certificate without SAN", ca.ClientConfig(ca.ClientCert("only-cn")), "bad certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := refusal(t, dialURL("mqtts", l), tt.conf)
			if !strings.Contains(err.Error(), tt.err) {
				t.Errorf("got %v, want an error containing %q", err, tt.err)
			}
		})
	}
	t.Run("identity", func(t *testing.T) {
		_, server := mustConnect(t, l, dialURL("mqtts", l), ca.ClientConfig(ca.ClientCert("cn-ignored", "sensor.example")))
		if got := server.(CertIdentifier).CertIdentity(); got != "sensor.example" {
			t.Errorf("CertIdentity() = %q, want the first SAN", got)
		}
	})
}

// TestWebSocketRefusals covers requests that must not become MQTT
// connections, and a text frame on one that did.
func TestWebSocketRefusals(t *testing.T) {
	l := listen(t, Options{Transport: TransportWS, AllowedOrigins: []string{"https://app.example", "https://*.example.org"}})
	base := "ws://" + l.Addr().String()
	tests := []struct {
		name   string
		path   string
		protos []string
		origin string
		status int
		body   string
		reason string // the handshake failure counted; "" none
	}{
		{"wrong subprotocol", "/mqtt", []string{"chat"}, "", http.StatusBadRequest, `subprotocol "chat" refused`, FailWSSubprotocol},
		{"no subprotocol", "/mqtt", nil, "", http.StatusBadRequest, "subprotocol", FailWSSubprotocol},
		{"wrong path", "/other", []string{"mqtt"}, "", http.StatusNotFound, "no MQTT endpoint", FailWSPath},
		{"origin not allowed", "/mqtt", []string{"mqtt"}, "https://evil.example", http.StatusForbidden, "origin", FailWSOrigin},
		{"origin allowed", "/mqtt", []string{"mqtt"}, "https://app.example", http.StatusSwitchingProtocols, "", ""},
		{"wildcard origin", "/mqtt", []string{"mqttv3.1"}, "https://a.b.example.org", http.StatusSwitchingProtocols, "", ""},
		{"no origin: not a browser", "/mqtt", []string{"mqtt"}, "", http.StatusSwitchingProtocols, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := l.HandshakeFailures()
			defer func() {
				if tt.reason != "" {
					waitFailure(t, l, before, tt.reason)
				} else if after := l.HandshakeFailures(); !maps.Equal(before, after) {
					t.Errorf("an accepted upgrade changed the failures from %v to %v", before, after)
				}
			}()
			d := websocket.Dialer{Subprotocols: tt.protos, HandshakeTimeout: 5 * time.Second}
			h := http.Header{}
			if tt.origin != "" {
				h.Set("Origin", tt.origin)
			}
			ws, resp, err := d.Dial(base+tt.path, h)
			if resp == nil {
				t.Fatalf("no HTTP response: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if ws != nil {
				if c, err := l.Accept(); err == nil {
					_ = c.Close()
				}
				_ = ws.Close()
			}
			if resp.StatusCode != tt.status || !strings.Contains(string(body), tt.body) {
				t.Errorf("status %d %q, want %d with %q", resp.StatusCode, body, tt.status, tt.body)
			}
		})
	}

	t.Run("text frame", func(t *testing.T) {
		accepted := make(chan net.Conn, 1)
		go func() {
			c, err := l.Accept()
			if err == nil {
				accepted <- c
			}
		}()
		ws, _, err := (&websocket.Dialer{Subprotocols: []string{"mqtt"}}).Dial(base+"/mqtt", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		server := <-accepted
		defer server.Close()
		if err := ws.WriteMessage(websocket.TextMessage, []byte("\x10\x00")); err != nil {
			t.Fatal(err)
		}
		_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := server.Read(make([]byte, 16)); !errors.Is(err, ErrTextFrame) {
			t.Errorf("server Read = %v, want ErrTextFrame", err)
		}
		_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _, err = ws.ReadMessage()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseUnsupportedData {
			t.Errorf("client got %v, want close 1003 (unsupported data)", err)
		}
	})

	t.Run("not an upgrade", func(t *testing.T) {
		before := l.HandshakeFailures()
		resp, err := http.Get("http://" + l.Addr().String() + "/mqtt")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("status %d, want 400", resp.StatusCode)
		}
		waitFailure(t, l, before, FailWSRequest)
	})

	t.Run("Dial reports the refusal", func(t *testing.T) {
		_, err := Dial(context.Background(), base+"/nowhere", nil)
		if err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "no MQTT endpoint") {
			t.Errorf("Dial = %v, want the 404 and the server's reason", err)
		}
	})
}

// TestWebSocketMessageBoundaries checks that MQTT bytes flow whatever the
// framing: a packet split over several messages, several packets in one.
func TestWebSocketMessageBoundaries(t *testing.T) {
	l := listen(t, Options{Transport: TransportWS})
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			accepted <- c
		}
	}()
	ws, _, err := (&websocket.Dialer{Subprotocols: []string{"mqtt"}}).Dial("ws://"+l.Addr().String()+"/mqtt", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	server := <-accepted
	defer server.Close()
	stream := []byte("\x30\x05\x00\x01tab\xc0\x00\xc0\x00")
	for _, part := range [][]byte{stream[:1], stream[1:4], {}, stream[4:]} {
		if err := ws.WriteMessage(websocket.BinaryMessage, part); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, len(stream))
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(server, got); err != nil || string(got) != string(stream) {
		t.Fatalf("read %x, %v; want %x", got, err, stream)
	}
	// A ping is answered with a pong.
	pong := make(chan string, 1)
	ws.SetPongHandler(func(data string) error { pong <- data; return nil })
	go func() { _, _, _ = ws.ReadMessage() }()
	if err := ws.WriteControl(websocket.PingMessage, []byte("hi"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = server.Read(make([]byte, 1)) }() // the server reads, so it sees the ping
	select {
	case d := <-pong:
		if d != "hi" {
			t.Errorf("pong %q, want hi", d)
		}
	case <-time.After(5 * time.Second):
		t.Error("no pong")
	}
}

// TestWebSocketForwardedFor takes the client's address from the headers of
// a trusted proxy only.
func TestWebSocketForwardedFor(t *testing.T) {
	tests := []struct {
		name    string
		trusted []string
		header  http.Header
		want    string // the host of RemoteAddr
	}{
		{"untrusted peer", nil, http.Header{"X-Forwarded-For": {"203.0.113.9"}}, "127.0.0.1"},
		{"X-Forwarded-For", []string{"127.0.0.0/8"}, http.Header{"X-Forwarded-For": {"203.0.113.9, 10.0.0.1"}}, "10.0.0.1"},
		{"proxy chain", []string{"127.0.0.1", "10.0.0.0/8"}, http.Header{"X-Forwarded-For": {"203.0.113.9, 10.0.0.1"}}, "203.0.113.9"},
		{"Forwarded", []string{"127.0.0.1"}, http.Header{"Forwarded": {`for="[2001:db8::7]:4711";proto=https`}}, "2001:db8::7"},
		{"no header", []string{"127.0.0.1"}, http.Header{}, "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := listen(t, Options{Transport: TransportWS, TrustedProxies: tt.trusted})
			accepted := make(chan net.Conn, 1)
			go func() {
				if c, err := l.Accept(); err == nil {
					accepted <- c
				}
			}()
			ws, _, err := (&websocket.Dialer{Subprotocols: []string{"mqtt"}}).Dial("ws://"+l.Addr().String()+"/mqtt", tt.header)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			server := <-accepted
			defer server.Close()
			host, _, _ := net.SplitHostPort(server.RemoteAddr().String())
			if host != tt.want {
				t.Errorf("RemoteAddr = %v, want host %s", server.RemoteAddr(), tt.want)
			}
		})
	}
}

// TestQUICWrongALPN refuses a QUIC client that does not speak "mqtt".
func TestQUICWrongALPN(t *testing.T) {
	ca := certstest.NewCA(t)
	l := listen(t, Options{Transport: TransportQUIC, TLS: ca.ServerConfig()})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conf := ca.ClientConfig()
	conf.NextProtos = []string{"h3"}
	qc, err := quic.DialAddr(ctx, l.Addr().String(), conf, nil)
	if err == nil {
		_ = qc.CloseWithError(0, "")
		t.Fatal("QUIC handshake with ALPN h3 succeeded")
	}
	if !strings.Contains(err.Error(), "no application protocol") {
		t.Errorf("got %v, want a no_application_protocol refusal", err)
	}
	// The listener goes on serving.
	client, server := mustConnect(t, l, "quic://"+l.Addr().String(), ca.ClientConfig())
	roundTrip(t, client, server, []byte{0xc0, 0x00})
}

// TestMaxConnections closes connections beyond the listener's limit and
// takes new ones once a place is free.
func TestMaxConnections(t *testing.T) {
	ca := certstest.NewCA(t)
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts(ca)
			o.MaxConnections = 1
			l := listen(t, o)
			url := dialURL(tc.scheme, l)
			client, server := mustConnect(t, l, url, ca.ClientConfig())
			before := l.HandshakeFailures()
			var ne net.Error
			if err := refusal(t, url, ca.ClientConfig()); errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("second connection over a limit of 1: %v, want it closed", err)
			}
			waitFailure(t, l, before, FailMaxConnections)
			_ = client.Close()
			_ = server.Close()
			deadline := time.Now().Add(5 * time.Second)
			for {
				c3, s3, err := connect(t, l, url, ca.ClientConfig())
				if err == nil {
					_ = c3.Close()
					_ = s3.Close()
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no connection after the first closed: %v", err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// TestProxyProtocol reads v1 and v2 headers from a trusted source.
func TestProxyProtocol(t *testing.T) {
	v2 := func(cmd, fam byte, addrs []byte) []byte {
		h := append([]byte{}, proxyV2Sig...)
		h = append(h, 0x20|cmd, fam, 0, 0)
		binary.BigEndian.PutUint16(h[14:], uint16(len(addrs)))
		return append(h, addrs...)
	}
	tests := []struct {
		name    string
		trusted []string
		header  []byte
		remote  string // "" = refused
	}{
		{"v1 TCP4", []string{"127.0.0.1"}, []byte("PROXY TCP4 198.51.100.7 192.0.2.1 40000 1883\r\n"), "198.51.100.7:40000"},
		{"v1 TCP6", []string{"127.0.0.0/8"}, []byte("PROXY TCP6 2001:db8::1 2001:db8::2 5 1883\r\n"), "[2001:db8::1]:5"},
		{"v1 UNKNOWN", []string{"127.0.0.1"}, []byte("PROXY UNKNOWN\r\n"), "127.0.0.1"},
		{"v2 TCP4", []string{"127.0.0.1"}, v2(1, 0x11, []byte{203, 0, 113, 5, 192, 0, 2, 1, 0x1f, 0x90, 0x07, 0x5b}), "203.0.113.5:8080"},
		{"v2 LOCAL", []string{"127.0.0.1"}, v2(0, 0x00, nil), "127.0.0.1"},
		{"no header from a trusted proxy", []string{"127.0.0.1"}, []byte("\x10\x0c\x00\x04MQTT"), ""},
		{"bad v1", []string{"127.0.0.1"}, []byte("PROXY TCP4 nonsense\r\n"), ""},
		{"untrusted source keeps its address", []string{"192.0.2.0/24"}, nil, "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := listen(t, Options{Transport: TransportTCP, ProxyProtocol: true, TrustedProxies: tt.trusted,
				HandshakeTimeout: time.Second})
			accepted := make(chan net.Conn, 1)
			go func() {
				if c, err := l.Accept(); err == nil {
					accepted <- c
				}
			}()
			c, err := net.DialTimeout("tcp", l.Addr().String(), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			payload := []byte{0xc0, 0x00}
			if _, err := c.Write(append(append([]byte{}, tt.header...), payload...)); err != nil {
				t.Fatal(err)
			}
			select {
			case server := <-accepted:
				defer server.Close()
				if tt.remote == "" {
					t.Fatalf("accepted from %v, want the connection refused", server.RemoteAddr())
				}
				if got := server.RemoteAddr().String(); got != tt.remote && !strings.HasPrefix(got, tt.remote+":") {
					t.Errorf("RemoteAddr = %s, want %s", got, tt.remote)
				}
				got := make([]byte, len(payload))
				_ = server.SetReadDeadline(time.Now().Add(2 * time.Second))
				if _, err := io.ReadFull(server, got); err != nil || string(got) != string(payload) {
					t.Errorf("after the header read %x, %v; want %x", got, err, payload)
				}
			case <-time.After(2 * time.Second):
				if tt.remote != "" {
					t.Fatal("nothing accepted")
				}
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	ca := certstest.NewCA(t)
	tests := []struct {
		name string
		o    Options
		err  string
	}{
		{"tls without config", Options{Transport: TransportTLS}, "needs a TLS configuration"},
		{"tcp with config", Options{Transport: TransportTCP, TLS: ca.ServerConfig()}, "takes no TLS"},
		{"proxy without sources", Options{Transport: TransportTCP, ProxyProtocol: true}, "trusted proxies"},
		{"proxy on quic", Options{Transport: TransportQUIC, TLS: ca.ServerConfig(), ProxyProtocol: true, TrustedProxies: []string{"10.0.0.1"}}, "not quic"},
		{"bad proxy", Options{Transport: TransportWS, TrustedProxies: []string{"10.0.0.300"}}, "trusted proxy"},
		{"identity without client certs", Options{Transport: TransportTLS, TLS: ca.ServerConfig(), IdentityAsUsername: IdentityCN}, "verified client certificates"},
		{"identity on ws", Options{Transport: TransportWS, IdentityAsUsername: IdentityCN}, "needs a TLS transport"},
		{"unknown identity", Options{Transport: TransportTCP, IdentityAsUsername: "uid"}, "want cn or san"},
		{"path on tcp", Options{Transport: TransportTCP, Path: "/mqtt"}, "path is for ws"},
		{"relative path", Options{Transport: TransportWS, Path: "mqtt"}, "must start with /"},
		{"bad origin", Options{Transport: TransportWS, AllowedOrigins: []string{"example.com"}}, "scheme://host"},
		{"unknown transport", Options{Transport: "udp"}, "unknown transport"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Listen(tt.o)
			if err == nil {
				_ = l.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Listen = %v, want an error containing %q", err, tt.err)
			}
		})
	}
}
