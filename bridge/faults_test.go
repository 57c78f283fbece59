package bridge_test

// Faults of the remote that once wedged a bridge for good (issue 23): a
// remote that holds messages in flight, a connection that breaks while
// the bridge is not reading it, a remote that goes away meanwhile.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/xmq-io/xmq/bridge"
	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// wedgeSlots is the local broker's Receive Maximum in the inbound
// tests: the bridge takes that many QoS 2 messages from the remote at a
// time, and a remote that releases none of them leaves the bridge
// waiting for a slot, not reading the remote.
const wedgeSlots = 4

// wedgeMessages are the QoS 2 messages the remote sends in those tests:
// more than the slots.
const wedgeMessages = wedgeSlots + 2

// noPubrelFirst holds back the remote's PUBRELs on the bridge's first
// connection: the remote broker sends them, they never arrive.
func noPubrelFirst(conn int, p codec.Packet) bool {
	a, ok := p.(*codec.Ack)
	return conn == 1 && ok && a.Kind == codec.PUBREL
}

// inboundWedge sets up the report of issue 23: a bridge that forwards
// QoS 2 messages in from a remote whose PUBRELs never arrive on the first
// connection, and a remote that sends more of them than the local broker
// takes at a time. It returns once the PUBRELs of a full window were
// held back, so the bridge holds every slot and its reader waits; lsub,
// at the local broker, has what got through.
func inboundWedge(t *testing.T, log *zap.Logger, mod func(*bridge.Config)) (*bridge.Manager, *faultProxy, *mqtttest.Client) {
	t.Helper()
	remote := tcpBroker(t, core.Options{}, core.Config{})
	p := newFaultProxy(t, remote, noPubrelFirst)
	local := tcpBroker(t, core.Options{ReceiveMaximum: wedgeSlots}, core.Config{})
	cfg := fast(bridge.Config{Name: "up", Addresses: []string{p.url},
		Topics: []bridge.Rule{{Topic: "in/#", Direction: bridge.In, QoS: 2}}})
	mod(&cfg)
	m := local.bridges(t, log, cfg)
	waitState(t, m, "up", bridge.StateConnected)
	lsub := dialClient(t, local, "lsub", codec.V5)
	lsub.Subscribe("in/#", 2)
	rpub := dialClient(t, remote, "rpub", codec.V5)
	for i := range wedgeMessages {
		rpub.Pub("in/x", fmt.Sprint("m", i), 2, false)
	}
	mqtttest.WaitFor(t, "the PUBRELs of every slot to be held back", func() bool { return p.dropped.Load() == wedgeSlots })
	return m, p, lsub
}

// TestInflightTimeout: a remote that holds a message in flight past the
// bridge's inflight_timeout — it never releases QoS 2 messages in, or
// never acknowledges messages out — has its link closed, with one log
// line that says which message and what was awaited; the link is made
// again with backoff, what was unfinished is sent again as MQTT requires
// (PUBLISH with DUP, PUBREL after PUBREC), and messages flow again, none
// lost. Before the timeout, such a remote wedged the bridge for good once
// it held the whole window.
func TestInflightTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	t.Run("in: no PUBREL", func(t *testing.T) {
		obs, logs := observer.New(zap.WarnLevel)
		m, p, lsub := inboundWedge(t, zap.New(obs), func(c *bridge.Config) { c.InflightTimeout = timeout })
		if got := payloads(lsub.Expect(wedgeMessages)); !slices.Equal(got, seq("m", wedgeMessages)) {
			t.Errorf("the local subscriber got %q", got)
		}
		lsub.Nothing()
		st, _ := m.Bridge("up")
		if st.InflightTimeouts != 1 || st.Links != 2 {
			t.Errorf("%d in-flight timeouts, %d links; want 1 and 2", st.InflightTimeouts, st.Links)
		}
		lines := logs.FilterMessageSnippet("not acknowledged within inflight_timeout").All()
		if len(lines) != 1 {
			t.Fatalf("%d timeout log lines, want 1: %v", len(lines), logs.All())
		}
		f := lines[0].ContextMap()
		if f["awaited"] != "PUBREL from the remote" || f["direction"] != "in" || f["address"] != p.url ||
			f["packet_id"] == uint16(0) || f["bridge"] != "up" {
			t.Errorf("the timeout log line says %v", f)
		}
		// The remote sent the PUBRELs again on the new connection, and
		// the bridge completed them there.
		if n := countKind(p.sentOn(2), codec.PUBCOMP); n != wedgeMessages {
			t.Errorf("%d PUBCOMPs to the remote on the second connection, want %d", n, wedgeMessages)
		}
	})
	t.Run("out: no PUBACK, no PUBCOMP", func(t *testing.T) {
		remote := tcpBroker(t, core.Options{}, core.Config{})
		// The remote's PUBREC gets through: the QoS 2 message goes on to
		// PUBREL, whose PUBCOMP does not.
		p := newFaultProxy(t, remote, func(conn int, pk codec.Packet) bool {
			a, ok := pk.(*codec.Ack)
			return conn == 1 && ok && (a.Kind == codec.PUBACK || a.Kind == codec.PUBCOMP)
		})
		local := tcpBroker(t, core.Options{}, core.Config{})
		m := local.bridges(t, nil, fast(bridge.Config{Name: "up", Addresses: []string{p.url}, InflightTimeout: timeout,
			MaxInflight: 2, Topics: []bridge.Rule{{Topic: "out/#", QoS: 2}}}))
		waitState(t, m, "up", bridge.StateConnected)
		rsub := dialClient(t, remote, "rsub", codec.V5)
		rsub.Subscribe("out/#", 2)
		lpub := dialClient(t, local, "lpub", codec.V5)
		lpub.Pub("out/x", "x", 1, false)
		lpub.Pub("out/y", "y", 2, false)
		lpub.Pub("out/z", "z", 1, false) // waits for the window of 2, which x and y hold
		// x twice: its PUBACK never came, so it went again (QoS 1 is at
		// least once); y once: the second time only its PUBREL went.
		got := payloads(rsub.Expect(4))
		slices.Sort(got)
		if !slices.Equal(got, []string{"x", "x", "y", "z"}) {
			t.Errorf("the remote subscriber got %q, want x twice, y and z", got)
		}
		rsub.Nothing()
		if st, _ := m.Bridge("up"); st.InflightTimeouts != 1 || st.Links != 2 {
			t.Errorf("%d in-flight timeouts, %d links; want 1 and 2", st.InflightTimeouts, st.Links)
		}
		first, second := p.sentOn(1), p.sentOn(2)
		x := slices.IndexFunc(first, func(s sentByBridge) bool { return s.kind == codec.PUBLISH && s.payload == "x" })
		y := slices.IndexFunc(first, func(s sentByBridge) bool { return s.kind == codec.PUBLISH && s.payload == "y" })
		if x < 0 || y < 0 || first[x].dup {
			t.Fatalf("first connection: %+v", first)
		}
		if !slices.Contains(second, sentByBridge{kind: codec.PUBLISH, id: first[x].id, dup: true, payload: "x"}) ||
			!slices.Contains(second, sentByBridge{kind: codec.PUBREL, id: first[y].id}) ||
			slices.ContainsFunc(second, func(s sentByBridge) bool { return s.payload == "y" }) {
			t.Errorf("second connection: %+v; want x again with DUP and its packet id %d, and the PUBREL of y (%d), not y",
				second, first[x].id, first[y].id)
		}
	})
}

