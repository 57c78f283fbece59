package listeners

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/xmq-io/xmq/certs/certstest"
	"github.com/xmq-io/xmq/core"
)

// The conns' methods core finds by interface (its fast paths and
// identity checks): a rename on either side must fail the build, not
// switch a fast path off. listeners does not import core; its tests may.
var (
	_ core.CertIdentifier = (*tlsConn)(nil)
	_ core.CertIdentifier = (*wsConn)(nil)
	_ core.CertIdentifier = (*quicConn)(nil)
	_ core.CrossOriginer  = (*wsConn)(nil)
	_ core.ReadWaiter     = (*tlsConn)(nil)
	_ core.ReadWaiter     = (*wsConn)(nil)
	_ core.ReadWaiter     = (*quicConn)(nil)
	_ core.NowWriter      = (*wsConn)(nil)
	_ core.IdleSocket     = (*wsConn)(nil)
	_ core.IdleSocket     = (*tlsConn)(nil)
)

// proxyV1 is the PROXY header the capability tests send: the client
// 198.51.100.7:40000 as the proxy saw it.
const (
	proxyV1     = "PROXY TCP4 198.51.100.7 192.0.2.1 40000 1883\r\n"
	proxyClient = "198.51.100.7:40000"
)

// foreignOrigin is the Origin the capability tests' WebSocket clients send.
const foreignOrigin = "https://foreign.example"

// TestConnCapabilities checks that every listener option keeps every
// capability the broker looks for on the conns a transport hands out:
// the raw socket on plain TCP (syscall.Conn, core's raw I/O and idle
// read-buffer release), the TLS state, the certificate identity and the
// foreign origin of a WebSocket page, and core's waits without a read
// buffer (ReadWaiter), in-place writes (NowWriter) and parking of an idle
// WebSocket or TLS conn (IdleSocket: a socket to wait on, as the conn has
// carried nothing since its handshake). A wrapper that forgets to forward
// one silently costs speed, memory or a security rule.
func TestConnCapabilities(t *testing.T) {
	ca := certstest.NewCA(t)
	mutual := ca.ServerConfig()
	mutual.ClientAuth = tls.VerifyClientCertIfGiven
	mutual.ClientCAs = ca.Pool()
	clientConf := ca.ClientConfig(ca.ClientCert("sensor-7"))

	type option struct {
		name  string
		apply func(o *Options)
		proxy bool   // the client sends proxyV1 first
		ident string // the identity the conn must report
	}
	none := option{name: "none", apply: func(*Options) {}}
	maxConns := option{name: "max_connections", apply: func(o *Options) { o.MaxConnections = 100 }}
	proxy := option{name: "proxy_protocol", proxy: true, apply: func(o *Options) {
		o.ProxyProtocol, o.TrustedProxies = true, []string{"127.0.0.1"}
	}}
	identity := option{name: "identity_as_username", ident: "sensor-7", apply: func(o *Options) {
		o.TLS, o.IdentityAsUsername = mutual, IdentityCN
	}}
	all := func(opts ...option) option {
		o := option{name: "all", apply: func(o *Options) {
			for _, x := range opts {
				x.apply(o)
			}
		}}
		for _, x := range opts {
			o.proxy = o.proxy || x.proxy
			if x.ident != "" {
				o.ident = x.ident
			}
		}
		return o
	}

	tests := []struct {
		transport string
		options   []option
		raw       bool // the conn offers its socket
		tls       bool // the conn reports a finished TLS handshake
		cross     bool // the conn reports the page's foreign origin
		waits     bool // core.ReadWaiter
		framed    bool // core.NowWriter (WebSocket)
		idle      bool // core.IdleSocket, with a socket to offer (WebSocket, TLS)
	}{
		{TransportTCP, []option{none, maxConns, proxy, all(maxConns, proxy)}, true, false, false, false, false, false},
		{TransportTLS, []option{none, maxConns, proxy, identity, all(maxConns, proxy, identity)}, false, true, false, true, false, true},
		{TransportWS, []option{none, maxConns, proxy, all(maxConns, proxy)}, false, false, true, true, true, true},
		{TransportWSS, []option{none, maxConns, proxy, identity, all(maxConns, proxy, identity)}, false, true, true, true, true, true},
		{TransportQUIC, []option{none, maxConns, identity, all(maxConns, identity)}, false, true, false, true, false, false},
	}
	for _, tt := range tests {
		for _, opt := range tt.options {
			t.Run(tt.transport+"/"+opt.name, func(t *testing.T) {
				o := Options{Transport: tt.transport, HandshakeTimeout: 5 * time.Second}
				if tt.tls {
					o.TLS = ca.ServerConfig()
				}
				opt.apply(&o)
				l := listen(t, o)
				server := acceptOne(t, l, func() net.Conn { return dialCapable(t, l, opt.proxy, clientConf) })

				sc, isSyscall := server.(syscall.Conn)
				raw := false
				if isSyscall {
					_, err := sc.SyscallConn()
					raw = err == nil
				}
				if raw != tt.raw {
					t.Errorf("%T offers its socket: %v, want %v", server, raw, tt.raw)
				}
				ts, ok := server.(TLSStater)
				if gotTLS := ok && ts.ConnectionState().HandshakeComplete; gotTLS != tt.tls {
					t.Errorf("%T reports a TLS handshake: %v, want %v", server, gotTLS, tt.tls)
				}
				var ident string
				if ci, ok := server.(CertIdentifier); ok {
					ident = ci.CertIdentity()
				}
				if ident != opt.ident {
					t.Errorf("%T CertIdentity() = %q, want %q", server, ident, opt.ident)
				}
				var cross string
				if co, ok := server.(CrossOriginer); ok {
					cross = co.CrossOrigin()
				}
				if want := map[bool]string{true: foreignOrigin}[tt.cross]; cross != want {
					t.Errorf("%T CrossOrigin() = %q, want %q", server, cross, want)
				}
				if _, ok := server.(core.ReadWaiter); ok != tt.waits {
					t.Errorf("%T is a core.ReadWaiter: %v, want %v", server, ok, tt.waits)
				}
				if _, now := server.(core.NowWriter); now != tt.framed {
					t.Errorf("%T is a core.NowWriter: %v, want %v", server, now, tt.framed)
				}
				is, idle := server.(core.IdleSocket)
				if idle {
					idle = is.IdleSocket() != nil
				}
				if idle != tt.idle {
					t.Errorf("%T offers an idle socket: %v, want %v", server, idle, tt.idle)
				}
				if opt.proxy && server.RemoteAddr().String() != proxyClient {
					t.Errorf("RemoteAddr = %v, want the PROXY header's %s", server.RemoteAddr(), proxyClient)
				}
			})
		}
	}
}

