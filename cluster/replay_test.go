package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// PendSession takes the session record as the filters of the session's
// plain subscriptions, space-separated, and returns them.
func (f *fakeLocal) PendSession(clientID string, session []byte) ([]string, error) {
	f.mu.Lock()
	f.pending = append(f.pending, clientID)
	f.mu.Unlock()
	return strings.Fields(string(session)), nil
}

// ReplayPending records "topic payload" on replayedLog, and published on
// replayedAt.
func (f *fakeLocal) ReplayPending(_ map[string]bool, m codec.Message, published time.Time) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replayedLog = append(f.replayedLog, m.Topic+" "+string(m.Payload))
	f.replayedAt = append(f.replayedAt, published)
	return 1
}

// ringSeqs are the numbers of the messages in nd's ring, in order.
func ringSeqs(nd *testNode) []uint64 {
	nd.replay.ring.mu.Lock()
	defer nd.replay.ring.mu.Unlock()
	var seqs []uint64
	for _, m := range nd.replay.ring.msgs[nd.replay.ring.head:] {
		seqs = append(seqs, m.seq)
	}
	return seqs
}

// TestReplay: the session of a node gone ("gone": its records and marks
// put in the stream here) rebuilt on n2 gets, before its records go in,
// what each node forwarded on its filters after the gone node's mark for
// that node (n1 answering over NATS, n2 from its own ring), in number
// order, and nothing else: not what the mark covers, nor other topics,
// nor QoS 0, each with the time its node forwarded it. A node's marks
// follow what it routes.
func TestReplay(t *testing.T) {
	nodes := startNodesWith(t, freePorts(t, 2), 2, func(o *Options) { o.SessionReplicas = 2 })
	n1, n2 := nodes[0], nodes[1]
	waitReady(t, n1, n2)
	n2.local.restored = make(chan restoredSession, 1)

	// n2 routes n1's messages on m/#: its mark for n1 follows them.
	n2.Interest("", "m/#", true)
	waitInterest(t, n1, "m/probe", n2)
	for i := range 3 {
		n1.Forward(codec.Message{Topic: "m/" + strconv.Itoa(i), Payload: []byte("x"), QoS: 1, From: "p"}, nil)
	}
	for range 3 {
		n2.local.next(t)
	}
	st := n2.state.Load()
	last := ringSeqs(n1)
	mqtttest.WaitWithin(t, 5*time.Second, "n2's mark for n1", func() bool {
		marks, err := n2.rep.readMarks(st, "n2")
		return err == nil && marks["n1"] == last[len(last)-1]
	})

	before := time.Now()
	for i := range 4 {
		n1.Forward(codec.Message{Topic: fmt.Sprintf("a/%d", i), Payload: []byte("n1"), QoS: 1, From: "p"}, nil)
	}
	n1.Forward(codec.Message{Topic: "b/1", Payload: []byte("n1"), QoS: 1, From: "p"}, nil)
	n1.Forward(codec.Message{Topic: "a/q0", Payload: []byte("n1"), From: "p"}, nil)
	n2.Forward(codec.Message{Topic: "a/9", Payload: []byte("n2"), QoS: 2, From: "p"}, nil)
	after := time.Now()
	seqs := ringSeqs(n1)
	mark := seqs[len(seqs)-4] // a/1: a/0 and a/1 are in the gone node's records
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for subj, data := range map[string]string{
		repPrefix(n2.opts.Name, "gone") + key("x") + ".s":             "a/# c/#",
		repPrefix(n2.opts.Name, "gone") + markKind + ".n1":            strconv.FormatUint(mark, 36),
		repPrefix(n2.opts.Name, "gone") + markKind + ".elsewhere":     "1",
		repPrefix(n2.opts.Name, "gone") + key("x") + "." + msgKind(1): "M1",
	} {
		if _, err := st.js.PublishMsg(ctx, &nats.Msg{Subject: subj, Data: []byte(data)}); err != nil {
			t.Fatal(err)
		}
	}
	ok, err := n2.replay.restoreFromReplica(st, "gone", "x", false)
	if !ok || err != nil {
		t.Fatalf("restore: %v, %v", ok, err)
	}
	r := <-n2.local.restored
	if r.id != "x" || !slices.Equal(r.msgs, []string{"M1"}) {
		t.Errorf("restored %+v", r)
	}
	n2.local.mu.Lock()
	got, at := n2.local.replayedLog, n2.local.replayedAt
	n2.local.mu.Unlock()
	if want := []string{"a/2 n1", "a/3 n1", "a/9 n2"}; !slices.Equal(got, want) {
		t.Errorf("replayed %q, want %q", got, want)
	}
	for i, p := range at {
		if p.Before(before) || p.After(after) {
			t.Errorf("%s published at %v, want between %v and %v", got[i], p, before, after)
		}
	}
	if n := n2.Stats().Replayed; n != 3 {
		t.Errorf("Replayed = %d, want 3", n)
	}
}