func countKind(ss []sentByBridge, k codec.Type) int {
	n := 0
	for _, s := range ss {
		if s.kind == k {
			n++
		}
	}
	return n
}

// TestPingWriteFails: the connection to the remote breaks (a reset)
// while the bridge's reader waits for a slot, so only the keepalive's
// ping finds out, when its write fails; that closes the link, which is
// made again, and what was held gets through. The in-flight timeout is
// far off: it plays no part.
func TestPingWriteFails(t *testing.T) {
	m, p, lsub := inboundWedge(t, nil, func(c *bridge.Config) {
		c.KeepAlive, c.InflightTimeout = time.Second, time.Minute
	})
	lsub.Expect(wedgeSlots) // QoS 2: delivered on receipt
	// The next PUBLISH reaches the reader, which then waits for a slot and
	// reads no more: only then does a reset go unseen by it (under -race the
	// remote's next message can take a while to come).
	time.Sleep(500 * time.Millisecond)
	p.reset()
	if got := payloads(lsub.Expect(2)); !slices.Equal(got, []string{"m4", "m5"}) {
		t.Errorf("after the reset: %q", got)
	}
	lsub.Nothing()
	st, _ := m.Bridge("up")
	if st.Links != 2 || st.InflightTimeouts != 0 || !strings.Contains(st.LastError, "writing to the remote") {
		t.Errorf("%d links, %d in-flight timeouts, last error %q: want the link made again after a failed write",
			st.Links, st.InflightTimeouts, st.LastError)
	}
}

// TestRemoteGoneShows: the remote closes its socket (and listens no
// more) while the bridge's reader waits for a slot. Until then the status
// tells the messages in flight; within one keepalive of the close it says
// the bridge is not connected, with none in flight.
func TestRemoteGoneShows(t *testing.T) {
	const keepAlive = time.Second
	m, p, _ := inboundWedge(t, nil, func(c *bridge.Config) { c.KeepAlive, c.InflightTimeout = keepAlive, time.Minute })
	if st, _ := m.Bridge("up"); st.State != bridge.StateConnected || st.InflightIn != wedgeSlots {
		t.Errorf("%s with %d messages in flight while the remote holds them, want connected with %d",
			st.State, st.InflightIn, wedgeSlots)
	}
	p.stop()
	closed := time.Now()
	var st bridge.Status
	mqtttest.WaitFor(t, "the state to say the link is down", func() bool {
		st, _ = m.Bridge("up")
		return st.State != bridge.StateConnected
	})
	// Two pings a quarter keepalive apart: the first draws the reset, the
	// second fails. Half a keepalive to spare for a loaded machine.
	took := time.Since(closed)
	t.Logf("the state said connected for %v after the remote closed", took)
	if took > keepAlive {
		t.Errorf("the state said connected for %v after the remote closed, want at most the keepalive, %v", took, keepAlive)
	}
	if st.InflightIn != 0 {
		t.Errorf("%d messages in flight on no link", st.InflightIn)
	}
}
