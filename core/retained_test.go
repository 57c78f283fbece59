package core_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// manyItems is n, or n/5 under the race detector, which makes each
// message ten times slower; the properties checked do not depend on it.
func manyItems(n int) int {
	if core.RaceEnabled {
		return n / 5
	}
	return n
}

// retainMany retains n messages fleet/NNNNNN/state (QoS qos, payload of
// size bytes) as the broker.
func retainMany(t *testing.T, srv *core.Server, n int, qos byte, size int) {
	t.Helper()
	payload := make([]byte, size)
	for i := range n {
		if err := srv.Publish(fleetTopic(i), payload, qos, true); err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.Stats().Retained; got != n {
		t.Fatalf("%d retained messages, want %d", got, n)
	}
}

func fleetTopic(i int) string { return fmt.Sprintf("fleet/%06d/state", i) }

// fleetIndex is the i of fleetTopic(i), or -1.
func fleetIndex(topic []byte) int {
	s, ok := strings.CutPrefix(string(topic), "fleet/")
	if !ok || len(s) < 6 {
		return -1
	}
	i, err := strconv.Atoi(s[:6])
	if err != nil {
		return -1
	}
	return i
}

// recvRetained takes PUBLISH packets until it has each of
// fleetTopic(from..n-1) once, retained, acknowledging QoS 1, and fails on
// anything else.
func (c *tconn) recvRetained(from, n int) {
	c.T.Helper()
	seen := make([]bool, n)
	for got := from; got < n; got++ {
		p, _, err := c.NextWithin(10 * time.Second)
		if err != nil {
			c.T.Fatalf("after %d of %d retained messages: %v", got, n, err)
		}
		pub, ok := p.(*codec.Publish)
		if !ok {
			c.T.Fatalf("after %d of %d retained messages: got %s, want PUBLISH", got, n, p.Type())
		}
		i := fleetIndex(pub.Topic)
		if i < from || i >= n || seen[i] || !pub.Retain {
			c.T.Fatalf("unexpected PUBLISH %q (retain %v) after %d of %d", pub.Topic, pub.Retain, got, n)
		}
		seen[i] = true
		c.Ack(pub)
	}
}

// TestRetainedStreamInFull: a new subscriber to # on a broker with 200,000
// retained QoS 0 messages gets every one of them, over TCP, at its own
// pace (issue 23 item 4: it got 39,619, the rest dropped by its queue's
// bound without a word).
func TestRetainedStreamInFull(t *testing.T) {
	n := manyItems(200_000)
	srv := newServer(t, core.Options{}, core.Config{})
	retainMany(t, srv, n, 0, 1)
	c := tcpClient(t, srv, codec.V311, "all")
	start := time.Now()
	c.Subscribe(0, "#")
	c.recvRetained(0, n)
	t.Logf("%d retained messages in %v", n, time.Since(start))
	c.ExpectNothing(quiet)
	st := srv.Stats()
	if d := st.TotalDropped(); d != 0 || st.RetainedStreamsCut != 0 {
		t.Errorf("dropped %v, streams cut %d, want none", st.Dropped, st.RetainedStreamsCut)
	}
}

// TestRetainedStreamSlowReader: a subscriber that reads in fits and
// starts gets every retained message, and while it does not read the
// broker holds them in no queue: the stream waits for the socket.
func TestRetainedStreamSlowReader(t *testing.T) {
	n := manyItems(20_000)
	srv := newServer(t, core.Options{}, core.Config{})
	retainMany(t, srv, n, 0, 1)
	c := tcpClient(t, srv, codec.V5, "slow")
	c.Subscribe(0, "fleet/+/state")
	c.Pause()
	time.Sleep(quiet) // the socket's buffers fill
	if st := srv.Stats(); st.Queued != 0 || st.TotalDropped() != 0 {
		t.Fatalf("a subscriber that does not read: %d queued, %v dropped; want the stream waiting", st.Queued, st.Dropped)
	}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			c.Resume()
			time.Sleep(2 * time.Millisecond)
			c.Pause()
			time.Sleep(5 * time.Millisecond)
		}
		c.Resume()
	}()
	c.recvRetained(0, n)
	stop.Store(true)
	<-done
	if st := srv.Stats(); st.TotalDropped() != 0 {
		t.Errorf("dropped %v, want none", st.Dropped)
	}
}

