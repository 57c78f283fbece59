package listeners

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/nettest"

	"github.com/xmq-io/xmq/certs/certstest"
)

// transportCase is one transport under test: how to listen and how to dial.
type transportCase struct {
	name   string
	opts   func(ca *certstest.CA) Options
	scheme string
}

// transports lists every transport with a loopback listener on a free port.
var transports = []transportCase{
	{name: "tcp", scheme: "mqtt", opts: func(*certstest.CA) Options { return Options{Transport: TransportTCP} }},
	{name: "tls", scheme: "mqtts", opts: func(ca *certstest.CA) Options {
		return Options{Transport: TransportTLS, TLS: ca.ServerConfig()}
	}},
	{name: "ws", scheme: "ws", opts: func(*certstest.CA) Options { return Options{Transport: TransportWS} }},
	{name: "wss", scheme: "wss", opts: func(ca *certstest.CA) Options {
		return Options{Transport: TransportWSS, TLS: ca.ServerConfig()}
	}},
	{name: "quic", scheme: "quic", opts: func(ca *certstest.CA) Options {
		return Options{Transport: TransportQUIC, TLS: ca.ServerConfig()}
	}},
}

// listen starts a listener on a free loopback port, closed at cleanup.
func listen(t *testing.T, o Options) Listener {
	t.Helper()
	if o.Address == "" {
		o.Address = "127.0.0.1:0"
	}
	l, err := Listen(o)
	if err != nil {
		t.Fatalf("Listen(%+v): %v", o, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// url is the dial URL of l.
func dialURL(scheme string, l Listener) string {
	return scheme + "://" + l.Addr().String() + "/mqtt"
}

// connect dials l and returns the client conn and the conn l accepted. QUIC
// shows a stream to the server only once the client writes, so the client
// sends one byte that the server side reads before the pair is returned.
func connect(t testing.TB, l Listener, url string, tlsConf *tls.Config) (client, server net.Conn, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	accepted := make(chan net.Conn, 1)
	acceptErr := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			acceptErr <- err
			return
		}
		accepted <- c
	}()
	client, err = Dial(ctx, url, tlsConf)
	if err != nil {
		return nil, nil, err
	}
	if l.Transport() == TransportQUIC {
		if _, err := client.Write([]byte{0}); err != nil {
			_ = client.Close()
			return nil, nil, err
		}
	}
	select {
	case server = <-accepted:
	case err = <-acceptErr:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		_ = client.Close()
		return nil, nil, err
	}
	if l.Transport() == TransportQUIC {
		_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(server, make([]byte, 1)); err != nil {
			_ = client.Close()
			_ = server.Close()
			return nil, nil, err
		}
		_ = server.SetReadDeadline(time.Time{})
	}
	return client, server, nil
}

// mustConnect is connect for tests that need the pair.
func mustConnect(t *testing.T, l Listener, url string, tlsConf *tls.Config) (client, server net.Conn) {
	t.Helper()
	client, server, err := connect(t, l, url, tlsConf)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	return client, server
}

// conformanceSkips are the nettest.TestConn sub-tests that cannot hold for a
// transport by design, with the reason. Each is the behaviour of the
// library underneath, and MQTT does not need it: core closes a connection
// on its first read or write error, deadlines included.
var conformanceSkips = map[string]map[string]string{
	"tcp": {},
	"tls": {
		"PastTimeout":       tlsDeadline,
		"FutureTimeout":     tlsDeadline,
		"ConcurrentMethods": tlsDeadline,
	},
	"ws": {
		"PastTimeout":       wsDeadline,
		"FutureTimeout":     wsDeadline,
		"ConcurrentMethods": wsDeadline,
	},
	"quic": {},
}

// Why the deadline sub-tests, which go on using a conn after a deadline
// passed, cannot hold.
const (
	tlsDeadline = "crypto/tls: a Write that times out leaves the TLS state corrupt, every later Write fails"
	wsDeadline  = "gorilla/websocket: once a read or write deadline passes, that direction fails for good"
)

func init() {
	conformanceSkips["wss"] = conformanceSkips["ws"]
}

// TestConnConformance runs x/net's net.Conn conformance suite over each
// transport, a pair being a Dial'd conn and the conn the Listener accepted.
// The sub-tests in conformanceSkips are skipped by name (TestMain adds
// them to -test.skip); each is logged with its reason.
func TestConnConformance(t *testing.T) {
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			for name, why := range conformanceSkips[tc.name] {
				t.Logf("skipping %s: %s", name, why)
			}
			ca := certstest.NewCA(t)
			l := listen(t, tc.opts(ca))
			url := dialURL(tc.scheme, l)
			nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
				c1, c2, err = connect(t, l, url, ca.ClientConfig())
				if err != nil {
					return nil, nil, nil, err
				}
				return c1, c2, func() { _ = c1.Close(); _ = c2.Close() }, nil
			})
		})
	}
}

// conformanceSkipPattern is conformanceSkips as a -test.skip pattern:
// alternatives of TestConnConformance/^transport$/^(names)$.
func conformanceSkipPattern() string {
	var alts []string
	for transport, names := range conformanceSkips {
		if len(names) == 0 {
			continue
		}
		var list []string
		for name := range names {
			list = append(list, name)
		}
		sort.Strings(list)
		alts = append(alts, "^TestConnConformance$/^"+transport+"$/^("+strings.Join(list, "|")+")$")
	}
	sort.Strings(alts)
	return strings.Join(alts, "|")
}

func TestListenEveryTransport(t *testing.T) {
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			ca := certstest.NewCA(t)
			l := listen(t, tc.opts(ca))
			if got := l.Transport(); got != tc.name {
				t.Errorf("Transport() = %q, want %q", got, tc.name)
			}
			if strings.HasSuffix(l.Addr().String(), ":0") {
				t.Errorf("Addr() = %v: port 0 not resolved", l.Addr())
			}
			client, server := mustConnect(t, l, dialURL(tc.scheme, l), ca.ClientConfig())
			roundTrip(t, client, server, []byte("\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c\x00\x00"))
			roundTrip(t, server, client, []byte("\x20\x02\x00\x00"))

			// Close is idempotent and unblocks Accept with net.ErrClosed.
			closeUnblocksAccept(t, l)
			// A conn already accepted outlives its listener.
			roundTrip(t, client, server, []byte{0xc0, 0x00})
		})
	}
}

// roundTrip writes p on from and reads it back on to.
func roundTrip(t *testing.T, from, to net.Conn, p []byte) {
	t.Helper()
	_ = to.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer func() { _ = to.SetReadDeadline(time.Time{}) }()
	if _, err := from.Write(p); err != nil {
		t.Fatalf("Write: %v", err)
	}
	got := make([]byte, len(p))
	if _, err := io.ReadFull(to, got); err != nil {
		t.Fatalf("ReadFull: %v", err)
	}
	if string(got) != string(p) {
		t.Fatalf("read %x, want %x", got, p)
	}
}
