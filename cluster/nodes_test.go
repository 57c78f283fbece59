package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/xmq-io/xmq/internal/mqtttest"
)

// TestNodeTableTransitions: a peer silent for three intervals becomes
// unreachable with one warning naming it, is counted once however long
// it stays so, and is logged once when heard again; a leaving heartbeat
// removes it; a heartbeat that does not decode, or with this node's
// name, changes nothing.
func TestNodeTableTransitions(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	c, n := tableNode(Options{}, zap.New(core))
	t0 := time.Unix(1_800_000_000, 0)
	c.heard(n, beat(NodeStatus{Node: "n2", Version: "v1", Clients: 3, MessagesIn: 10}), t0)
	c.heard(n, []byte("{not json"), t0)
	c.heard(n, beat(NodeStatus{Node: "n1", Clients: 1000}), t0)
	c.heard(n, beat(NodeStatus{Node: "bad.name"}), t0)
	if got := c.totals(); got.Nodes != 2 || got.Reachable != 2 || got.Clients != 8 || got.MessagesIn != 10 {
		t.Fatalf("totals %+v, want 2 nodes reachable, 8 clients, 10 messages in", got)
	}
	c.sweep(n, t0.Add(3*time.Second)) // three intervals: not yet
	if ns := c.list(); len(ns) != 2 || !ns[1].Reachable || ns[0].Node != "n1" {
		t.Fatalf("nodes %+v, want n1 then n2 reachable", ns)
	}
	for i := 4; i < 8; i++ {
		c.sweep(n, t0.Add(time.Duration(i)*time.Second))
	}
	warns := logs.FilterLevelExact(zapcore.WarnLevel).FilterMessageSnippet("unreachable").All()
	if len(warns) != 1 || warns[0].Message != "node n2 unreachable: no heartbeat for 4s (partition or down)" {
		t.Fatalf("warnings %v, want one saying n2 is unreachable after 4s", warns)
	}
	got := c.totals()
	if got.Unreachable != 1 || got.Reachable != 1 || got.Clients != 5 || got.UnreachableTransitions != 1 {
		t.Fatalf("totals %+v, want n2 unreachable (once) and left out of the sums", got)
	}
	if ns := c.list(); ns[1].Reachable || !ns[1].UnreachableSince.Equal(t0) {
		t.Fatalf("n2 %+v, want unreachable since its last heartbeat", ns[1])
	}
	c.heard(n, beat(NodeStatus{Node: "n2", Clients: 4}), t0.Add(42*time.Second))
	if again := logs.FilterMessage("node n2 reachable again after 42s").All(); len(again) != 1 {
		t.Fatalf("logs %v, want n2 reachable again after 42s", logs.All())
	}
	if got := c.totals(); got.Reachable != 2 || got.Clients != 9 || got.UnreachableTransitions != 1 {
		t.Fatalf("totals %+v, want both reachable, 9 clients", got)
	}
	c.heard(n, beat(NodeStatus{Node: "n2", Leaving: true}), t0.Add(43*time.Second))
	if ns := c.list(); len(ns) != 1 || logs.FilterMessage("node left the cluster").Len() != 1 {
		t.Fatalf("nodes %+v after n2 left, want n1 alone", ns)
	}
}

// tableNode is node n1 of cluster xmq with an empty node table, for
// heartbeats handed to heard by hand.
func tableNode(o Options, log *zap.Logger) (*membership, *nodes) {
	o.Name, o.Node = "xmq", "n1"
	o.SetDefaults()
	ms := &membership{link: &link{opts: o, log: log}, changed: func(*nodes) {}}
	n := &nodes{interval: time.Second, peers: map[string]*NodeStatus{}, last: NodeStatus{Node: "n1", Clients: 5, Reachable: true, Local: true}}
	ms.table.Store(n)
	return ms, n
}

func beat(st NodeStatus) []byte {
	b, _ := json.Marshal(st)
	return b
}

// TestNodeTableBounded: heartbeats of more nodes than max_nodes add
// nothing past the bound (counted, one warning), a known node keeps
// beating, and a node silent for forget_after leaves the table, which
// makes room for another.
func TestNodeTableBounded(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	c, n := tableNode(Options{MaxNodes: 4, ForgetAfter: time.Minute}, zap.New(core))
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 20_000 {
		c.heard(n, beat(NodeStatus{Node: fmt.Sprintf("forged%d", i), Clients: 1e9}), t0)
	}
	if got := c.totals(); got.Nodes != 4 || got.Refused != 20_000-3 {
		t.Fatalf("totals %+v, want 4 nodes (this one and 3 others) and the rest refused", got)
	}
	if w := logs.FilterMessageSnippet("max_nodes").Len(); w != 1 {
		t.Fatalf("%d warnings about max_nodes, want 1 (rate-limited)", w)
	}
	c.heard(n, beat(NodeStatus{Node: "forged1", Clients: 2}), t0.Add(time.Second))
	if got := c.totals(); got.Nodes != 4 || got.Refused != 20_000-3 {
		t.Fatalf("a known node's heartbeat was refused: %+v", got)
	}
	for s := 2; s <= 61; s++ {
		c.sweep(n, t0.Add(time.Duration(s)*time.Second))
	}
	if ns := c.list(); len(ns) != 2 || ns[1].Node != "forged1" || ns[1].Reachable {
		t.Fatalf("nodes %+v after 61 s, want forged0 and forged2 forgotten, forged1 unreachable", ns)
	}
	c.heard(n, beat(NodeStatus{Node: "n9"}), t0.Add(62*time.Second))
	if ns := c.list(); len(ns) != 3 {
		t.Fatalf("nodes %+v, want room for n9", ns)
	}
}

