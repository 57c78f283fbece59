//go:build linux

package core_test

import (
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// goroutinesSettle waits until the goroutine count stops falling and
// returns it.
func goroutinesSettle() int {
	n := runtime.NumGoroutine()
	for range 50 {
		time.Sleep(10 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m >= n {
			return m
		}
		n = m
	}
	return n
}

// goroutinesAbove returns how many goroutines run beyond base, once that
// is at most max or after 5 seconds. Goroutines that finish a CONNECT, or
// an earlier test's, may take a while to end on a loaded machine (-race,
// CI): it waits for the count to come down rather than take the first
// quiet moment; a connection that holds a goroutine keeps it above the
// bound however long it waits.
func goroutinesAbove(base, max int) int {
	got := goroutinesSettle() - base
	for deadline := time.Now().Add(5 * time.Second); got > max && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		got = runtime.NumGoroutine() - base
	}
	return got
}

// TestIdleTCPHoldsNoGoroutine: a connected TCP client that sends nothing
// keeps no goroutine in the broker, and wakes one when it does send.
func TestIdleTCPHoldsNoGoroutine(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	base := goroutinesSettle()
	const n = 50
	var cs []*tconn
	for i := range n {
		cs = append(cs, tcpClient(t, srv, codec.V311, "idle-"+string(rune('a'+i%26))+string(rune('a'+i/26))))
	}
	// Each test client runs one reader goroutine of its own.
	if got := goroutinesAbove(base, n+5); got > n+5 {
		t.Fatalf("%d idle TCP connections: %d more goroutines, want about %d (the test clients' own)", n, got, n)
	}
	cs[0].Subscribe(1, "t")
	cs[1].Pub("t", "wake", 1)
	wantPayloads(t, cs[0].Recv(1), "wake")
}

// TestParkedKeepAlive: a parked connection that stays silent is closed
// after 1.5 × its keepalive, and its will goes out; pings keep it.
func TestParkedKeepAlive(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	watch := tcpClient(t, srv, codec.V5, "watch")
	watch.Subscribe(0, "will/#")
	quiet := tcpClient(t, srv, codec.V5, "quiet", func(p *codec.Connect) {
		p.KeepAlive = 1
		p.WillFlag, p.WillTopic, p.WillPayload = true, []byte("will/quiet"), []byte("gone")
	})
	pinging := tcpClient(t, srv, codec.V5, "pinging", func(p *codec.Connect) { p.KeepAlive = 1 })
	pingWhileQuietExpires(t, pinging, quiet)
	wantPayloads(t, watch.Recv(1), "gone")
	pinging.Send(&codec.Pingreq{})
	expect[*codec.Pingresp](pinging)
}

// pingWhileQuietExpires pings on pinging for 2.5 s while quiet, whose
// keepalive is 1 s, sends nothing: quiet is closed for keepalive, not
// before 1.5 × its keepalive, and pinging is not.
func pingWhileQuietExpires(t *testing.T, pinging, quiet *tconn) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < 2500*time.Millisecond {
		pinging.Send(&codec.Pingreq{})
		expect[*codec.Pingresp](pinging)
		time.Sleep(400 * time.Millisecond)
	}
	quiet.ExpectDisconnect(codec.KeepAliveTimeout)
	if d := time.Since(start); d < time.Second {
		t.Errorf("closed after %v, before 1.5 × keepalive", d)
	}
}

// TestParkedTakeoverAndShutdown: closing a parked connection (a takeover,
// an operator, the server stopping) finishes it though no goroutine of its
// own runs.
func TestParkedTakeoverAndShutdown(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	old := tcpClient(t, srv, codec.V5, "dev", persistent)
	time.Sleep(20 * time.Millisecond) // parked
	tcpClient(t, srv, codec.V5, "dev", persistent)
	old.ExpectDisconnect(codec.SessionTakenOver)

	admin := tcpClient(t, srv, codec.V5, "kicked")
	time.Sleep(20 * time.Millisecond)
	if !srv.Disconnect("kicked") {
		t.Fatal("Disconnect found nothing")
	}
	admin.ExpectDisconnect(codec.AdministrativeAction)

	last := tcpClient(t, srv, codec.V5, "last")
	time.Sleep(20 * time.Millisecond)
	shutdown(t, srv)
	last.ExpectDisconnect(codec.ServerShuttingDown)
	waitFor(t, "every connection finished", func() bool { return srv.Stats().Connected == 0 })
}

