package core_test

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// storeRecords are the records a store holds for one client id.
type storeRecords struct {
	session, inbound, will []byte
	seqs                   []uint64
	msgs                   [][]byte
}

func recordsOf(t *testing.T, st *core.MemStore, id string) storeRecords {
	t.Helper()
	var r storeRecords
	keep := func(b []byte) []byte { return append([]byte(nil), b...) }
	err := st.Load(func(cid string, rec []byte) error {
		if cid == id {
			r.session = keep(rec)
		}
		return nil
	}, func(cid string, seq uint64, rec []byte) error {
		if cid == id {
			r.seqs = append(r.seqs, seq)
			r.msgs = append(r.msgs, keep(rec))
		}
		return nil
	}, func(string, []byte) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	_ = st.LoadWills(func(cid string, rec []byte) error {
		if cid == id {
			r.will = keep(rec)
		}
		return nil
	})
	return r
}

// resume connects id to srv with MQTT 5 and a persistent session, which
// must be there (Session Present).
func resume(t *testing.T, srv *core.Server, id string) *tconn {
	t.Helper()
	c := dial(t, srv, codec.V5)
	cp := connectPacket(codec.V5, id)
	persistent(cp)
	if ack := c.Connect(cp); !ack.SessionPresent {
		t.Fatal("session present 0")
	}
	return c
}

// TestRestoreSession: a session rebuilt on another server from the
// records its server's store held (its node died) has its subscriptions
// and queued messages, in order, with DUP where they may have been sent;
// with its will, the will fires after its delay unless the client comes
// back; without, it never does. Damaged records are refused.
func TestRestoreSession(t *testing.T) {
	// With the will, the client was connected and had been sent the
	// messages (not acknowledged) when its node died; without, it was
	// offline and they were only queued.
	for _, withWill := range []bool{true, false} {
		st := core.NewMemStore()
		a := newServer(t, core.Options{}, core.Config{Store: st})
		s := client(t, a, codec.V5, "rs", persistent, func(p *codec.Connect) {
			p.WillFlag, p.WillTopic, p.WillPayload = true, []byte("will/rs"), []byte("gone")
			p.WillProps.SetNum(codec.PropWillDelay, 1)
		})
		s.Subscribe(1, "r/#")
		if withWill {
			s.Pause() // sent, not acknowledged: in flight when the node dies
		} else {
			connected := recordsOf(t, st, "rs").session
			s.Close()
			// The store has the record saying it left a moment after
			// the broker's memory does.
			waitFor(t, "offline in the store", func() bool { return !bytes.Equal(recordsOf(t, st, "rs").session, connected) })
		}
		pub := client(t, a, codec.V5, "pub")
		for _, m := range seq("r", 3) {
			pub.Pub("r/x", m, 1)
		}
		recs := recordsOf(t, st, "rs")
		if recs.session == nil || len(recs.msgs) != 3 || recs.will == nil {
			t.Fatalf("records %+v", recs)
		}

		b := newServer(t, core.Options{}, core.Config{})
		watcher := client(t, b, codec.V5, "watcher")
		watcher.Subscribe(0, "will/#")
		if err := b.RestoreSession("rs", recs.session[:len(recs.session)-1], nil, nil, nil, nil, false); err == nil {
			t.Fatal("a damaged session record was restored")
		}
		if err := b.RestoreSession("rs", recs.session, recs.inbound, recs.seqs, recs.msgs, recs.will, withWill); err != nil {
			t.Fatal(err)
		}
		if withWill {
			w := watcher.ExpectPublish()
			if string(w.Topic) != "will/rs" {
				t.Fatalf("got %q", w.Topic)
			}
			// The will went with the delay over: the session is still there.
		} else {
			watcher.ExpectNothing(1500 * time.Millisecond)
		}
		c := resume(t, b, "rs")
		got := c.Recv(3)
		wantPayloads(t, got, seq("r", 3)...)
		for _, p := range got {
			if p.Dup != withWill {
				t.Errorf("%q: DUP %v, want %v (sent before the node died)", p.Payload, p.Dup, withWill)
			}
		}
		pub2 := client(t, b, codec.V5, "pub2")
		pub2.Pub("r/y", "after", 1)
		if p := c.ExpectPublish(); string(p.Payload) != "after" {
			t.Errorf("got %q, want the restored subscription's next message", p.Payload)
		}
	}
}

// TestRestoreSessionClientBack: a will restored with its session does not
// fire when the client connects within its delay.
func TestRestoreSessionClientBack(t *testing.T) {
	st := core.NewMemStore()
	a := newServer(t, core.Options{}, core.Config{Store: st})
	client(t, a, codec.V5, "rb", persistent, func(p *codec.Connect) {
		p.WillFlag, p.WillTopic, p.WillPayload = true, []byte("will/rb"), []byte("gone")
		p.WillProps.SetNum(codec.PropWillDelay, 1)
	})
	recs := recordsOf(t, st, "rb")
	b := newServer(t, core.Options{}, core.Config{})
	watcher := client(t, b, codec.V5, "watcher")
	watcher.Subscribe(0, "will/#")
	if err := b.RestoreSession("rb", recs.session, nil, nil, nil, recs.will, true); err != nil {
		t.Fatal(err)
	}
	client(t, b, codec.V5, "rb", persistent)
	watcher.ExpectNothing(1500 * time.Millisecond)
}

// TestMergeSession: the messages of a stale session exported on one
// server go, with DUP, after what the client's session on another server
// holds; a session that is not persistent takes none.
func TestMergeSession(t *testing.T) {
	a := newServer(t, core.Options{}, core.Config{})
	s := client(t, a, codec.V5, "mg", persistent)
	s.Subscribe(1, "m/#")
	s.Close()
	waitFor(t, "offline", func() bool { info, ok := a.Client("mg"); return ok && !info.Connected })
	pub := client(t, a, codec.V5, "pub")
	for _, m := range seq("m", 3) {
		pub.Pub("m/x", m, 1)
	}
	data := a.ExportSession("mg", 0, true)
	if data == nil {
		t.Fatal("nothing exported")
	}
	if _, ok := a.Client("mg"); ok {
		t.Error("the stale session is still on its server")
	}

	b := newServer(t, core.Options{}, core.Config{})
	c := client(t, b, codec.V5, "mg", persistent)
	c.Subscribe(1, "other/#")
	if _, err := b.MergeSession("mg", data[:len(data)-1]); err == nil {
		t.Error("a damaged export was merged")
	}
	n, err := b.MergeSession("mg", data)
	if err != nil || n != 3 {
		t.Fatalf("merged %d, %v", n, err)
	}
	got := c.Recv(3)
	wantPayloads(t, got, seq("m", 3)...)
	for _, p := range got {
		if !p.Dup {
			t.Errorf("%q without DUP", p.Payload)
		}
	}

	clean := client(t, b, codec.V5, "mg2")
	if n, _ := b.MergeSession("mg2", data); n != 0 {
		t.Errorf("a non-persistent session took %d messages", n)
	}
	clean.ExpectNothing(quiet)
}

// TestReplayPending: a dead node's session rebuilt in two steps — pending
// from its session record, then with its records — gets its records
// first, then what was replayed into it (with the rules of a PUBLISH:
// QoS downgrade, No Local, only its plain subscriptions; QoS 0 not
// kept), then what it queued while pending, all but the records with
// DUP, in that order; a replay once it is no longer pending does nothing.
func TestReplayPending(t *testing.T) {
	st := core.NewMemStore()
	a := newServer(t, core.Options{}, core.Config{Store: st})
	s := client(t, a, codec.V5, "rp", persistent)
	s.SubscribePacket(&codec.Subscribe{Subscriptions: []codec.Subscription{
		{Filter: []byte("r/#"), QoS: 1},
		{Filter: []byte("nl/#"), QoS: 2, NoLocal: true},
		{Filter: []byte("$share/g/sh/#"), QoS: 1},
	}})
	s.Close()
	waitFor(t, "offline", func() bool { info, ok := a.Client("rp"); return ok && !info.Connected })
	pub := client(t, a, codec.V5, "pub")
	pub.Pub("r/x", "rec", 1)
	recs := recordsOf(t, st, "rp")

	b := newServer(t, core.Options{}, core.Config{})
	filters, err := b.PendSession("rp", recs.session)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(filters)
	if !slices.Equal(filters, []string{"nl/#", "r/#"}) {
		t.Errorf("filters %q, want the plain ones", filters)
	}
	pub2 := client(t, b, codec.V5, "pub2")
	pub2.Pub("r/x", "queued", 1) // while pending: after the replayed ones
	for _, c := range []struct {
		topic, payload string
		qos            byte
		from           string
		want           int
	}{
		{"r/x", "replayed1", 2, "p", 1},
		{"nl/x", "mine", 1, "rp", 0}, // No Local
		{"sh/x", "shared", 1, "p", 0},
		{"r/x", "qos0", 0, "p", 0},
		{"r/x", "replayed2", 1, "p", 1},
	} {
		if n := b.ReplayPending(map[string]bool{"rp": true}, codec.Message{Topic: c.topic, Payload: []byte(c.payload), QoS: c.qos, From: c.from}, time.Time{}); n != c.want {
			t.Errorf("%s: %d deliveries, want %d", c.payload, n, c.want)
		}
	}
	if err := b.RestoreSession("rp", recs.session, recs.inbound, recs.seqs, recs.msgs, nil, false); err != nil {
		t.Fatal(err)
	}
	if n := b.ReplayPending(map[string]bool{"rp": true, "pub2": true}, codec.Message{Topic: "r/x", Payload: []byte("late"), QoS: 1, From: "p"}, time.Time{}); n != 0 {
		t.Errorf("a replay into a complete session made %d deliveries", n)
	}
	c := resume(t, b, "rp")
	got := c.Recv(4)
	wantPayloads(t, got, "rec", "replayed1", "replayed2", "queued")
	for _, p := range got[1:] {
		if !p.Dup || p.QoS != 1 {
			t.Errorf("%q: DUP %v QoS %d, want DUP at QoS 1", p.Payload, p.Dup, p.QoS)
		}
	}
	c.ExpectNothing(quiet)
}

// TestReplayNotBeforeSession: a replayed message published before a
// session began reaches it neither rebuilt pending from a dead node's
// records (ReplayPending: when it began on that node, not here) nor on a
// node that comes back (DeliverReplayed): "late", started with Clean
// Start after the message, takes none of it; "early" does, and both take
// a message whose time is not known.
func TestReplayNotBeforeSession(t *testing.T) {
	st := core.NewMemStore()
	a := newServer(t, core.Options{}, core.Config{Store: st})
	subscriber := func(id string) {
		c := client(t, a, codec.V5, id, func(p *codec.Connect) { p.Props.SetNum(codec.PropSessionExpiry, 60) })
		c.Subscribe(1, "r/#")
		c.Close()
		waitFor(t, id+" offline", func() bool { info, ok := a.Client(id); return ok && !info.Connected })
	}
	subscriber("early")
	published := time.Now()
	subscriber("late")

	b := newServer(t, core.Options{}, core.Config{})
	for _, id := range []string{"early", "late"} {
		if _, err := b.PendSession(id, recordsOf(t, st, id).session); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		id   string
		at   time.Time
		want int
	}{
		{"late", published, 0},
		{"early", published, 1},
		{"late", time.Time{}, 1},
	} {
		if n := b.ReplayPending(map[string]bool{c.id: true}, codec.Message{Topic: "r/x", Payload: []byte("m"), QoS: 1, From: "p"}, c.at); n != c.want {
			t.Errorf("ReplayPending into %s of a message published at %v: %d deliveries, want %d", c.id, c.at, n, c.want)
		}
	}

	if n := a.DeliverReplayed(codec.Message{Topic: "r/x", Payload: []byte("before late"), QoS: 1, From: "p"}, published); n != 1 {
		t.Errorf("DeliverReplayed before late began: %d deliveries, want 1", n)
	}
	if n := a.DeliverReplayed(codec.Message{Topic: "r/x", Payload: []byte("unknown"), QoS: 1, From: "p"}, time.Time{}); n != 2 {
		t.Errorf("DeliverReplayed at an unknown time: %d deliveries, want 2", n)
	}
	late := resume(t, a, "late")
	wantPayloads(t, late.Recv(1), "unknown")
	late.ExpectNothing(quiet)
	wantPayloads(t, resume(t, a, "early").Recv(2), "before late", "unknown")
}
