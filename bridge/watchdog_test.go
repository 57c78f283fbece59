package bridge

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// TestInflightClocks: a message out that waits behind the bridge's own
// backlog (a link that takes nothing: net.Pipe, whose writes wait for a
// read) is not held against the remote, however long it waits; once
// written, the remote has the timeout to answer, and no more. A step the
// local broker must answer runs on the wall clock from the start.
func TestInflightClocks(t *testing.T) {
	newLink := func(t *testing.T) (*link, net.Conn) {
		ours, theirs := net.Pipe()
		l := &link{b: &Bridge{c: &counters{}}, cfg: &Config{InflightTimeout: time.Second}, log: zap.NewNop(),
			in: newFlows(), out: newFlows(), wd: watchClock{tick: time.Second / inflightTicks}}
		l.remote.s = newSender(ours, codec.V5, nil)
		t.Cleanup(func() { _ = ours.Close(); _ = theirs.Close(); l.remote.s.wait() })
		return l, theirs
	}
	// ticksToTimeout ticks the watchdog until it gives up (at most max).
	ticksToTimeout := func(l *link, max int) (int, error) {
		for n := 1; n <= max; n++ {
			if err := l.checkInflight(); err != nil {
				return n, err
			}
		}
		return 0, nil
	}

	t.Run("remote", func(t *testing.T) {
		l, theirs := newLink(t)
		l.step(&l.out, 7, 0, 0, outAwaitAck)
		if err := l.remote.s.publish(&codec.Publish{Topic: []byte("t"), QoS: 1, PacketID: 7}); err != nil {
			t.Fatal(err)
		}
		if n, err := ticksToTimeout(l, 5*overdueTicks); err != nil {
			t.Fatalf("gave up after %d ticks while the packet waited to be written: %v", n, err)
		}
		go func() { _, _ = io.Copy(io.Discard, theirs) }()
		mqtttest.WaitFor(t, "the packet to be written", func() bool { return l.remote.s.written.Load() >= l.remote.s.queued.Load() })
		n, err := ticksToTimeout(l, 5*overdueTicks)
		if n < inflightTicks || n > overdueTicks || err == nil || !strings.Contains(err.Error(), "PUBACK or PUBREC from the remote") {
			t.Errorf("gave up %d ticks after the write (%v); want between %d and %d", n, err, inflightTicks, overdueTicks)
		}
		if l.b.c.inflightTimeouts.Load() != 1 {
			t.Errorf("%d timeouts counted", l.b.c.inflightTimeouts.Load())
		}
	})
	t.Run("local", func(t *testing.T) {
		l, _ := newLink(t)
		l.step(&l.in, 7, inHeld, 0, inAwaitAck)
		if n, err := ticksToTimeout(l, 5*overdueTicks); n != overdueTicks || !strings.Contains(err.Error(), "from the local broker") {
			t.Errorf("gave up after %d ticks (%v), want %d", n, err, overdueTicks)
		}
	})
	t.Run("done", func(t *testing.T) {
		l, _ := newLink(t)
		l.step(&l.in, 7, inHeld, 0, inAwaitAck)
		l.step(&l.in, 7, 0, 0, inAwaitRel)
		l.step(&l.in, 7, 0, inHeld, awaitNone)
		if n, err := ticksToTimeout(l, 5*overdueTicks); err != nil || l.in.open.Load() != 0 {
			t.Errorf("an exchange over: gave up after %d ticks (%v), %d open", n, err, l.in.open.Load())
		}
	})
}
