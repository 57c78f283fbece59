package core_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// faultStore wraps a MemStore: it can refuse messages for lack of space,
// fail Sync, hold Sync until released, and count Syncs.
type faultStore struct {
	*core.MemStore
	noSpace  atomic.Bool
	syncFail atomic.Bool
	syncs    atomic.Int64
	mu       sync.Mutex
	gate     chan struct{} // while non-nil, Sync waits for it to close
}

func newFaultStore() *faultStore { return &faultStore{MemStore: core.NewMemStore()} }

func (f *faultStore) PutMessage(id string, seq uint64, rec []byte) error {
	if f.noSpace.Load() {
		return fmt.Errorf("test store full: %w", syscall.ENOSPC)
	}
	return f.MemStore.PutMessage(id, seq, rec)
}

func (f *faultStore) Sync() error {
	f.syncs.Add(1)
	f.mu.Lock()
	g := f.gate
	f.mu.Unlock()
	if g != nil {
		<-g
	}
	if f.syncFail.Load() {
		return errors.New("test store: I/O error")
	}
	return nil
}

func (f *faultStore) hold() {
	f.mu.Lock()
	f.gate = make(chan struct{})
	f.mu.Unlock()
}

func (f *faultStore) release() {
	f.mu.Lock()
	close(f.gate)
	f.gate = nil
	f.mu.Unlock()
}

// offlineSub leaves a persistent session subscribed to filter at qos.
func offlineSub(t *testing.T, srv *core.Server, v byte, id, filter string, qos byte) {
	t.Helper()
	c := client(t, srv, v, id, persistent)
	c.Subscribe(qos, filter)
	c.Close()
	waitFor(t, id+" offline", func() bool { return srv.Stats().Connected == 0 })
}

// TestAckWaitsForSync: PUBACK for a message stored for a persistent session
// goes only once Sync has returned.
func TestAckWaitsForSync(t *testing.T) {
	st := newFaultStore()
	srv := newServer(t, core.Options{}, core.Config{Store: st})
	offlineSub(t, srv, codec.V5, "sub", "t", 1)
	pub := client(t, srv, codec.V5, "pub")
	st.hold()
	pub.Send(&codec.Publish{Topic: []byte("t"), Payload: []byte("m"), QoS: 1, PacketID: 1})
	pub.ExpectNothing(quiet)
	st.release()
	pub.ExpectAck(codec.PUBACK, 1)
}

// TestGroupCommitOneSyncPerBurst: a burst of QoS 1 messages written in one
// go is acknowledged after far fewer Syncs than messages.
func TestGroupCommitOneSyncPerBurst(t *testing.T) {
	st := newFaultStore()
	srv := newServer(t, core.Options{}, core.Config{Store: st})
	offlineSub(t, srv, codec.V311, "sub", "t", 1)
	pub := client(t, srv, codec.V311, "pub")
	before := st.syncs.Load()
	const n = 500
	var burst []byte
	for i := range n {
		burst = (&codec.Publish{Topic: []byte("t"), Payload: []byte("m"), QoS: 1, PacketID: uint16(i + 1)}).Append(burst, codec.V311)
	}
	go func() { _ = pub.Write(burst) }()
	for i := range n {
		pub.ExpectAck(codec.PUBACK, uint16(i+1))
	}
	syncs := st.syncs.Load() - before
	t.Logf("%d messages, %d Syncs", n, syncs)
	if syncs == 0 || syncs > n/4 {
		t.Errorf("%d Syncs for %d messages, want a few (one per read burst, or per 256)", syncs, n)
	}
}

// TestNoStoreWriteNoSync: QoS 1 traffic between clean sessions never asks
// the store to sync.
func TestNoStoreWriteNoSync(t *testing.T) {
	st := newFaultStore()
	srv := newServer(t, core.Options{}, core.Config{Store: st})
	sub := client(t, srv, codec.V5, "sub")
	sub.Subscribe(1, "t")
	pub := client(t, srv, codec.V5, "pub")
	before := st.syncs.Load()
	for range 10 {
		pub.Pub("t", "m", 1)
	}
	sub.Recv(10)
	if n := st.syncs.Load() - before; n != 0 {
		t.Errorf("%d Syncs for traffic that wrote nothing", n)
	}
}