// TestParkedPartialPacket: a packet that arrives in pieces, with the
// connection parked in between (and a large one, past the read buffer), is
// read whole.
func TestParkedPartialPacket(t *testing.T) {
	srv := newServer(t, core.Options{ReadBufferSize: 256}, core.Config{})
	sub := tcpClient(t, srv, codec.V311, "sub")
	sub.Subscribe(1, "t")
	pub := tcpClient(t, srv, codec.V311, "pub")
	for _, size := range []int{10, 5000} {
		raw := (&codec.Publish{Topic: []byte("t"), Payload: make([]byte, size), QoS: 1, PacketID: 9}).Append(nil, codec.V311)
		for i := 0; i < len(raw); i += 700 {
			if err := pub.Write(raw[i:min(i+700, len(raw))]); err != nil {
				t.Fatal(err)
			}
			time.Sleep(15 * time.Millisecond) // long enough to park
		}
		pub.ExpectAck(codec.PUBACK, 9)
		if got := sub.Recv(1)[0]; len(got.Payload) != size {
			t.Fatalf("got a %d-byte payload, want %d", len(got.Payload), size)
		}
	}
}

// TestParkedPeerGone: a parked connection whose peer goes away finishes
// at once (EPOLLRDHUP) and publishes its will.
func TestParkedPeerGone(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	watch := tcpClient(t, srv, codec.V311, "watch")
	watch.Subscribe(0, "will/#")
	c := tcpClient(t, srv, codec.V311, "gone", func(p *codec.Connect) {
		p.WillFlag, p.WillTopic, p.WillPayload = true, []byte("will/gone"), []byte("bye")
	})
	time.Sleep(20 * time.Millisecond)
	_ = c.NetConn.(*net.TCPConn).Close()
	wantPayloads(t, watch.Recv(1), "bye")
}

// TestParkedWakeupsNotLost: connections that park and wake thousands of
// times, with packets arriving just before, during and after each park
// (one alone, two at once, a QoS 1 message to themselves), get every
// answer. A wake-up the poller missed would leave one waiting forever.
func TestParkedWakeupsNotLost(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	cs := make([]*tconn, 32) // made here: tcpClient is not safe for concurrent use
	for i := range cs {
		cs[i] = tcpClient(t, srv, codec.V311, fmt.Sprintf("wake-%d", i))
		cs[i].Subscribe(1, fmt.Sprintf("wake/%d", i))
	}
	for i, c := range cs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			c.T = t
			topic := fmt.Sprintf("wake/%d", i)
			r := rand.New(rand.NewPCG(uint64(i), 7))
			for n := range 150 {
				if r.IntN(2) == 0 {
					time.Sleep(time.Duration(r.IntN(1500)) * time.Microsecond)
				}
				switch r.IntN(3) {
				case 0:
					c.Send(&codec.Pingreq{})
					expect[*codec.Pingresp](c)
				case 1:
					c.SendRaw(append((&codec.Pingreq{}).Append(nil, codec.V311), (&codec.Pingreq{}).Append(nil, codec.V311)...))
					expect[*codec.Pingresp](c)
					expect[*codec.Pingresp](c)
				default:
					id := uint16(n + 1)
					c.Send(&codec.Publish{Topic: []byte(topic), Payload: []byte("x"), QoS: 1, PacketID: id})
					var acked, got bool
					for !acked || !got { // PUBACK and the delivery, in either order
						switch p := c.Next().(type) {
						case *codec.Ack:
							acked = p.Kind == codec.PUBACK && p.PacketID == id
						case *codec.Publish:
							got = true
							c.Send(&codec.Ack{Kind: codec.PUBACK, PacketID: p.PacketID})
						}
					}
				}
			}
		})
	}
}