// TestRetainedStreamWindow: QoS 1 retained messages go within the
// subscriber's Receive Maximum, however many there are, and all arrive.
func TestRetainedStreamWindow(t *testing.T) {
	n := manyItems(5_000)
	const window = 10
	srv := newServer(t, core.Options{}, core.Config{})
	retainMany(t, srv, n, 1, 1)
	c := tcpClient(t, srv, codec.V5, "windowed", func(p *codec.Connect) { p.Props.SetNum(codec.PropReceiveMaximum, window) })
	c.Subscribe(1, "fleet/#")
	var first []*codec.Publish
	for range window {
		first = append(first, c.ExpectPublish())
	}
	c.ExpectNothing(quiet) // the window is full until an acknowledgement
	if st := srv.Stats(); st.Inflight != window || st.Queued != 0 {
		t.Fatalf("%d in flight, %d queued; want %d in flight, none queued", st.Inflight, st.Queued, window)
	}
	for _, p := range first {
		c.Ack(p)
	}
	c.recvRetained(window, n) // the first ones were fleetTopic(0..window-1): topic order
	c.ExpectNothing(quiet)
	if st := srv.Stats(); st.TotalDropped() != 0 || st.Inflight != 0 {
		t.Errorf("dropped %v, %d in flight; want none", st.Dropped, st.Inflight)
	}
}

// TestRetainedStreamCut: when the subscriber's connection ends before the
// stream does, the rest is not sent, not even on reconnect — retained
// messages go with a SUBSCRIBE — and the cut is counted. What was in
// flight to a persistent session is sent again as usual.
func TestRetainedStreamCut(t *testing.T) {
	n := manyItems(5_000)
	srv := newServer(t, core.Options{}, core.Config{})
	retainMany(t, srv, n, 1, 1000) // more than the sockets' buffers hold

	c := tcpClient(t, srv, codec.V311, "gone")
	c.Subscribe(0, "#")
	c.Pause()
	c.Close()
	waitFor(t, "the stream cut", func() bool { return srv.Stats().RetainedStreamsCut == 1 })

	p := tcpClient(t, srv, codec.V5, "back", persistent, func(p *codec.Connect) { p.Props.SetNum(codec.PropReceiveMaximum, 5) })
	p.Subscribe(1, "fleet/#")
	for range 5 {
		p.ExpectPublish() // not acknowledged
	}
	p.Close()
	waitFor(t, "the stream cut", func() bool { return srv.Stats().RetainedStreamsCut == 2 })
	p = tcpClient(t, srv, codec.V5, "back", persistent)
	for i := range 5 {
		if m := p.ExpectPublish(); !m.Dup || fleetIndex(m.Topic) != i {
			t.Fatalf("resent %q dup %v, want %s with DUP", m.Topic, m.Dup, fleetTopic(i))
		}
	}
	p.ExpectNothing(quiet)
}

// TestRetainedStreamTooLarge: retained messages over the subscriber's MQTT
// 5 Maximum Packet Size are not sent and are counted; the ones after them
// still come, even when whole batches came to nothing.
func TestRetainedStreamTooLarge(t *testing.T) {
	const big, small = 3 * 256, 10
	srv := newServer(t, core.Options{}, core.Config{})
	retainMany(t, srv, big, 0, 1000)
	for i := big; i < big+small; i++ {
		if err := srv.Publish(fleetTopic(i), []byte("v"), 0, true); err != nil {
			t.Fatal(err)
		}
	}
	c := tcpClient(t, srv, codec.V5, "small", func(p *codec.Connect) { p.Props.SetNum(codec.PropMaximumPacketSize, 200) })
	c.Subscribe(0, "fleet/#")
	c.recvRetained(big, big+small)
	c.ExpectNothing(quiet)
	if got := srv.Stats().Dropped["too_large"]; got != big {
		t.Errorf("%d too_large drops, want %d", got, big)
	}
}

// TestRetainedStreamUnsubscribe: UNSUBSCRIBE stops the stream; at most
// the batch the writer had taken follows UNSUBACK [MQTT-3.10.4-2].
func TestRetainedStreamUnsubscribe(t *testing.T) {
	n := manyItems(5_000)
	srv := newServer(t, core.Options{}, core.Config{})
	retainMany(t, srv, n, 0, 1000) // far more than the sockets' buffers hold
	c := tcpClient(t, srv, codec.V311, "quitter")
	c.Subscribe(0, "#")
	c.ExpectPublish()
	c.Pause() // the stream waits for the socket, and cannot end first
	c.Send(&codec.Unsubscribe{PacketID: 99, Filters: [][]byte{[]byte("#")}})
	time.Sleep(quiet)
	c.Resume()
	before, after := 1, 0
	for ack := false; ; {
		raw, err := c.NextRaw(quiet)
		if err != nil {
			break
		}
		switch p, _, _ := codec.Decode(raw, c.V); p.(type) {
		case *codec.Unsuback:
			ack = true
		case *codec.Publish:
			if ack {
				after++
			} else {
				before++
			}
		}
	}
	if before+after >= n || after > 256 {
		t.Errorf("%d retained messages before UNSUBACK and %d after, of %d: want the stream stopped", before, after, n)
	}
}