// TestDiskFull: with the store refusing messages, an MQTT 5 publisher gets
// Quota Exceeded, an MQTT 3.1.1 one is disconnected without its PUBACK,
// and traffic that needs no store goes on.
func TestDiskFull(t *testing.T) {
	st := newFaultStore()
	srv := newServer(t, core.Options{}, core.Config{Store: st})
	offlineSub(t, srv, codec.V5, "durable", "t", 1)
	live := client(t, srv, codec.V5, "live")
	live.Subscribe(1, "t")
	st.noSpace.Store(true)

	pub := client(t, srv, codec.V5, "pub5")
	if rc := pub.Publish(&codec.Publish{Topic: []byte("t"), Payload: []byte("a"), QoS: 1}); rc != codec.QuotaExceeded {
		t.Errorf("MQTT 5 PUBACK %s, want Quota Exceeded", rc)
	}
	if rc := pub.Publish(&codec.Publish{Topic: []byte("t"), Payload: []byte("b"), QoS: 2}); rc != codec.QuotaExceeded {
		t.Errorf("MQTT 5 PUBREC %s, want Quota Exceeded", rc)
	}
	wantPayloads(t, live.Recv(2), "a", "b") // the non-persistent subscriber still gets them

	p3 := client(t, srv, codec.V311, "pub3")
	p3.Send(&codec.Publish{Topic: []byte("t"), Payload: []byte("c"), QoS: 1, PacketID: 1})
	p3.ExpectClosed()
	live.Recv(1)

	pub.Pub("other", "x", 1) // nothing persistent: acknowledged as usual
	if n := srv.Stats().Dropped["quota_exceeded"]; n != 3 {
		t.Errorf("quota_exceeded = %d, want 3", n)
	}

	st.noSpace.Store(false)
	if rc := pub.Publish(&codec.Publish{Topic: []byte("t"), Payload: []byte("d"), QoS: 1}); rc != codec.Success {
		t.Errorf("PUBACK %s once the store has room, want Success", rc)
	}
	live.Recv(1)
	pub.Close()
	d := client(t, srv, codec.V5, "durable", persistent)
	wantPayloads(t, d.Recv(1), "d")
}

// TestSyncFailure: a failed Sync turns the held acknowledgements into
// refusals (MQTT 5) or a disconnect (MQTT 3.1.1).
func TestSyncFailure(t *testing.T) {
	st := newFaultStore()
	srv := newServer(t, core.Options{}, core.Config{Store: st})
	offlineSub(t, srv, codec.V5, "durable", "t", 1)
	st.syncFail.Store(true)
	pub := client(t, srv, codec.V5, "pub5")
	if rc := pub.Publish(&codec.Publish{Topic: []byte("t"), Payload: []byte("a"), QoS: 1}); rc != codec.UnspecifiedError {
		t.Errorf("PUBACK %s after a failed Sync, want Unspecified error", rc)
	}
	p3 := client(t, srv, codec.V311, "pub3")
	p3.Send(&codec.Publish{Topic: []byte("t"), Payload: []byte("b"), QoS: 1, PacketID: 1})
	p3.ExpectClosed()
}

// TestQueueQuota: a persistent session's queue bounded in messages and in
// bytes refuses QoS 1 beyond it with Quota Exceeded, counted.
func TestQueueQuota(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts core.Options
	}{
		{"messages", core.Options{MaxQueued: 3}},
		{"bytes", core.Options{MaxQueuedBytes: 3 * int64(len("t")+len("payload"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, tc.opts, core.Config{})
			offlineSub(t, srv, codec.V5, "sub", "t", 1)
			pub := client(t, srv, codec.V5, "pub")
			for i := range 4 {
				want := codec.Success
				if i == 3 {
					want = codec.QuotaExceeded
				}
				if rc := pub.Publish(&codec.Publish{Topic: []byte("t"), Payload: []byte("payload"), QoS: 1}); rc != want {
					t.Errorf("message %d: PUBACK %s, want %s", i, rc, want)
				}
			}
			if n := srv.Stats().Dropped["quota_exceeded"]; n != 1 {
				t.Errorf("quota_exceeded = %d, want 1", n)
			}
			sub := client(t, srv, codec.V5, "sub", persistent)
			sub.Recv(3)
			sub.ExpectNothing(quiet)
		})
	}
}