// acceptOne runs dial while l accepts, and returns the accepted conn;
// both ends are closed at cleanup.
func acceptOne(t *testing.T, l Listener, dial func() net.Conn) net.Conn {
	t.Helper()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			accepted <- c
		}
	}()
	client := dial()
	t.Cleanup(func() { _ = client.Close() })
	if l.Transport() == TransportQUIC {
		if _, err := client.Write([]byte{0}); err != nil { // QUIC shows a stream once it carries bytes
			t.Fatal(err)
		}
	}
	select {
	case c := <-accepted:
		t.Cleanup(func() { _ = c.Close() })
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("nothing accepted")
		return nil
	}
}

// dialCapable dials l as a client of its transport: after a PROXY header
// when proxy is set, with a client certificate for TLS, and with
// foreignOrigin as the page's Origin for ws and wss.
func dialCapable(t *testing.T, l Listener, proxy bool, conf *tls.Config) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addr := l.Addr().String()
	tcp := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil && proxy {
			_, err = c.Write([]byte(proxyV1))
		}
		return c, err
	}
	switch l.Transport() {
	case TransportTCP, TransportTLS:
		c, err := tcp(ctx, "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if l.Transport() == TransportTCP {
			return c
		}
		tc := tls.Client(c, clientTLS(conf, addr, ALPNMQTT))
		if err := tc.HandshakeContext(ctx); err != nil {
			t.Fatal(err)
		}
		return tc
	case TransportWS, TransportWSS:
		d := websocket.Dialer{Subprotocols: []string{"mqtt"}, NetDialContext: tcp, TLSClientConfig: clientTLS(conf, addr, ALPNHTTP)}
		ws, _, err := d.DialContext(ctx, l.Transport()+"://"+addr+"/mqtt",
			http.Header{"Origin": {foreignOrigin}})
		if err != nil {
			t.Fatal(err)
		}
		return ws.NetConn()
	default:
		c, err := Dial(ctx, "quic://"+addr, conf)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// TestProxyHeaderLeavesTheStream sends a PROXY header and the first MQTT
// bytes in one segment, as load balancers do: the conn still offers its
// socket, and the bytes after the header are in the socket, not in a
// buffer of the listener's that the broker's raw reads would skip.
func TestProxyHeaderLeavesTheStream(t *testing.T) {
	for _, header := range []string{proxyV1, string(proxyV2TCP4(t))} {
		l := listen(t, Options{Transport: TransportTCP, ProxyProtocol: true, TrustedProxies: []string{"127.0.0.1"}})
		payload := []byte("\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c\x00\x00")
		server := acceptOne(t, l, func() net.Conn {
			c, err := net.DialTimeout("tcp", l.Addr().String(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write(append([]byte(header), payload...)); err != nil {
				t.Fatal(err)
			}
			return c
		})
		if server.RemoteAddr().String() != proxyClient {
			t.Errorf("RemoteAddr = %v, want %s", server.RemoteAddr(), proxyClient)
		}
		if _, ok := server.(syscall.Conn); !ok {
			t.Fatalf("%T offers no socket", server)
		}
		socket := server.(*tcpConn).TCPConn // what core's raw reads read
		_ = socket.SetReadDeadline(time.Now().Add(5 * time.Second))
		got := make([]byte, len(payload))
		if _, err := io.ReadFull(socket, got); err != nil || string(got) != string(payload) {
			t.Errorf("the socket after a %.5q header holds %q, %v; want %q", header, got, err, payload)
		}
	}
}

// proxyV2TCP4 is a v2 PROXY header for proxyClient with a TLV after the
// addresses.
func proxyV2TCP4(t *testing.T) []byte {
	t.Helper()
	body := []byte{198, 51, 100, 7, 192, 0, 2, 1, 0x9c, 0x40, 0x07, 0x5b, 0x04, 0x00, 0x01, 'x'} // addresses, ports, a NOOP TLV
	h := append(append([]byte{}, proxyV2Sig...), 0x21, 0x11, 0, byte(len(body)))
	return append(h, body...)
}

// TestReadProxyHeaderExact reads headers from a stream that goes on after
// them: readProxyHeader takes the header's bytes and no more.
func TestReadProxyHeaderExact(t *testing.T) {
	tests := []struct {
		name, header string
		remote       string // "" for a header that keeps the conn's addresses
	}{
		{"v1 TCP4", proxyV1, proxyClient},
		{"v1 TCP6", "PROXY TCP6 2001:db8::1 2001:db8::2 5 1883\r\n", "[2001:db8::1]:5"},
		{"v1 TCP4 short", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n", "1.2.3.4:1"},
		{"v1 TCP4 longest", "PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n", "255.255.255.255:65535"},
		{"v1 UNKNOWN", "PROXY UNKNOWN\r\n", ""},
		{"v1 UNKNOWN with fields", "PROXY UNKNOWN ffff::1 ffff::2 65535 65535\r\n", ""},
		{"v2 TCP4 with TLV", string(proxyV2TCP4(t)), proxyClient},
		{"v2 LOCAL", string(append(append([]byte{}, proxyV2Sig...), 0x20, 0x00, 0, 0)), ""},
	}
	// The stream after the header: bytes that look like the end of a
	// line, so reading past the header would be seen.
	const after = "\r\n\x10\x0c\x00\x04MQTT"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := strings.NewReader(tt.header + after)
			src, _, err := readProxyHeader(r)
			if err != nil {
				t.Fatalf("readProxyHeader: %v", err)
			}
			if rest := r.Len(); rest != len(after) {
				t.Errorf("%d bytes left after the header, want %d", rest, len(after))
			}
			got := ""
			if src != nil {
				got = src.String()
			}
			if got != tt.remote {
				t.Errorf("source %q, want %q", got, tt.remote)
			}
		})
	}
	for _, bad := range []string{
		"PROXY TCP4 nonsense\r\n",
		"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n",
		"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33\r\n",
		"PROXY UNKNOWN" + strings.Repeat("x", 120) + "\r\n",
		"GET / HTTP/1.1\r\n\r\n",
		"PROXY",
	} {
		if _, _, err := readProxyHeader(strings.NewReader(bad)); err == nil {
			t.Errorf("readProxyHeader(%q) succeeded, want an error", bad)
		}
	}
}
