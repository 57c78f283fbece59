package core_test

import (
	"fmt"
	"net"
	"sync/atomic"
	"testing"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// nowConn is a conn that writes in place (core.NowWriter), as a WebSocket
// conn over TCP does; its WriteNow takes only the first half of what it is
// given, as a socket with little room would, so the writer must send the
// rest first.
type nowConn struct {
	net.Conn
	calls atomic.Int64
}

func (c *nowConn) WritesNow() bool { return true }

func (c *nowConn) WriteNow(p []byte) (int, error) {
	c.calls.Add(1)
	return c.Write(p[:len(p)/2])
}

// TestInPlaceWriterGetsDeliveries: deliveries to a subscriber whose conn
// is a NowWriter are written in place by the publisher's reader after a
// small burst, and what the socket did not take goes out first, complete
// and in order.
func TestInPlaceWriterGetsDeliveries(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	var nc *nowConn
	s := dialWrapped(t, srv, codec.V311, func(c net.Conn) net.Conn { nc = &nowConn{Conn: c}; return nc })
	s.Connect(connectPacket(codec.V311, "sub"))
	s.Subscribe(0, "t/#")
	p := client(t, srv, codec.V311, "pub")
	const n = 50
	for i := range n {
		p.Send(&codec.Publish{Topic: []byte(fmt.Sprint("t/", i)), Payload: []byte(fmt.Sprint("m", i))})
		got := s.ExpectPublish()
		if string(got.Topic) != fmt.Sprint("t/", i) || string(got.Payload) != fmt.Sprint("m", i) {
			t.Fatalf("delivery %d: %s %q", i, got.Topic, got.Payload)
		}
	}
	if nc.calls.Load() == 0 {
		t.Errorf("no delivery of %d was written in place", n)
	}
}