// TestQueueDropsOldestQoS0First: a full queue makes room for a QoS 1
// message by dropping its oldest QoS 0 one.
func TestQueueDropsOldestQoS0First(t *testing.T) {
	srv := newServer(t, core.Options{MaxQueued: 3, MaxInflight: 1}, core.Config{})
	sub := client(t, srv, codec.V5, "sub", persistent)
	sub.Subscribe(1, "t")
	pub := client(t, srv, codec.V5, "pub")
	// One QoS 1 message in flight, unacknowledged, keeps the rest queued.
	pub.Pub("t", "first", 1)
	first := sub.ExpectPublish()
	pub.Pub("t", "q1-a", 1) // waits for the window, and the QoS 0 ones behind it
	pub.Pub("t", "q0-a", 0)
	pub.Pub("t", "q0-b", 0)
	if rc := pub.Publish(&codec.Publish{Topic: []byte("t"), Payload: []byte("q1-b"), QoS: 1}); rc != codec.Success {
		t.Fatalf("PUBACK %s: want room made by dropping QoS 0", rc)
	}
	sub.Ack(first)
	wantPayloads(t, sub.Recv(3), "q1-a", "q0-b", "q1-b")
	if n := srv.Stats().Dropped["queue_full"]; n != 1 {
		t.Errorf("queue_full = %d, want 1 (the oldest QoS 0)", n)
	}
}

// TestQueueDropsOldestQoS0Repeatedly: a queue that stays full drops its
// QoS 0 messages oldest first, one per new message, passing over the holes
// left by earlier drops and over the QoS 1 messages it must keep.
func TestQueueDropsOldestQoS0Repeatedly(t *testing.T) {
	srv := newServer(t, core.Options{MaxQueued: 4, MaxInflight: 1}, core.Config{})
	sub := client(t, srv, codec.V5, "sub", persistent)
	sub.Subscribe(1, "t")
	pub := client(t, srv, codec.V5, "pub")
	pub.Pub("t", "first", 1)
	first := sub.ExpectPublish() // unacknowledged: the rest stays queued
	for _, m := range []struct {
		payload string
		qos     byte
	}{{"q1-a", 1}, {"q0-a", 0}, {"q0-b", 0}, {"q0-c", 0}, {"q0-d", 0}, {"q1-b", 1}, {"q0-e", 0}, {"q0-f", 0}, {"q0-g", 0}} {
		if rc := pub.Publish(&codec.Publish{Topic: []byte("t"), Payload: []byte(m.payload), QoS: m.qos}); m.qos > 0 && rc != codec.Success {
			t.Fatalf("PUBACK %s for %s: want room made by dropping QoS 0", rc, m.payload)
		}
	}
	pub.Send(&codec.Pingreq{})
	expect[*codec.Pingresp](pub)
	sub.Ack(first)
	wantPayloads(t, sub.Recv(4), "q1-a", "q1-b", "q0-f", "q0-g")
	if n := srv.Stats().Dropped["queue_full"]; n != 5 {
		t.Errorf("queue_full = %d, want 5 (q0-a to q0-e)", n)
	}
}

// restart shuts srv down and starts a new Server on the same store, as a
// restart of the process would.
func restart(t *testing.T, srv *core.Server, opts core.Options, st core.Store) *core.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	return newServer(t, opts, core.Config{Store: st})
}

// TestInboundQoS2SurvivesRestart: a QoS 2 packet id awaiting PUBREL is
// still known after a restart: a resent PUBLISH is not delivered twice and
// PUBREL completes normally.
func TestInboundQoS2SurvivesRestart(t *testing.T) {
	st := core.NewMemStore()
	srv := newServer(t, core.Options{}, core.Config{Store: st})
	offlineSub(t, srv, codec.V5, "sub", "t", 2)
	pub := client(t, srv, codec.V5, "pub", persistent)
	pub.Send(&codec.Publish{Topic: []byte("t"), Payload: []byte("once"), QoS: 2, PacketID: 7})
	pub.ExpectAck(codec.PUBREC, 7)
	pub.Close()
	srv = restart(t, srv, core.Options{}, st)

	pub = client(t, srv, codec.V5, "pub", persistent)
	pub.Send(&codec.Publish{Topic: []byte("t"), Payload: []byte("once"), QoS: 2, PacketID: 7, Dup: true})
	pub.ExpectAck(codec.PUBREC, 7)
	pub.Send(&codec.Ack{Kind: codec.PUBREL, PacketID: 7})
	if a := pub.ExpectAck(codec.PUBCOMP, 7); a.ReasonCode != codec.Success {
		t.Errorf("PUBCOMP %s, want Success: the packet id was forgotten", a.ReasonCode)
	}
	sub := client(t, srv, codec.V5, "sub", persistent)
	wantPayloads(t, sub.Recv(1), "once")
	sub.ExpectNothing(quiet)
}

