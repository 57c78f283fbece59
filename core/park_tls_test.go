//go:build linux

package core_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/xmq-io/xmq/certs/certstest"
	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/listeners"
)

// The parked TLS tests: a TLS (or wss) conn of the listeners package, idle
// after a read that left nothing in crypto/tls, parks on its socket as a
// TCP conn does (core.IdleSocket), and wakes to read through TLS again.

// tlsFront is a listener of the listeners package whose conns srv serves.
type tlsFront struct {
	t   *testing.T
	srv *core.Server
	ca  *certstest.CA
	l   listeners.Listener
}

func newTLSFront(t *testing.T, srv *core.Server, transport string) *tlsFront {
	t.Helper()
	ca := certstest.NewCA(t)
	l, err := listeners.Listen(listeners.Options{Transport: transport, Address: "127.0.0.1:0", TLS: ca.ServerConfig()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return &tlsFront{t: t, srv: srv, ca: ca, l: l}
}

// serve runs dial while the listener accepts, and has the broker serve the
// accepted conn, with the dialled one as the test client.
func (f *tlsFront) serve(v byte, dial func() net.Conn) *tconn {
	f.t.Helper()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := f.l.Accept(); err == nil {
			accepted <- c
		}
	}()
	cli := dial()
	select {
	case srvSide := <-accepted:
		return serveConn(f.t, f.srv, v, cli, srvSide, f.l.Transport())
	case <-time.After(waitTimeout):
		f.t.Fatal("nothing accepted")
		return nil
	}
}

// client connects a clean client over the front's transport; seg (tls
// only) lets the test choose how TLS records reach the socket.
func (f *tlsFront) client(v byte, id string, mods ...func(*codec.Connect)) (c *tconn, seg *segConn) {
	f.t.Helper()
	addr := f.l.Addr().String()
	c = f.serve(v, func() net.Conn {
		if f.l.Transport() == listeners.TransportWSS {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			conn, err := listeners.Dial(ctx, "wss://"+addr+"/mqtt", f.ca.ClientConfig())
			if err != nil {
				f.t.Fatal(err)
			}
			return conn
		}
		raw, err := net.Dial("tcp", addr)
		if err != nil {
			f.t.Fatal(err)
		}
		seg = &segConn{Conn: raw}
		conf := f.ca.ClientConfig()
		conf.ServerName = "localhost"
		tc := tls.Client(seg, conf)
		if err := tc.Handshake(); err != nil {
			f.t.Fatal(err)
		}
		return tc
	})
	p := connectPacket(v, id)
	for _, m := range mods {
		m(p)
	}
	c.Connect(p)
	return c, seg
}

// segConn is a TLS client's TCP socket that can hold what TLS writes (a
// record per Write of a small packet) and send it at once or in pieces.
type segConn struct {
	net.Conn
	mu   sync.Mutex
	hold bool
	buf  []byte
}

func (s *segConn) Write(p []byte) (int, error) {
	s.mu.Lock()
	if s.hold {
		s.buf = append(s.buf, p...)
		s.mu.Unlock()
		return len(p), nil
	}
	s.mu.Unlock()
	return s.Conn.Write(p)
}

// records returns the bytes of the records that write made TLS write,
// without sending them.
func (s *segConn) records(write func()) []byte {
	s.mu.Lock()
	s.hold, s.buf = true, nil
	s.mu.Unlock()
	write()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = false
	return s.buf
}

// sendPieces writes b to the socket in pieces of size, pausing after each
// long enough for the broker to park.
func (s *segConn) sendPieces(t *testing.T, b []byte, size int) {
	t.Helper()
	for i := 0; i < len(b); i += size {
		if _, err := s.Conn.Write(b[i:min(i+size, len(b))]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(15 * time.Millisecond)
	}
}

// TestIdleTLSHoldsNoGoroutine: connected TLS and wss clients that send
// nothing keep no goroutine in the broker (nor in crypto/tls, gorilla or
// the listener), and wake one when they do send.
func TestIdleTLSHoldsNoGoroutine(t *testing.T) {
	for _, transport := range []string{listeners.TransportTLS, listeners.TransportWSS} {
		t.Run(transport, func(t *testing.T) {
			srv := newServer(t, core.Options{}, core.Config{})
			f := newTLSFront(t, srv, transport)
			base := goroutinesSettle()
			const n = 50
			var cs []*tconn
			for i := range n {
				c, _ := f.client(codec.V311, fmt.Sprintf("idle-%d", i))
				cs = append(cs, c)
			}
			// Each test client runs one reader goroutine of its own.
			if got := goroutinesAbove(base, n+5); got > n+5 {
				t.Fatalf("%d idle %s connections: %d more goroutines, want about %d (the test clients' own)", n, transport, got, n)
			}
			cs[0].Subscribe(1, "t")
			cs[1].Pub("t", "wake", 1)
			wantPayloads(t, cs[0].Recv(1), "wake")
		})
	}
}

// TestParkedTLSRecordsInOneSegment: packets in records of their own that
// reach the broker in one TCP segment are all read, round after round, with
// the connection parked between rounds.
func TestParkedTLSRecordsInOneSegment(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	f := newTLSFront(t, srv, listeners.TransportTLS)
	sub, _ := f.client(codec.V311, "sub")
	sub.Subscribe(1, "t")
	pub, seg := f.client(codec.V311, "pub")
	const perRound = 20
	for round := range 5 {
		var want []string
		b := seg.records(func() {
			for i := range perRound {
				want = append(want, fmt.Sprintf("r%d-%d", round, i))
				pub.Send(&codec.Publish{Topic: []byte("t"), Payload: []byte(want[i]), QoS: 1, PacketID: uint16(i + 1)})
			}
		})
		seg.sendPieces(t, b, len(b))
		for i := range perRound {
			pub.ExpectAck(codec.PUBACK, uint16(i+1))
		}
		wantPayloads(t, sub.Recv(perRound), want...)
		time.Sleep(20 * time.Millisecond) // parked again
	}
}

// TestParkedTLSSplitPacket: a packet split over several records, and the
// records over several TCP segments with pauses (the broker parks between
// them, or waits in crypto/tls inside a record), is read whole; so is a
// packet larger than a record.
func TestParkedTLSSplitPacket(t *testing.T) {
	srv := newServer(t, core.Options{ReadBufferSize: 256}, core.Config{})
	f := newTLSFront(t, srv, listeners.TransportTLS)
	sub, _ := f.client(codec.V311, "sub")
	sub.Subscribe(1, "t")
	pub, seg := f.client(codec.V311, "pub")
	for _, size := range []int{10, 1000, 40000} {
		raw := (&codec.Publish{Topic: []byte("t"), Payload: make([]byte, size), QoS: 1, PacketID: 9}).Append(nil, codec.V311)
		b := seg.records(func() {
			head := min(len(raw), 70) // in records of 7 bytes, then the rest in records as large as TLS makes them
			for i := 0; i < head; i += 7 {
				pub.SendRaw(raw[i:min(i+7, head)])
			}
			if head < len(raw) {
				pub.SendRaw(raw[head:])
			}
		})
		seg.sendPieces(t, b, max(300, len(b)/20))
		pub.ExpectAck(codec.PUBACK, 9)
		if got := sub.Recv(1)[0]; len(got.Payload) != size {
			t.Fatalf("got a %d-byte payload, want %d", len(got.Payload), size)
		}
	}
}

// TestParkedTLSHalfRecord: a peer that sends half a record and stops is
// closed at its keepalive, not held for ever; nothing else hangs.
func TestParkedTLSHalfRecord(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	f := newTLSFront(t, srv, listeners.TransportTLS)
	c, seg := f.client(codec.V5, "half", func(p *codec.Connect) { p.KeepAlive = 1 })
	b := seg.records(func() { c.Send(&codec.Pingreq{}) })
	start := time.Now()
	seg.sendPieces(t, b[:len(b)/2], len(b))
	c.ExpectDisconnect(codec.KeepAliveTimeout)
	if d := time.Since(start); d < time.Second {
		t.Errorf("closed after %v, before 1.5 × keepalive", d)
	}
	other, _ := f.client(codec.V5, "other")
	other.Send(&codec.Pingreq{})
	expect[*codec.Pingresp](other)
}

// TestParkedTLSCloseNotify: a parked TLS client that ends with close_notify
// is gone at once, and its will goes out.
func TestParkedTLSCloseNotify(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	f := newTLSFront(t, srv, listeners.TransportTLS)
	watch, _ := f.client(codec.V311, "watch")
	watch.Subscribe(0, "will/#")
	c, _ := f.client(codec.V311, "leaving", func(p *codec.Connect) {
		p.WillFlag, p.WillTopic, p.WillPayload = true, []byte("will/leaving"), []byte("bye")
	})
	time.Sleep(20 * time.Millisecond) // parked
	if err := c.NetConn.(*tls.Conn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	wantPayloads(t, watch.Recv(1), "bye")
	c.ExpectClosed()
}

// TestParkedTLSKeepAlive: a parked TLS connection that stays silent is
// closed after 1.5 × its keepalive; pings keep another.
func TestParkedTLSKeepAlive(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	f := newTLSFront(t, srv, listeners.TransportTLS)
	quiet, _ := f.client(codec.V5, "quiet", func(p *codec.Connect) { p.KeepAlive = 1 })
	pinging, _ := f.client(codec.V5, "pinging", func(p *codec.Connect) { p.KeepAlive = 1 })
	pingWhileQuietExpires(t, pinging, quiet)
}
