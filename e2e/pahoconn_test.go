package e2e_test

import (
	"bytes"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
)

// stallConn records what is written to it; its first Write waits until
// release is closed, having told stalled, and a Write by another goroutine
// meanwhile is told on second.
type stallConn struct {
	net.Conn // nil: only Write is used
	mu       sync.Mutex
	wire     bytes.Buffer
	writes   int
	stalled  chan struct{}
	second   chan struct{}
	release  chan struct{}
}

func (c *stallConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.wire.Write(p)
	c.writes++
	n := c.writes
	c.mu.Unlock()
	switch n {
	case 1:
		close(c.stalled)
		<-c.release
	case 2:
		close(c.second)
	}
	return len(p), nil
}

// A PINGREQ paho.golang's pinger writes while a PUBLISH is half written
// goes after the PUBLISH on the conn the harness gives paho (pahoConn), not
// inside it. Inside it, over TLS, it made the broker read the wrong packet
// boundaries and wait for bytes that never came (TestAuthCertificateIdentity
// timing out at its second PUBLISH once in a few thousand runs).
func TestPahoConnKeepsPacketsWhole(t *testing.T) {
	fc := &stallConn{stalled: make(chan struct{}), second: make(chan struct{}), release: make(chan struct{})}
	conn := pahoConn(fc)
	pub := &packets.Publish{Topic: "alice/x", QoS: 1, PacketID: 2, Payload: []byte("alice/x")}
	ping := packets.NewControlPacket(packets.PINGREQ)
	errs := make(chan error, 2)
	go func() { _, err := pub.WriteTo(conn); errs <- err }()
	<-fc.stalled // the PUBLISH's fixed header is being written
	go func() { _, err := ping.WriteTo(conn); errs <- err }()
	// Unkept, the PINGREQ reaches the conn now; kept, it waits for the
	// PUBLISH, and this is only the time it is given to come.
	select {
	case <-fc.second:
	case <-time.After(50 * time.Millisecond):
	}
	close(fc.release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var want bytes.Buffer
	if _, err := pub.WriteTo(&want); err != nil {
		t.Fatal(err)
	}
	want.Write([]byte{0xc0, 0x00})
	if !bytes.Equal(fc.wire.Bytes(), want.Bytes()) {
		t.Fatalf("on the wire % x\nwant         % x (the PUBLISH, then the PINGREQ)", fc.wire.Bytes(), want.Bytes())
	}
}