// TestOutboundQoS2SurvivesRestart: a QoS 2 delivery sent before a restart
// is resent with the same packet id and DUP; once PUBREC came, only PUBREL.
func TestOutboundQoS2SurvivesRestart(t *testing.T) {
	st := core.NewMemStore()
	opts := core.Options{}
	srv := newServer(t, opts, core.Config{Store: st})
	sub := client(t, srv, codec.V5, "sub", persistent)
	sub.Subscribe(2, "t")
	pub := client(t, srv, codec.V5, "pub")
	pub.Pub("t", "a", 2)
	pub.Pub("t", "b", 2)
	a := sub.ExpectPublish()
	b := sub.ExpectPublish()
	sub.Send(&codec.Ack{Kind: codec.PUBREC, PacketID: b.PacketID})
	sub.ExpectAck(codec.PUBREL, b.PacketID)
	sub.Close()
	pub.Close()
	srv = restart(t, srv, opts, st)

	sub = client(t, srv, codec.V5, "sub", persistent)
	p := sub.ExpectPublish()
	if p.PacketID != a.PacketID || !p.Dup || string(p.Payload) != "a" {
		t.Errorf("resent %q id %d dup %v, want %q id %d with DUP", p.Payload, p.PacketID, p.Dup, "a", a.PacketID)
	}
	sub.ExpectAck(codec.PUBREL, b.PacketID)
}

// TestDelayedWillSurvivesRestart: a will waiting for its delay is
// published by the restarted server at the right time.
func TestDelayedWillSurvivesRestart(t *testing.T) {
	st := core.NewMemStore()
	srv := newServer(t, core.Options{}, core.Config{Store: st})
	offlineSub(t, srv, codec.V5, "watcher", "will/#", 1)
	w := client(t, srv, codec.V5, "dying", persistent, func(p *codec.Connect) {
		p.WillFlag, p.WillQoS, p.WillTopic, p.WillPayload = true, 1, []byte("will/dying"), []byte("gone")
		p.WillProps.SetNum(codec.PropWillDelay, 1)
	})
	w.Close() // abrupt: the will is due in 1s
	waitFor(t, "disconnect", func() bool { return srv.Stats().Connected == 0 })
	start := time.Now()
	srv = restart(t, srv, core.Options{}, st)
	watcher := client(t, srv, codec.V5, "watcher", persistent)
	wantPayloads(t, watcher.Recv(1), "gone")
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("will published after %v, before its 1s delay", d)
	}
}

