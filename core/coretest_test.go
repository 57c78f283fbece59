package core_test

// This file is the test client: the kit's mqtttest.Conn on a net.Pipe
// connection (or loopback TCP) served by Server.ServeConn, written to with
// the codec's encoders and read by one goroutine that frames the server's
// bytes into raw packets. Tests decode what they take, so a packet is
// checked at the exact protocol level the connection speaks.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// waitTimeout bounds every wait for the broker.
const waitTimeout = 3 * time.Second

// quiet is how long a test waits to be sure something does not happen.
const quiet = 150 * time.Millisecond

// The kit's helpers under the names core's tests use.
var (
	errTimeout    = mqtttest.ErrTimeout
	connectPacket = mqtttest.ConnectPacket
	sub           = mqtttest.Sub
	payloads      = mqtttest.Payloads
	wantPayloads  = mqtttest.WantPayloads
)

// newServer starts a Server for one test and shuts it down when the test
// ends. $SYS publishing is off unless opts asks for it.
func newServer(t *testing.T, opts core.Options, cfg core.Config) *core.Server {
	t.Helper()
	if opts.SysInterval == 0 {
		opts.SysInterval = -1
	}
	srv, err := core.New(opts, cfg)
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	t.Cleanup(func() { shutdown(t, srv) })
	return srv
}

// shutdown stops srv; a second Shutdown (the test already did it) is fine.
func shutdown(t *testing.T, srv *core.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, core.ErrServerClosed) {
		t.Errorf("Shutdown: %v", err)
	}
}

// tconn is one test client connection: the kit's Conn, which the tests
// use directly (Send, Next, ExpectAck, Subscribe, Publish, Recv …), at
// core's timeout.
type tconn struct {
	*mqtttest.Conn
}

// dial connects a new client at protocol level v to srv over net.Pipe. It
// sends nothing; see Connect.
func dial(t *testing.T, srv *core.Server, v byte) *tconn {
	t.Helper()
	return dialWrapped(t, srv, v, nil)
}

// dialWrapped is dial with the broker's side of the conn wrapped by wrap
// (nil: not wrapped), to give the broker a conn with other capabilities.
func dialWrapped(t *testing.T, srv *core.Server, v byte, wrap func(net.Conn) net.Conn) *tconn {
	t.Helper()
	cli, srvSide := pipe(t)
	if wrap != nil {
		srvSide = wrap(srvSide)
	}
	return serveConn(t, srv, v, cli, srvSide, "pipe")
}

// serveConn has srv serve srvSide and returns the test client on cli, the
// other end of srvSide.
func serveConn(t *testing.T, srv *core.Server, v byte, cli, srvSide net.Conn, listener string) *tconn {
	t.Helper()
	srv.ServeConn(srvSide, listener)
	c := &tconn{mqtttest.NewConn(t, cli, v)}
	c.Timeout = waitTimeout
	return c
}

// envTCP (XMQ_CORE_TCP set) makes dial connect over loopback TCP instead of
// net.Pipe, so the broker runs its socket paths: waiting for readability
// without a buffer and writing inline from a publisher's reader
// (make test runs core's tests both ways). It is read by the first test
// that dials, where go test's cache records the variable: read when the
// package initialised, it was not, and `XMQ_CORE_TCP=1 go test` replayed a
// cached net.Pipe run.
var envTCP = sync.OnceValue(func() bool { return os.Getenv("XMQ_CORE_TCP") != "" })

// forceTCP makes dial use TCP whatever XMQ_CORE_TCP says (tcpClient).
var forceTCP bool

// tcpClient connects a client over loopback TCP, whatever XMQ_CORE_TCP
// says: for what needs a real socket (parking, a socket's flow control).
func tcpClient(t *testing.T, srv *core.Server, v byte, id string, mods ...func(*codec.Connect)) *tconn {
	t.Helper()
	was := forceTCP
	forceTCP = true
	defer func() { forceTCP = was }()
	return client(t, srv, v, id, mods...)
}

func pipe(t *testing.T) (cli, srv net.Conn) {
	if !forceTCP && !envTCP() {
		return net.Pipe()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cli, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if srv, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	// Small kernel buffers, so a paused client pushes back on the broker
	// after tens of kilobytes (net.Pipe: at once), not after megabytes.
	_ = cli.(*net.TCPConn).SetReadBuffer(32 << 10)
	_ = srv.(*net.TCPConn).SetWriteBuffer(32 << 10)
	return cli, srv
}

// expect returns the next packet, which must be a T.
func expect[T codec.Packet](c *tconn) T {
	c.T.Helper()
	return mqtttest.Expect[T](c.Conn)
}

// client dials and connects a clean client; mods adjust the CONNECT.
func client(t *testing.T, srv *core.Server, v byte, id string, mods ...func(*codec.Connect)) *tconn {
	t.Helper()
	c := dial(t, srv, v)
	c.Connect(mqtttest.ConnectPacket(v, id, mods...))
	return c
}

// persistent makes a CONNECT resume or keep its session: Clean Session 0
// in 3.1.1, Clean Start 0 and a Session Expiry of a minute in 5.0.
func persistent(p *codec.Connect) {
	p.CleanStart = false
	if p.ProtocolVersion == codec.V5 {
		p.Props.SetNum(codec.PropSessionExpiry, 60)
	}
}

// waitFor polls cond until it holds or waitTimeout passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	mqtttest.WaitWithin(t, waitTimeout, what, cond)
}

// seq makes n payloads "prefix0" … "prefix{n-1}".
func seq(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}