// TestRetainedBudgetMessages: over max_retained_messages a retained
// PUBLISH to a new topic is not retained — an MQTT 5 QoS 1 publisher gets
// Quota exceeded, the current subscribers get the message all the same —
// and it is counted; replacing a topic's message and clearing one work.
func TestRetainedBudgetMessages(t *testing.T) {
	srv := newServer(t, core.Options{MaxRetainedMessages: 2}, core.Config{})
	live := client(t, srv, codec.V5, "live")
	live.Subscribe(0, "b/#")
	pub := client(t, srv, codec.V5, "pub")
	v3 := client(t, srv, codec.V311, "pub3")
	retain := func(c *tconn, topic, payload string, qos byte) codec.ReasonCode {
		t.Helper()
		return c.Publish(&codec.Publish{Topic: []byte(topic), Payload: []byte(payload), QoS: qos, Retain: true})
	}
	if rc := retain(pub, "b/1", "one", 1); rc.IsError() {
		t.Fatalf("first retained message: %s", rc)
	}
	live.ExpectPublish()
	if rc := retain(pub, "b/2", "two", 1); rc.IsError() {
		t.Fatalf("second retained message: %s", rc)
	}
	live.ExpectPublish()
	if rc := retain(pub, "b/3", "three", 1); rc != codec.QuotaExceeded {
		t.Errorf("MQTT 5 QoS 1 over the budget: %s, want Quota exceeded", rc)
	}
	if p := live.ExpectPublish(); string(p.Payload) != "three" {
		t.Errorf("the subscriber got %q, want the refused message all the same", p.Payload)
	}
	retain(pub, "b/4", "four", 0)
	live.ExpectPublish()
	if rc := retain(v3, "b/5", "five", 1); rc != codec.Success {
		t.Errorf("MQTT 3.1.1 QoS 1 over the budget: %s, want Success (3.1.1 has no code for it)", rc)
	}
	live.ExpectPublish()
	if rc := retain(pub, "b/1", "ONE", 1); rc.IsError() {
		t.Errorf("replacing a retained message at the budget: %s", rc)
	}
	live.ExpectPublish()
	wantRetained(t, srv, "b/#", "ONE", "two")

	retain(pub, "b/2", "", 0) // clear: room for one more
	live.ExpectPublish()
	if rc := retain(pub, "b/3", "three", 1); rc.IsError() {
		t.Errorf("a new topic after a clear: %s", rc)
	}
	live.ExpectPublish()
	wantRetained(t, srv, "b/#", "ONE", "three")
	if got := srv.Stats().RetainedRefused; got != 3 {
		t.Errorf("RetainedRefused %d, want 3", got)
	}
}

// TestRetainedBudgetBytes: max_retained_bytes bounds topic and payload
// bytes; a larger message for a topic passes while it fits; over the
// budget (lowered while running) a message no larger than the one it
// replaces, and a clear, still pass.
func TestRetainedBudgetBytes(t *testing.T) {
	srv := newServer(t, core.Options{MaxRetainedBytes: 100}, core.Config{})
	pub := client(t, srv, codec.V5, "pub")
	retain := func(topic string, size int) codec.ReasonCode {
		t.Helper()
		return pub.Publish(&codec.Publish{Topic: []byte(topic), Payload: []byte(strings.Repeat("x", size)), QoS: 1, Retain: true})
	}
	for _, tc := range []struct {
		topic string
		size  int
		ok    bool
	}{
		{"c/1", 47, true},  // 50 bytes with the topic
		{"c/2", 47, true},  // 100: at the budget
		{"c/3", 1, false},  // 104
		{"c/1", 48, false}, // 101
		{"c/1", 20, true},  // smaller: 73
		{"c/2", 74, true},  // larger but fits: 100
	} {
		if rc := retain(tc.topic, tc.size); rc.IsError() == tc.ok {
			t.Fatalf("%s with %d bytes: %s, want refused %v", tc.topic, tc.size, rc, !tc.ok)
		}
	}
	l := srv.Options().Limits()
	l.MaxRetainedBytes = 50 // now over the budget
	if err := srv.SetLimits(l); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		topic string
		size  int
		ok    bool
	}{
		{"c/2", 75, false}, // larger
		{"c/2", 74, true},  // as large
		{"c/2", 10, true},  // smaller: 36 in all
		{"c/3", 11, true},  // fits again: 50
		{"c/3", 0, true},   // a clear
	} {
		if rc := retain(tc.topic, tc.size); rc.IsError() == tc.ok {
			t.Fatalf("over the budget, %s with %d bytes: %s, want refused %v", tc.topic, tc.size, rc, !tc.ok)
		}
	}
	if st := srv.Stats(); st.RetainedRefused != 3 || st.Retained != 2 || st.RetainedBytes != 36 {
		t.Errorf("refused %d, retained %d of %d bytes; want 3, 2 of 36", st.RetainedRefused, st.Retained, st.RetainedBytes)
	}
}