// TestHeartbeatsAcrossNodes: over real NATS, every node learns the
// others' heartbeats and sums their loads; a node that stops leaves the
// others' tables without being counted unreachable.
func TestHeartbeatsAcrossNodes(t *testing.T) {
	nodes := startNodes(t, 3)
	for i, nd := range nodes {
		nd.opts.HeartbeatInterval = 50 * time.Millisecond // before the loop starts
		nd.StartHeartbeats(Self{Version: "test", Started: time.Now(), Listeners: []string{fmt.Sprintf("mqtt://127.0.0.1:%d", 1883+i)},
			Load: func() Load { return Load{Clients: int64(i + 1), Subscriptions: 10, MessagesIn: 100} }})
	}
	for _, nd := range nodes {
		mqtttest.WaitWithin(t, 5*time.Second, nd.Node()+" hears every node", func() bool {
			tot := nd.Totals()
			return tot.Reachable == 3 && tot.Clients == 6 && tot.Subscriptions == 30 && tot.MessagesIn == 300
		})
	}
	ns := nodes[0].Nodes()
	if ns[0].Node != "n1" || !ns[0].Local || ns[1].Node != "n2" || ns[2].Node != "n3" || ns[2].Listeners[0] != "mqtt://127.0.0.1:1885" ||
		ns[2].Version != "test" || ns[2].Routes != 2 {
		t.Fatalf("n1's table %+v", ns)
	}
	_ = nodes[2].Close()
	for _, nd := range nodes[:2] {
		mqtttest.WaitWithin(t, 5*time.Second, nd.Node()+" sees n3 leave", func() bool { return nd.Totals().Nodes == 2 })
		if tot := nd.Totals(); tot.UnreachableTransitions != 0 {
			t.Errorf("%s counted a node that left as unreachable: %+v", nd.Node(), tot)
		}
	}
}

// TestAskNodeAndHolder: a node's API request reaches the node named, one
// that serves no API fails at once, and the registry names the node of a
// claimed client id, or of an offline session left there.
func TestAskNodeAndHolder(t *testing.T) {
	nodes := startNodes(t, 3)
	waitReady(t, nodes...)
	if err := nodes[1].ServeAPI(func(req []byte) []byte { return append([]byte("n2:"), req...) }); err != nil {
		t.Fatal(err)
	}
	// n1's server learns n2's subscription from the route shortly after.
	var got []byte
	var err error
	mqtttest.WaitWithin(t, 5*time.Second, "n2 answers", func() bool {
		got, err = nodes[0].AskNode("n2", []byte("hi"), 2*time.Second)
		return !errors.Is(err, ErrNoAPI)
	})
	if err != nil || string(got) != "n2:hi" {
		t.Fatalf("AskNode(n2) = %q, %v", got, err)
	}
	start := time.Now()
	if _, err := nodes[0].AskNode("n3", []byte("hi"), 2*time.Second); !errors.Is(err, ErrNoAPI) || time.Since(start) > time.Second {
		t.Fatalf("AskNode(n3) without an API: %v after %v, want ErrNoAPI at once", err, time.Since(start))
	}
	if _, err := nodes[0].AskNode("a.b", nil, time.Second); err == nil {
		t.Fatal("AskNode accepted a name that is not one subject token")
	}
	if node, _, err := nodes[0].Holder("nobody"); node != "" || err != nil {
		t.Fatalf("Holder(nobody) = %q, %v", node, err)
	}
	claim := nodes[1].claim("h1", true)
	// A read may reach a replica that has not applied the claim yet.
	mqtttest.WaitWithin(t, 5*time.Second, "h1 online on n2", func() bool {
		node, offline, err := nodes[0].Holder("h1")
		return node == "n2" && !offline && err == nil
	})
	nodes[1].Release("h1", claim, true)
	mqtttest.WaitWithin(t, 5*time.Second, "h1's session offline on n2", func() bool {
		node, offline, _ := nodes[0].Holder("h1")
		return node == "n2" && offline
	})
}
