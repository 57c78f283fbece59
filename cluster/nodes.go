package cluster

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// Every node says how it is in a heartbeat on NATS core (not JetStream:
// it must travel while JetStream has no quorum) every
// Options.HeartbeatInterval, and keeps the table of the other nodes from
// theirs. A node not heard from for unreachableAfter intervals is
// unreachable — down, or cut off from this one by a partition — and is
// logged once when it becomes so and once when it is heard again; a node
// that stops says so in a last heartbeat and leaves the table.

// unreachableAfter is how many heartbeat intervals without one make a
// node unreachable.
const unreachableAfter = 3

// maxHeartbeat bounds a heartbeat accepted from NATS: a few hundred bytes
// in practice, a listener list at most.
const maxHeartbeat = 16 << 10

// nodesSubject is where the nodes of cluster name send their heartbeats:
// outside the subject prefix, like the session subjects.
func nodesSubject(name string) string { return "$XMQ." + name + ".nodes" }

// Load is what the broker of a node reports in its heartbeats (cmd/xmq
// reads it from core's counters).
type Load struct {
	Clients         int64 // connected clients
	OfflineSessions int64 // persistent sessions whose client is away
	Subscriptions   int64
	MessagesIn      int64 // PUBLISH packets received from clients since start
	MessagesOut     int64 // PUBLISH packets sent to clients since start
}

// Self describes this node in its heartbeats: what does not change, and
// how to read its broker's figures.
type Self struct {
	Version   string
	Started   time.Time
	Listeners []string // MQTT listener addresses, as transport://host:port
	Load      func() Load
}

// NodeStatus is one node as its last heartbeat described it, with what
// this node saw of it.
type NodeStatus struct {
	Node            string    `json:"node"`
	Version         string    `json:"version"`
	Started         time.Time `json:"started_at"`
	Listeners       []string  `json:"listeners,omitempty"`
	Clients         int64     `json:"clients_connected"`
	OfflineSessions int64     `json:"sessions_offline"`
	Subscriptions   int64     `json:"subscriptions"`
	MessagesIn      int64     `json:"messages_in"`
	MessagesOut     int64     `json:"messages_out"`
	// RateIn and RateOut are messages per second, averaged over about a
	// minute.
	RateIn  float64 `json:"messages_in_rate"`
	RateOut float64 `json:"messages_out_rate"`
	// Routes counts the other NATS servers its embedded server has a
	// route to (a server has several route connections to another: the
	// xmq_cluster_routes series counts those); -1 with an external NATS.
	Routes  int  `json:"routes"`
	Ready   bool `json:"ready"` // part of its cluster (Healthy) with its replicated state in use
	Leaving bool `json:"leaving,omitempty"`
	// Groups are its shared groups ("$share/G/F"), at most
	// maxStickyGroups, when shared groups are sticky (sticky.go).
	Groups []string `json:"shared_groups,omitempty"`

	// Set by the receiver: when it last heard from the node, whether
	// that is recent, since when it is not, and whether it is this node.
	LastSeen         time.Time `json:"last_seen,omitzero"`
	Reachable        bool      `json:"reachable,omitempty"`
	UnreachableSince time.Time `json:"unreachable_since,omitzero"`
	Local            bool      `json:"local,omitempty"`
}

// NodeTotals are the cluster's figures summed over the reachable nodes
// (this one included), from their last heartbeats.
type NodeTotals struct {
	Nodes, Reachable                        int
	Clients, OfflineSessions, Subscriptions int64
	MessagesIn, MessagesOut                 int64
	RateIn, RateOut                         float64
	Unreachable                             int
	UnreachableTransitions                  int64
	// Refused counts heartbeats ignored because the table was full
	// (Options.MaxNodes).
	Refused int64
}

// nodes is the heartbeat side of membership: nil until StartHeartbeats.
type nodes struct {
	self     Self
	interval time.Duration
	sub      *nats.Subscription
	// rate keeps this node's 1-minute message rates between heartbeats;
	// only heartbeatLoop touches it.
	rate rates

	mu    sync.Mutex
	peers map[string]*NodeStatus // other nodes, by name
	last  NodeStatus             // this node's last heartbeat

	transitions atomic.Int64 // reachable → unreachable
	refused     atomic.Int64 // heartbeats of nodes beyond Options.MaxNodes
}

// rates are exponentially weighted per-second rates of two counters over
// a minute, as $SYS's load figures.
type rates struct {
	at              time.Time
	in, out         int64
	rateIn, rateOut float64
}

