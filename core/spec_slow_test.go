package core_test

import (
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// A subscriber that never reads its socket must not slow the publisher or
// the other subscribers: net.Pipe is synchronous, so the broker's writes to
// it block for good. Its QoS 0 messages beyond MaxQueued are dropped and
// counted (DESIGN: "a subscriber that cannot keep up never slows the
// publisher or anyone else").
func TestSlowSubscriberDoesNotBlockPublisher(t *testing.T) {
	srv := newServer(t, core.Options{MaxQueued: 100}, core.Config{})
	slow := client(t, srv, codec.V311, "slow")
	slow.Subscribe(0, "slow/#")
	slow.Pause()
	fast := client(t, srv, codec.V5, "fast")
	fast.Subscribe(0, "slow/#")
	p := client(t, srv, codec.V311, "pub")

	const rounds, per = 20, 50
	payload := strings.Repeat("x", 512)
	start := time.Now()
	for range rounds {
		for range per {
			p.Pub("slow/x", payload, 0)
		}
		p.Send(&codec.Pingreq{})
		expect[*codec.Pingresp](p)
		// The fast subscriber keeps up: it is never more than one round
		// (under MaxQueued) behind, so it loses nothing.
		if got := fast.Recv(per); len(got) != per {
			t.Fatalf("fast subscriber got %d, want %d", len(got), per)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("publishing %d messages took %v", rounds*per, d)
	}
	waitFor(t, "queue_full drops counted", func() bool { return srv.Stats().Dropped["queue_full"] > 0 })

	// Once it reads again it gets what was queued, not everything.
	slow.Resume()
	got := slow.collect()
	if len(got) == 0 || len(got) >= rounds*per {
		t.Fatalf("slow subscriber got %d messages after resuming, want some but fewer than %d", len(got), rounds*per)
	}
	if dropped := srv.Stats().Dropped["queue_full"]; int(dropped)+len(got) != rounds*per {
		t.Fatalf("%d delivered + %d dropped, want %d", len(got), dropped, rounds*per)
	}
	slow.Send(&codec.Pingreq{})
	expect[*codec.Pingresp](slow)
}

// QueueOverflow disconnect: a QoS 1 message for a full queue disconnects
// the slow client (5.0: DISCONNECT Quota exceeded) while the publisher
// carries on.
func TestQueueOverflowDisconnect(t *testing.T) {
	srv := newServer(t, core.Options{MaxQueued: 5, QueueOverflow: core.OverflowDisconnect}, core.Config{})
	slow := client(t, srv, codec.V5, "slow", func(p *codec.Connect) {
		p.Props.SetNum(codec.PropReceiveMaximum, 2)
	})
	slow.Subscribe(1, "of/#")
	slow.Pause()
	p := client(t, srv, codec.V311, "pub")
	start := time.Now()
	for range 30 {
		p.Pub("of/x", strings.Repeat("y", 256), 1)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("publishing took %v", d)
	}
	waitFor(t, "slow consumer disconnected", func() bool { return srv.Stats().Disconnects["slow_consumer"] == 1 })
	// The DISCONNECT Quota exceeded the broker queued is lost to the write
	// deadline: the client was not reading.
	slow.Resume()
	slow.DrainUntilClosed()
	p.Pub("of/x", "still", 1)
}

// WriteTimeout: a client whose socket accepts nothing for that long is
// disconnected as a slow consumer.
func TestWriteTimeoutSlowConsumer(t *testing.T) {
	srv := newServer(t, core.Options{WriteTimeout: 200 * time.Millisecond}, core.Config{})
	slow := client(t, srv, codec.V311, "stuck")
	slow.Subscribe(0, "wt")
	slow.Pause()
	p := client(t, srv, codec.V311, "pub")
	for range 64 { // more than the socket buffers hold over TCP (XMQ_CORE_TCP)
		p.Pub("wt", strings.Repeat("z", 4096), 0)
	}
	waitFor(t, "slow consumer disconnected", func() bool { return srv.Stats().Disconnects["slow_consumer"] == 1 })
	slow.Resume()
	slow.DrainUntilClosed()
}

// TestWriteLongAfterWriteTimeout: a connection written to once and then
// left alone for longer than WriteTimeout is written to as before: the next
// writes do not inherit the deadline of the last one.
func TestWriteLongAfterWriteTimeout(t *testing.T) {
	srv := newServer(t, core.Options{WriteTimeout: 100 * time.Millisecond}, core.Config{})
	sub := client(t, srv, codec.V311, "sub")
	sub.Subscribe(1, "idle")
	pub := client(t, srv, codec.V5, "pub")
	time.Sleep(300 * time.Millisecond)
	if rc := pub.Publish(&codec.Publish{Topic: []byte("idle"), Payload: []byte("late"), QoS: 1}); rc != codec.Success {
		t.Fatalf("PUBACK %s, want Success", rc)
	}
	wantPayloads(t, sub.Recv(1), "late")
	pub.Send(&codec.Pingreq{})
	expect[*codec.Pingresp](pub)
	if n := srv.Stats().Disconnects["slow_consumer"]; n != 0 {
		t.Errorf("%d slow consumer disconnects, want 0", n)
	}
}

// Server.Disconnect closes a client (5.0: DISCONNECT Administrative
// action) and reports whether it was connected.
func TestAdminDisconnect(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	c := client(t, srv, codec.V5, "victim")
	if !srv.Disconnect("victim") {
		t.Fatalf("Disconnect(victim) = false, want true")
	}
	c.ExpectDisconnect(codec.AdministrativeAction)
	if srv.Disconnect("nobody") {
		t.Fatalf("Disconnect(nobody) = true, want false")
	}
}

// Server.Publish injects a message as the broker, retained if asked, and
// refuses an invalid topic.
func TestServerPublish(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	c := client(t, srv, codec.V5, "listener")
	c.Subscribe(1, "inject/#")
	if err := srv.Publish("inject/a", []byte("hello"), 1, true); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	got := c.Recv(1)[0]
	if string(got.Payload) != "hello" || got.QoS != 1 || string(got.Topic) != "inject/a" {
		t.Fatalf("got %q on %q at QoS %d", got.Payload, got.Topic, got.QoS)
	}
	wantPayloads(t, retainedOn(t, srv, codec.V311, "late", "inject/a", 1), "hello")
	for _, bad := range []string{"", "a/+", "a/#"} {
		if err := srv.Publish(bad, nil, 0, false); err == nil {
			t.Errorf("Publish(%q) succeeded, want an error", bad)
		}
	}
}

// Stats counts connections, messages and subscriptions.
func TestStats(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	s := client(t, srv, codec.V311, "s")
	s.Subscribe(1, "st/a", "st/b")
	p := client(t, srv, codec.V311, "p")
	p.Pub("st/a", "1", 1)
	p.Pub("st/b", "2", 0)
	s.Recv(2)
	st := srv.Stats()
	if st.Connected != 2 || st.Connects != 2 || st.Subscriptions != 2 || st.MessagesIn != 2 || st.Sessions != 2 {
		t.Fatalf("stats %+v, want 2 connected, 2 connects, 2 subscriptions, 2 in, 2 sessions", st)
	}
	waitFor(t, "messages out counted", func() bool { return srv.Stats().MessagesOut == 2 })
	p.disconnect()
	waitFor(t, "normal disconnect counted", func() bool { return srv.Stats().Disconnects["normal"] == 1 })
}
