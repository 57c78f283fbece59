package core_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// countedConn counts what a test client writes and reads.
type countedConn struct {
	net.Conn
	written, read atomic.Int64
}

func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// TestClientCounters: a connection's view counts its PUBLISH packets and
// its bytes each way — exactly the bytes its client wrote and read — and
// shows its will.
func TestClientCounters(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	cli, srvSide := net.Pipe()
	cc := &countedConn{Conn: cli}
	c := serveConn(t, srv, codec.V5, cc, srvSide, "pipe")
	send, next := c.Send, c.Next
	con := &codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, ClientID: []byte("counted"), KeepAlive: 30,
		WillFlag: true, WillTopic: []byte("wills/counted"), WillQoS: 1, WillPayload: []byte("gone")}
	con.WillProps.SetNum(codec.PropWillDelay, 5)
	send(con)
	if _, ok := next().(*codec.Connack); !ok {
		t.Fatal("no CONNACK")
	}
	send(&codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: []byte("c/#"), QoS: 1}}})
	next() // SUBACK
	for i := range 3 {
		send(&codec.Publish{Topic: []byte("c/x"), QoS: 1, PacketID: uint16(10 + i), Payload: []byte("payload")})
	}
	// Three PUBACKs and three deliveries back, in some order.
	got := 0
	for range 6 {
		if p, ok := next().(*codec.Publish); ok {
			got++
			send(&codec.Ack{Kind: codec.PUBACK, PacketID: p.PacketID})
		}
	}
	if got != 3 {
		t.Fatalf("%d deliveries, want 3", got)
	}
	send(&codec.Pingreq{}) // handled after the PUBACKs
	next()
	// The writer counts a write once it returns, which is after the
	// client has read it.
	var ci core.ClientInfo
	waitFor(t, "the byte counts", func() bool {
		ci, _ = srv.Client("counted")
		return ci.BytesOut == cc.read.Load()
	})
	if ci.MessagesIn != 3 || ci.MessagesOut != 3 {
		t.Errorf("messages in %d, out %d: want 3 and 3", ci.MessagesIn, ci.MessagesOut)
	}
	if ci.BytesIn != cc.written.Load() || ci.BytesOut != cc.read.Load() {
		t.Errorf("bytes in %d, out %d: want what the client wrote (%d) and read (%d)", ci.BytesIn, ci.BytesOut, cc.written.Load(), cc.read.Load())
	}
	if w := ci.Will; w == nil || w.Topic != "wills/counted" || w.QoS != 1 || w.Size != 4 || w.Delay != 5 {
		t.Errorf("will %+v, want wills/counted, QoS 1, 4 bytes, delay 5", w)
	}
	if ci.TLS != nil {
		t.Errorf("TLS %+v on a pipe", ci.TLS)
	}
	// The list shows the counters too.
	if p := srv.ClientsPage(core.ClientQuery{Limit: 1}).Clients; len(p) != 1 || p[0].MessagesIn != 3 || p[0].BytesOut != ci.BytesOut {
		t.Errorf("ClientsPage: %+v", p)
	}
}

// TestOfflineSessionsCount: Stats counts the persistent sessions whose
// client is away, through takeovers, clean starts, removal and expiry.
func TestOfflineSessionsCount(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	offline := func(what string, n int) {
		t.Helper()
		waitFor(t, what, func() bool { st := srv.Stats(); return st.OfflineSessions == n })
	}
	p := client(t, srv, codec.V311, "p", persistent)
	client(t, srv, codec.V311, "c")
	offline("none offline", 0)
	p.Close()
	offline("p offline", 1)
	p2 := client(t, srv, codec.V311, "p", persistent) // resumed
	offline("p back", 0)
	p3 := client(t, srv, codec.V311, "p") // takes over with a clean session
	p2.ExpectClosed()
	offline("clean takeover", 0)
	p3.Close()
	offline("clean session ended", 0)
	e := client(t, srv, codec.V5, "e", func(p *codec.Connect) {
		persistent(p)
		p.Props.SetNum(codec.PropSessionExpiry, 1)
	})
	k := client(t, srv, codec.V311, "k", persistent, func(p *codec.Connect) { p.UsernameFlag, p.Username = true, []byte("kim") })
	e.Close()
	k.Close()
	offline("e and k offline", 2)
	if ci, _ := srv.Client("k"); ci.Connected || ci.Username != "kim" {
		t.Errorf("offline k: connected %v, user %q: want offline, owned by kim", ci.Connected, ci.Username)
	}
	if !srv.RemoveSession("k") {
		t.Fatal("RemoveSession(k) = false")
	}
	offline("k removed", 1)
	offline("e expired", 0)
	if st := srv.Stats(); st.SessionsExpired != 1 || st.Sessions != 1 {
		t.Errorf("expired %d, sessions %d: want 1 and 1 (c)", st.SessionsExpired, st.Sessions)
	}
}

// TestRetainedStoredTime: a retained message keeps when it was stored,
// across a restart with the same store; $SYS is not user data.
func TestRetainedStoredTime(t *testing.T) {
	st := core.NewMemStore()
	srv := newServer(t, core.Options{SysInterval: time.Hour}, core.Config{Store: st})
	before := time.Now().Truncate(time.Millisecond)
	if err := srv.Publish("r/1", []byte("kept"), 1, true); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	_, at, ok := srv.RetainedMessage("r/1")
	if !ok || at.Before(before) || at.After(after) {
		t.Fatalf("stored at %v (found %v), want between %v and %v", at, ok, before, after)
	}
	page := srv.RetainedPage(core.RetainedQuery{Prefix: "r/", Limit: 10})
	if len(page.Stored) != 1 || !page.Stored[0].Equal(at) {
		t.Fatalf("page stored times %v, want [%v]", page.Stored, at)
	}
	waitFor(t, "the $SYS topics", func() bool { return srv.Stats().SysRetained > 0 })
	if s := srv.Stats(); s.Retained != 1 {
		t.Errorf("Retained = %d, want 1: $SYS topics (%d) are not user data", s.Retained, s.SysRetained)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv2 := newServer(t, core.Options{}, core.Config{Store: st})
	if _, at2, ok := srv2.RetainedMessage("r/1"); !ok || !at2.Equal(at) {
		t.Fatalf("after a restart: stored at %v (found %v), want %v", at2, ok, at)
	}
}