func (r *rates) update(now time.Time, in, out int64) {
	if r.at.IsZero() {
		r.at, r.in, r.out = now, in, out
		return
	}
	dt := now.Sub(r.at).Seconds()
	if dt <= 0 {
		return
	}
	decay := math.Exp(-dt / 60)
	ri, ro := float64(max(in-r.in, 0))/dt, float64(max(out-r.out, 0))/dt
	r.rateIn = ri + decay*(r.rateIn-ri)
	r.rateOut = ro + decay*(r.rateOut-ro)
	r.at, r.in, r.out = now, in, out
}

// startHeartbeats makes this node send heartbeats describing self and
// keep the table of the other nodes' (list).
func (ms *membership) startHeartbeats(self Self) {
	n := &nodes{self: self, interval: ms.opts.HeartbeatInterval, peers: map[string]*NodeStatus{}}
	var err error
	n.sub, err = ms.nc.Subscribe(nodesSubject(ms.opts.Name), func(m *nats.Msg) { ms.heard(n, m.Data, time.Now()) })
	if err != nil {
		ms.log.Error("cannot hear other nodes' heartbeats: the node table stays empty", zap.Error(err))
	}
	if !ms.table.CompareAndSwap(nil, n) {
		if n.sub != nil {
			_ = n.sub.Unsubscribe()
		}
		return
	}
	ms.goUnlessClosed(func() { ms.heartbeatLoop(n) })
}

// heartbeatLoop sends a heartbeat every interval and marks the nodes not
// heard from for unreachableAfter intervals; at Close it sends a last
// one saying the node leaves.
func (ms *membership) heartbeatLoop(n *nodes) {
	t := time.NewTicker(n.interval)
	defer t.Stop()
	ms.beat(n, time.Now(), false)
	for {
		select {
		case <-ms.stop:
			ms.beat(n, time.Now(), true)
			_ = ms.nc.FlushTimeout(200 * time.Millisecond)
			return
		case now := <-t.C:
			ms.beat(n, now, false)
			ms.sweep(n, now)
		}
	}
}

// status is this node's heartbeat now.
func (ms *membership) status(n *nodes, now time.Time) NodeStatus {
	var l Load
	if n.self.Load != nil {
		l = n.self.Load()
	}
	n.rate.update(now, l.MessagesIn, l.MessagesOut)
	return NodeStatus{Node: ms.opts.Node, Version: n.self.Version, Started: n.self.Started, Listeners: n.self.Listeners,
		Clients: l.Clients, OfflineSessions: l.OfflineSessions, Subscriptions: l.Subscriptions,
		MessagesIn: l.MessagesIn, MessagesOut: l.MessagesOut, RateIn: round2(n.rate.rateIn), RateOut: round2(n.rate.rateOut),
		Routes: ms.routedServers(), Ready: ms.ready(),
		LastSeen: now, Reachable: true, Local: true, Groups: ms.groups()}
}