// TestRetainedBudgetCountsRestored: retained messages restored from the
// store are all kept and count against the budget.
func TestRetainedBudgetCountsRestored(t *testing.T) {
	st := core.NewMemStore()
	srv := newServer(t, core.Options{}, core.Config{Store: st})
	for i := range 3 {
		if err := srv.Publish(fmt.Sprint("d/", i), []byte("v"), 0, true); err != nil {
			t.Fatal(err)
		}
	}
	opts := core.Options{MaxRetainedMessages: 2}
	srv = restart(t, srv, opts, st)
	if got := srv.Stats().Retained; got != 3 {
		t.Fatalf("%d retained messages restored, want 3", got)
	}
	pub := client(t, srv, codec.V5, "pub")
	if rc := pub.Publish(&codec.Publish{Topic: []byte("d/new"), Payload: []byte("v"), QoS: 1, Retain: true}); rc != codec.QuotaExceeded {
		t.Errorf("a new topic with more restored than the budget: %s, want Quota exceeded", rc)
	}
	if rc := pub.Publish(&codec.Publish{Topic: []byte("d/0"), Payload: []byte("w"), QoS: 1, Retain: true}); rc.IsError() {
		t.Errorf("replacing a restored message: %s", rc)
	}
}

// wantRetained checks the payloads a new subscriber to filter gets.
func wantRetained(t *testing.T, srv *core.Server, filter string, want ...string) {
	t.Helper()
	c := client(t, srv, codec.V5, "check-"+filter)
	c.Subscribe(0, filter)
	wantPayloads(t, c.Recv(len(want)), want...)
	c.ExpectNothing(quiet)
	c.Close()
}

// TestMaxSubscriptionsDefault: by default one client may hold 10,000
// subscriptions; the next is refused with Quota exceeded (0x80 in 3.1.1),
// and a negative limit is none (issue 23 item 5).
func TestMaxSubscriptionsDefault(t *testing.T) {
	const limit = 10_000
	if got := core.DefaultOptions().MaxSubscriptionsPerClient; got != limit {
		t.Fatalf("default max_subscriptions_per_client %d, want %d", got, limit)
	}
	subscribeMany := func(c *tconn, from, n int) []codec.ReasonCode {
		var codes []codec.ReasonCode
		for i := from; i < from+n; i += 1000 {
			s := &codec.Subscribe{}
			for j := i; j < min(i+1000, from+n); j++ {
				s.Subscriptions = append(s.Subscriptions, sub(fmt.Sprint("s/", j), 0))
			}
			codes = append(codes, c.SubscribePacket(s).ReasonCodes...)
		}
		return codes
	}
	for _, v := range []byte{codec.V311, codec.V5} {
		srv := newServer(t, core.Options{}, core.Config{})
		c := client(t, srv, v, "many")
		for i, rc := range subscribeMany(c, 0, limit) {
			if rc != codec.GrantedQoS0 {
				t.Fatalf("v%d subscription %d: %s", v, i, rc)
			}
		}
		want := codec.QuotaExceeded
		if v != codec.V5 {
			want = codec.UnspecifiedError // 0x80 Failure
		}
		if rc := subscribeMany(c, limit, 1)[0]; rc != want {
			t.Errorf("v%d subscription %d: %s, want %s", v, limit+1, rc, want)
		}
	}
	srv := newServer(t, core.Options{MaxSubscriptionsPerClient: -1}, core.Config{})
	c := client(t, srv, codec.V5, "unbounded")
	for i, rc := range subscribeMany(c, 0, limit+1) {
		if rc != codec.GrantedQoS0 {
			t.Fatalf("no limit, subscription %d: %s", i, rc)
		}
	}
}