// TestReplayRingBounds: the ring keeps at most ReplayMaxBytes, and says
// when it no longer reaches back to a mark.
func TestReplayRingBounds(t *testing.T) {
	nodes := startNodesWith(t, freePorts(t, 1), 1, func(o *Options) { o.SessionReplicas = 2; o.ReplayMaxBytes = 1 << 20 })
	nd := nodes[0]
	payload := make([]byte, 64<<10)
	for i := range 40 {
		nd.Forward(codec.Message{Topic: "a/" + strconv.Itoa(i), Payload: payload, QoS: 1, From: "p"}, nil)
	}
	nd.replay.ring.mu.Lock()
	bytes, n := nd.replay.ring.bytes, len(nd.replay.ring.msgs)-nd.replay.ring.head
	nd.replay.ring.mu.Unlock()
	if bytes > 1<<20 || n >= 40 || n == 0 {
		t.Fatalf("ring holds %d messages in %d bytes", n, bytes)
	}
	seqs := ringSeqs(nd)
	if msgs, whole, _ := nd.replay.since(seqs[0]-1, []string{"#"}); !whole || len(msgs) != n {
		t.Errorf("since the oldest kept: %d messages, whole %v", len(msgs), whole)
	}
	if msgs, whole, _ := nd.replay.since(seqs[0]-2, []string{"#"}); whole || len(msgs) != n {
		t.Errorf("since one gone: %d messages, whole %v", len(msgs), whole)
	}
	if msgs, _, _ := nd.replay.since(seqs[0]-1, []string{"b/#"}); len(msgs) != 0 {
		t.Errorf("other filter: %d messages", len(msgs))
	}
}

// DeliverReplayed records as ReplayPending does.
func (f *fakeLocal) DeliverReplayed(m codec.Message, published time.Time) int {
	return f.ReplayPending(nil, m, published)
}

// BenchmarkForwardRing: what keeping a QoS 1 message in the replay ring
// adds to Forward (QoS 0 is not kept), on one node with no interest
// elsewhere, 64-byte payloads.
func BenchmarkForwardRing(b *testing.B) {
	o := Options{Node: "b1", Embedded: EmbeddedOptions{Listen: "127.0.0.1:0", ClientListen: "127.0.0.1:0", Dir: b.TempDir()}}
	c, err := New(o, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	c.Start(newFakeLocal())
	payload := make([]byte, 64)
	for _, qos := range []byte{0, 1} {
		b.Run(fmt.Sprintf("qos%d", qos), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.Forward(codec.Message{Topic: "bench/topic", Payload: payload, QoS: qos, From: "p"}, nil)
			}
		})
	}
}