// routedServers counts the NATS servers the embedded one has a route to;
// -1 with an external NATS.
func (ms *membership) routedServers() int {
	if ms.emb == nil {
		return -1
	}
	rz, err := ms.emb.srv.Routez(nil)
	if err != nil {
		return 0
	}
	seen := map[string]bool{}
	for _, r := range rz.Routes {
		seen[r.RemoteID] = true
	}
	return len(seen)
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

func (ms *membership) beat(n *nodes, now time.Time, leaving bool) {
	st := ms.status(n, now)
	st.Leaving = leaving
	n.mu.Lock()
	n.last = st
	n.mu.Unlock()
	// The receiver's fields stay out of the heartbeat.
	out := st
	out.LastSeen, out.Reachable, out.Local = time.Time{}, false, false
	b, _ := json.Marshal(out) // cannot fail: plain fields
	if err := ms.nc.Publish(nodesSubject(ms.opts.Name), b); err != nil {
		ms.warn("cannot send a heartbeat to the other nodes", zap.Error(err))
	}
}

// heard records another node's heartbeat.
func (ms *membership) heard(n *nodes, data []byte, now time.Time) {
	var st NodeStatus
	if len(data) > maxHeartbeat || json.Unmarshal(data, &st) != nil || !token(st.Node) {
		ms.warn("a heartbeat on NATS does not decode: ignored", zap.Int("bytes", len(data)))
		return
	}
	if st.Node == ms.opts.Node {
		ms.warn("another process calls itself this node: node names must be unique in a cluster", zap.String("node", st.Node))
		return
	}
	n.mu.Lock()
	prev := n.peers[st.Node]
	if prev == nil && !st.Leaving && len(n.peers)+1 >= ms.opts.MaxNodes {
		// A bounded table: heartbeats are cheap to send, each new name
		// would cost every node memory until it is forgotten.
		n.mu.Unlock()
		n.refused.Add(1)
		ms.warn("a heartbeat from one node more than cluster.max_nodes: ignored", zap.String("node", st.Node),
			zap.Int("max_nodes", ms.opts.MaxNodes))
		return
	}
	if st.Leaving {
		delete(n.peers, st.Node)
		ms.changed(n)
		n.mu.Unlock()
		if prev != nil {
			ms.log.Info("node left the cluster", zap.String("node", st.Node))
		}
		return
	}
	st.LastSeen, st.Reachable, st.Local = now, true, false
	n.peers[st.Node] = &st
	if prev == nil || !prev.Reachable || !slices.Equal(prev.Groups, st.Groups) {
		ms.changed(n)
	}
	n.mu.Unlock()
	switch {
	case prev == nil:
		ms.log.Info("node joined", zap.String("node", st.Node), zap.String("version", st.Version),
			zap.Strings("listeners", st.Listeners))
	case !prev.Reachable:
		down := now.Sub(prev.UnreachableSince).Round(time.Second)
		ms.log.Info("node "+st.Node+" reachable again after "+down.String(), zap.String("node", st.Node),
			zap.Duration("unreachable_for", down))
	}
}

// sweep marks the nodes not heard from for unreachableAfter intervals
// and forgets those silent for Options.ForgetAfter.
func (ms *membership) sweep(n *nodes, now time.Time) {
	limit := time.Duration(unreachableAfter) * n.interval
	n.mu.Lock()
	var gone []*NodeStatus
	for name, p := range n.peers {
		if !p.Reachable && now.Sub(p.LastSeen) > ms.opts.ForgetAfter {
			delete(n.peers, name)
			ms.log.Info("node forgotten: silent for longer than cluster.forget_after", zap.String("node", name),
				zap.Duration("forget_after", ms.opts.ForgetAfter))
			continue
		}
		if p.Reachable && now.Sub(p.LastSeen) > limit {
			p.Reachable, p.UnreachableSince = false, p.LastSeen
			cp := *p
			gone = append(gone, &cp)
		}
	}
	if len(gone) > 0 {
		ms.changed(n)
	}
	n.mu.Unlock()
	for _, p := range gone {
		n.transitions.Add(1)
		silent := now.Sub(p.LastSeen).Round(time.Second)
		ms.log.Warn("node "+p.Node+" unreachable: no heartbeat for "+silent.String()+" (partition or down)",
			zap.String("node", p.Node), zap.Duration("silent_for", silent), zap.Int("routed_servers", ms.routedServers()))
	}
}

// list returns every node this one knows, itself first, then the others
// by name; empty before StartHeartbeats.
func (ms *membership) list() []NodeStatus {
	n := ms.table.Load()
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]NodeStatus, 0, len(n.peers)+1)
	if n.last.Node != "" {
		out = append(out, n.last)
	}
	for _, p := range n.peers {
		cp := *p
		cp.Listeners = slices.Clone(p.Listeners)
		out = append(out, cp)
	}
	slices.SortFunc(out[min(1, len(out)):], func(a, b NodeStatus) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// totals sums the reachable nodes' last heartbeats, this node's included.
func (ms *membership) totals() NodeTotals {
	var t NodeTotals
	if n := ms.table.Load(); n != nil {
		t.UnreachableTransitions = n.transitions.Load()
		t.Refused = n.refused.Load()
	}
	for _, st := range ms.list() {
		t.Nodes++
		if !st.Reachable {
			t.Unreachable++
			continue
		}
		t.Reachable++
		t.Clients += st.Clients
		t.OfflineSessions += st.OfflineSessions
		t.Subscriptions += st.Subscriptions
		t.MessagesIn += st.MessagesIn
		t.MessagesOut += st.MessagesOut
		t.RateIn += st.RateIn
		t.RateOut += st.RateOut
	}
	return t
}

// StartHeartbeats makes this node send heartbeats describing self and
// keep the table of the other nodes' (Nodes); call it once, after Start.
// Until then (and for a node that never calls it) Nodes is empty.
func (c *Cluster) StartHeartbeats(self Self) { c.members.startHeartbeats(self) }

// Nodes returns every node this one knows, itself first, then the others
// by name; empty before StartHeartbeats.
func (c *Cluster) Nodes() []NodeStatus { return c.members.list() }

// Totals sums the reachable nodes' last heartbeats, this node's included.
func (c *Cluster) Totals() NodeTotals { return c.members.totals() }

// heartbeatGroups are the shared groups a heartbeat lists: none unless
// they are sticky.
func (c *Cluster) heartbeatGroups() []string {
	if c.opts.SharedHash == "" {
		return nil
	}
	return c.interests.ownGroups()
}