// TestRestoreSweepsExpired: a session whose expiry passed while the server
// was down is not restored.
func TestRestoreSweepsExpired(t *testing.T) {
	st := core.NewMemStore()
	srv := newServer(t, core.Options{}, core.Config{Store: st})
	c := client(t, srv, codec.V5, "brief", func(p *codec.Connect) {
		p.CleanStart = false
		p.Props.SetNum(codec.PropSessionExpiry, 1)
	})
	c.Subscribe(1, "t")
	c.Close()
	waitFor(t, "disconnect", func() bool { return srv.Stats().Connected == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	srv = newServer(t, core.Options{}, core.Config{Store: st})
	if n := srv.Stats().Sessions; n != 0 {
		t.Errorf("%d sessions restored, want the expired one swept", n)
	}
	rep, err := core.CheckStore(st)
	if err != nil || rep.Sessions != 0 {
		t.Errorf("store after the sweep: %+v, %v; want no session", rep, err)
	}
}

// crashStore is a MemStore that loses, in a crash, every write since its
// last Sync: crash returns a new store holding only what was synced, as
// the disk would after kill -9 in sync mode.
type crashStore struct {
	*core.MemStore
	mu      sync.Mutex
	pending []func(core.Store) error
	synced  []func(core.Store) error
}

func newCrashStore() *crashStore { return &crashStore{MemStore: core.NewMemStore()} }

// log applies op to the live store and keeps it until the next Sync.
func (c *crashStore) log(op func(core.Store) error) error {
	if err := op(c.MemStore); err != nil {
		return err
	}
	c.mu.Lock()
	c.pending = append(c.pending, op)
	c.mu.Unlock()
	return nil
}

func (c *crashStore) Sync() error {
	c.mu.Lock()
	c.synced = append(c.synced, c.pending...)
	c.pending = nil
	c.mu.Unlock()
	return c.MemStore.Sync()
}

// crash returns what survives a crash now.
func (c *crashStore) crash(t *testing.T) *core.MemStore {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	st := core.NewMemStore()
	for _, op := range c.synced {
		if err := op(st); err != nil {
			t.Fatalf("replaying the synced writes: %v", err)
		}
	}
	return st
}

func (c *crashStore) PutSession(id string, rec []byte) error {
	rec = slices.Clone(rec)
	return c.log(func(s core.Store) error { return s.PutSession(id, rec) })
}
func (c *crashStore) DeleteSession(id string) error {
	return c.log(func(s core.Store) error { return s.DeleteSession(id) })
}
func (c *crashStore) PutMessage(id string, seq uint64, rec []byte) error {
	rec = slices.Clone(rec)
	return c.log(func(s core.Store) error { return s.PutMessage(id, seq, rec) })
}
func (c *crashStore) UpdateMessage(id string, seq uint64, rec []byte) error {
	rec = slices.Clone(rec)
	return c.log(func(s core.Store) error { return s.UpdateMessage(id, seq, rec) })
}
func (c *crashStore) DeleteMessage(id string, seq uint64) error {
	return c.log(func(s core.Store) error { return s.DeleteMessage(id, seq) })
}
func (c *crashStore) PutRetained(topic string, rec []byte) error {
	rec = slices.Clone(rec)
	return c.log(func(s core.Store) error { return s.PutRetained(topic, rec) })
}
func (c *crashStore) DeleteRetained(topic string) error {
	return c.log(func(s core.Store) error { return s.DeleteRetained(topic) })
}
func (c *crashStore) PutInbound(id string, rec []byte) error {
	rec = slices.Clone(rec)
	return c.log(func(s core.Store) error { return s.PutInbound(id, rec) })
}
func (c *crashStore) DeleteInbound(id string) error {
	return c.log(func(s core.Store) error { return s.DeleteInbound(id) })
}
func (c *crashStore) PutWill(id string, rec []byte) error {
	rec = slices.Clone(rec)
	return c.log(func(s core.Store) error { return s.PutWill(id, rec) })
}
func (c *crashStore) DeleteWill(id string) error {
	return c.log(func(s core.Store) error { return s.DeleteWill(id) })
}

// TestDelayedWillDurable: a delayed will is on disk (synced) from CONNACK
// on: whether the broker dies while its client is connected or while the
// will waits for its delay, the restarted broker publishes it once the
// delay has run; a normal DISCONNECT removes it durably.
func TestDelayedWillDurable(t *testing.T) {
	withWill := func(p *codec.Connect) {
		p.WillFlag, p.WillQoS, p.WillTopic, p.WillPayload = true, 1, []byte("will/"+string(p.ClientID)), []byte("gone")
		p.WillProps.SetNum(codec.PropWillDelay, 1)
	}
	for _, tc := range []struct {
		name  string
		end   func(c *tconn) // how the client's connection ends before the crash; nil: it does not
		wills int
	}{
		{"crash while connected", nil, 1},
		{"crash during the delay", func(c *tconn) { c.Close() }, 1},
		{"normal disconnect, then crash", func(c *tconn) { c.Send(&codec.Disconnect{}); c.ExpectClosed() }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newCrashStore()
			srv := newServer(t, core.Options{}, core.Config{Store: st})
			offlineSub(t, srv, codec.V5, "watcher", "will/#", 1)
			w := client(t, srv, codec.V5, "dying", persistent, withWill)
			if tc.end != nil {
				tc.end(w)
				waitFor(t, "disconnect", func() bool { return srv.Stats().Connected == 0 })
			}
			disk := st.crash(t)
			shutdown(t, srv) // what it does now is lost with the crash
			srv = newServer(t, core.Options{}, core.Config{Store: disk})
			watcher := client(t, srv, codec.V5, "watcher", persistent)
			if tc.wills == 0 {
				watcher.ExpectNothing(1500 * time.Millisecond)
				return
			}
			wantPayloads(t, watcher.Recv(1), "gone")
		})
	}
}