// TestReplayLarge: a replay of many more messages than a channel holds
// arrives whole and in order (NATS drops what a full channel subscription
// cannot take).
func TestReplayLarge(t *testing.T) {
	nodes := startNodesWith(t, freePorts(t, 2), 2, func(o *Options) { o.SessionReplicas = 2 })
	n1, n2 := nodes[0], nodes[1]
	waitReady(t, n1, n2)
	n2.local.restored = make(chan restoredSession, 1)
	const n = 20000
	for i := range n {
		n1.Forward(codec.Message{Topic: "big/x", Payload: []byte(strconv.Itoa(i)), QoS: 1, From: "p"}, nil)
	}
	st := n2.state.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := st.js.PublishMsg(ctx, &nats.Msg{Subject: repPrefix(n2.opts.Name, "gone") + key("y") + ".s", Data: []byte("big/#")}); err != nil {
		t.Fatal(err)
	}
	if ok, err := n2.replay.restoreFromReplica(st, "gone", "y", false); !ok || err != nil {
		t.Fatalf("restore: %v, %v", ok, err)
	}
	<-n2.local.restored
	n2.local.mu.Lock()
	got := n2.local.replayedLog
	n2.local.mu.Unlock()
	if len(got) != n {
		t.Fatalf("replayed %d of %d", len(got), n)
	}
	for i, g := range got {
		if g != "big/x "+strconv.Itoa(i) {
			t.Fatalf("replayed[%d] = %q", i, g)
		}
	}
}

// ageRing makes the first n messages of nd's ring older than its replay
// window, as if that time had passed with nothing forwarded since.
func ageRing(nd *testNode, n int) {
	nd.replay.ring.mu.Lock()
	defer nd.replay.ring.mu.Unlock()
	for i := range n {
		nd.replay.ring.msgs[nd.replay.ring.head+i].at -= int64(nd.opts.ReplayWindow + time.Second)
	}
}

// TestReplayRingAge: a message older than ReplayWindow is given to no
// replay, over NATS or from the node's own ring, though nothing newer was
// forwarded to push it out; the ring then no longer reaches back past it.
func TestReplayRingAge(t *testing.T) {
	nodes := startNodesWith(t, freePorts(t, 2), 2, func(o *Options) { o.SessionReplicas = 2 })
	n1, n2 := nodes[0], nodes[1]
	waitReady(t, n1, n2) // and so each node's replay subscription is known to the other's server
	for i := range 3 {
		n1.Forward(codec.Message{Topic: "a/" + strconv.Itoa(i), Payload: []byte("n1"), QoS: 1, From: "p"}, nil)
	}
	seqs := ringSeqs(n1)
	ageRing(n1, 2)
	msgs, whole, _ := n1.replay.since(seqs[0]-1, []string{"a/#"})
	if len(msgs) != 1 || whole {
		t.Errorf("own ring since before a/0: %d messages, whole %v; want a/2 only, not whole", len(msgs), whole)
	}
	if msgs, whole, _ := n1.replay.since(seqs[1], []string{"a/#"}); len(msgs) != 1 || !whole {
		t.Errorf("own ring since a/1: %d messages, whole %v; want a/2, whole", len(msgs), whole)
	}
	got, _ := n2.replay.fetchReplay("gone", []string{"a/#"}, map[string]uint64{"n1": seqs[0] - 1})
	var topics []string
	for _, m := range got {
		topics = append(topics, m.msg.Topic)
	}
	if !slices.Equal(topics, []string{"a/2"}) {
		t.Errorf("replayed over NATS %q, want a/2 only", topics)
	}
}

// TestReplayMarkAdvances: once what a replay brought is in the sessions
// rebuilt here, this node's marks cover it, though it routed none of it:
// those sessions rebuilt again later from this node's records do not get
// it a second time.
func TestReplayMarkAdvances(t *testing.T) {
	nodes := startNodesWith(t, freePorts(t, 2), 2, func(o *Options) { o.SessionReplicas = 2 })
	n1, n2 := nodes[0], nodes[1]
	waitReady(t, n1, n2)
	n1.local.restored = make(chan restoredSession, 1)
	n2.local.restored = make(chan restoredSession, 1)
	for i := range 3 {
		n1.Forward(codec.Message{Topic: "a/" + strconv.Itoa(i), Payload: []byte("n1"), QoS: 1, From: "p"}, nil)
	}
	seqs := ringSeqs(n1)
	st := n2.state.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	putSession := func(node string) {
		t.Helper()
		subj := repPrefix(n2.opts.Name, node) + key("x") + ".s"
		if _, err := st.js.PublishMsg(ctx, &nats.Msg{Subject: subj, Data: []byte("a/#")}); err != nil {
			t.Fatal(err)
		}
	}
	putSession("gone") // no marks: the whole rings
	if ok, err := n2.replay.restoreFromReplica(st, "gone", "x", false); !ok || err != nil {
		t.Fatalf("restore on n2: %v, %v", ok, err)
	}
	<-n2.local.restored
	n2.local.mu.Lock()
	first := len(n2.local.replayedLog)
	n2.local.mu.Unlock()
	if first != 3 {
		t.Fatalf("first rebuild: %d replayed, want 3", first)
	}
	mqtttest.WaitWithin(t, 5*time.Second, "n2's mark for n1", func() bool {
		marks, err := n2.rep.readMarks(st, "n2")
		return err == nil && marks["n1"] == seqs[len(seqs)-1]
	})

	// n2's records of the session (its own: the test's fake broker writes
	// none), read as if n2 had died.
	putSession("n2")
	if ok, err := n1.replay.restoreFromReplica(n1.state.Load(), "n2", "x", false); !ok || err != nil {
		t.Fatalf("restore on n1: %v, %v", ok, err)
	}
	<-n1.local.restored
	n1.local.mu.Lock()
	again := n1.local.replayedLog
	n1.local.mu.Unlock()
	if len(again) != 0 {
		t.Errorf("second rebuild replayed %q again", again)
	}
}

// TestReplayRejoinMark: a node that comes back (session replicas 1) and
// replays into its sessions what was published while it was down saves
// marks that cover it, though it routed none of it: back again after
// another crash, it does not replay the same messages a second time.
func TestReplayRejoinMark(t *testing.T) {
	nodes := startNodesWith(t, freePorts(t, 2), 2, func(o *Options) { o.MarksFile = filepath.Join(o.Embedded.Dir, "marks.json") })
	n1, n2 := nodes[0], nodes[1]
	waitReady(t, n1, n2)
	for i := range 3 {
		n1.Forward(codec.Message{Topic: "a/" + strconv.Itoa(i), Payload: []byte("n1"), QoS: 1, From: "p"}, nil)
	}
	seqs := ringSeqs(n1)
	// n2's sessions (a/#) come back from its store; its saved mark for n1
	// is before a/0. Nothing is routed to n2 meanwhile: rejoin runs
	// before routeLoop routes, as at Start.
	n2.Interest("", "a/#", true)
	n2.replay.rejoin(map[string]uint64{"n1": seqs[0] - 1})
	n2.local.mu.Lock()
	replayed := len(n2.local.replayedLog)
	n2.local.mu.Unlock()
	if replayed != 3 {
		t.Fatalf("rejoin replayed %d, want 3", replayed)
	}
	mqtttest.WaitWithin(t, 5*time.Second, "n2's saved mark for n1", func() bool {
		b, err := os.ReadFile(n2.opts.MarksFile)
		var marks map[string]uint64
		return err == nil && json.Unmarshal(b, &marks) == nil && marks["n1"] == seqs[len(seqs)-1]
	})
	n2.replay.rejoin(n2.rep.loadMarks())
	n2.local.mu.Lock()
	again := n2.local.replayedLog[replayed:]
	n2.local.mu.Unlock()
	if len(again) != 0 {
		t.Errorf("back again, replayed %q a second time", again)
	}
}

// TestMarkNeverMovesBack: a replay's last number below what was routed
// here since (markReplayed after routeLoop went on) leaves the mark.
func TestMarkNeverMovesBack(t *testing.T) {
	r := newReplica(nil)
	r.mark("n1", 5)
	r.mark("n1", 3)
	r.queued++ // a record queued: the next mark waits for it
	r.mark("n1", 4)
	if ms := r.marks["n1"]; len(ms) != 1 || ms[0].seq != 5 {
		t.Fatalf("marks %+v, want 5 alone", ms)
	}
	r.marks["n1"], r.written["n1"] = nil, 5 // written to the stream
	r.mark("n1", 4)
	if ms := r.marks["n1"]; len(ms) != 0 {
		t.Fatalf("marks %+v after 5 was written, want none", ms)
	}
}
