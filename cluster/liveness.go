package cluster

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// Node death, in one place (so that another liveness signal, such as
// node heartbeats, can replace it here alone): every livenessEvery this
// node pings the others (the ping subject every node answers);
// a node that answered once and then answers none for deadAfter is dead.
// A node that stops for good and one that is cut off look the same from
// here: what is done for a dead node is guarded by the client id
// registry's compare-and-set, so that a session is taken by one node.
//
// With session replicas, the dead node's persistent sessions are adopted
// by the survivors (adopt.go; each takes the client ids that hash to it, then,
// after deadAfter more, any left): rebuilt from the stream, offline, with
// their wills scheduled, and the registry entry moved to "NODE s" so that
// a client connecting anywhere moves the session from there. A will thus
// fires once, from the adopting node, unless its client comes back first.
const (
	livenessEvery = 500 * time.Millisecond
	deadAfter     = 3 * time.Second
	// adoptTimeout bounds the tries to list a dead node's sessions.
	adoptTimeout = 30 * time.Second
)

// membership is what this node knows of the others: whether each is alive
// (pings, here) and how it is (heartbeats, nodes.go). Two signals in one
// part: a ping answered is what orders a session's move and an
// AwaitInterest with the other nodes' NATS servers (every server forwards
// it after the interest it learned before), and its rounds of
// livenessEvery find a death within deadAfter; heartbeats carry each
// node's figures every Options.HeartbeatInterval, from StartHeartbeats
// on, and mark a node unreachable after unreachableAfter intervals.
// Deciding death from heartbeats would change when a node's sessions are
// adopted.
type membership struct {
	*link
	mu   sync.Mutex
	dead map[string]bool
	// left are the nodes that said they stop (Close): their silence is
	// not a death, and their sessions are not adopted (they come back
	// with the node, or move from the replicas when their client
	// connects elsewhere). The last records of a stopping node do not
	// all reach the stream (its broker stops after the cluster link), so
	// adopting its wills could publish one that was already sent.
	left map[string]bool
	// gone are the nodes whose session subject had no responders, not
	// yet declared dead.
	gone      map[string]bool
	nodesDead atomic.Int64
	pingSub   *nats.Subscription
	// table is the heartbeat side (nodes.go), nil until StartHeartbeats.
	table atomic.Pointer[nodes]

	// Set by New: what a death starts (with session replicas, on a
	// goroutine of its own), and what the heartbeats need of the rest of
	// the node.
	adopt   func(st *state, node string, alive []string)
	ready   func() bool     // part of its cluster, with its replicated state in use
	groups  func() []string // the shared groups a heartbeat lists
	changed func(n *nodes)  // the table's reachable nodes or their groups changed; n.mu is held
}

// answerPings makes this node answer the other nodes' pings with its name.
func (ms *membership) answerPings() {
	var err error
	ms.pingSub, err = ms.nc.Subscribe(pingSubject(ms.opts.Name), func(m *nats.Msg) { _ = m.Respond([]byte(ms.opts.Node)) })
	if err != nil {
		ms.log.Error("cannot answer other nodes' pings: sessions moving to them may lose messages published meanwhile", zap.Error(err))
	}
}

// pingSubject is where every node of cluster name answers pings with its
// name.
func pingSubject(name string) string { return "$XMQ." + name + ".ping" }

// leaveSubject is where a stopping node says so.
func leaveSubject(name string) string { return "$XMQ." + name + ".leave" }

// leave tells the other nodes that this one stops (Close).
func (ms *membership) leave() {
	if ms.nc.Publish(leaveSubject(ms.opts.Name), []byte(ms.opts.Node)) == nil {
		_ = ms.nc.FlushTimeout(time.Second)
	}
}

// noResponders notes that no NATS server has node's session subject:
// its server is gone from the cluster, so the liveness loop declares it
// dead at its next round rather than after deadAfter (the sooner its
// sessions are adopted, the fewer messages published meanwhile find no
// session).
func (ms *membership) noResponders(node string) {
	ms.mu.Lock()
	if !ms.dead[node] && !ms.left[node] {
		if ms.gone == nil {
			ms.gone = map[string]bool{}
		}
		ms.gone[node] = true
	}
	ms.mu.Unlock()
}

// isDead reports whether node was declared dead and has not answered since.
func (ms *membership) isDead(node string) bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.dead[node]
}

// livenessLoop pings the other nodes until Close and handles the deaths.
func (ms *membership) livenessLoop(st *state) {
	seen := map[string]time.Time{} // node → its last answer
	sub, err := ms.nc.Subscribe(leaveSubject(ms.opts.Name), func(m *nats.Msg) {
		ms.mu.Lock()
		ms.left[string(m.Data)] = true
		ms.mu.Unlock()
		ms.log.Info("node stopping", zap.String("node", string(m.Data)))
	})
	if err == nil {
		defer func() { _ = sub.Unsubscribe() }()
	}
	t := time.NewTicker(livenessEvery)
	defer t.Stop()
	for {
		select {
		case <-ms.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		answered := ms.pingNodes(livenessEvery)
		// The embedded server's routed nodes count as seen too: a node
		// that dies before its first answer is dead all the same.
		if ms.emb != nil {
			if rz, err := ms.emb.srv.Routez(nil); err == nil {
				for _, r := range rz.Routes {
					if _, known := seen[r.RemoteName]; !known && r.RemoteName != "" && r.RemoteName != ms.opts.Node {
						seen[r.RemoteName] = now
						ms.log.Info("node seen", zap.String("node", r.RemoteName))
					}
				}
			}
		}
		var died []string
		ms.mu.Lock()
		for n := range answered {
			if _, known := seen[n]; !known {
				ms.log.Info("node seen", zap.String("node", n))
			}
			seen[n] = now
			delete(ms.left, n) // back
			delete(ms.gone, n)
			if ms.dead[n] {
				delete(ms.dead, n)
				ms.log.Info("node back", zap.String("node", n))
			}
		}
		for n, at := range seen {
			if !ms.dead[n] && !ms.left[n] && (now.Sub(at) > deadAfter || ms.gone[n] && !answered[n]) {
				ms.dead[n] = true
				delete(ms.gone, n)
				died = append(died, n)
			}
		}
		alive := []string{ms.opts.Node}
		for n := range seen {
			if !ms.dead[n] {
				alive = append(alive, n)
			}
		}
		ms.mu.Unlock()
		slices.Sort(alive)
		for _, n := range died {
			ms.nodesDead.Add(1)
			ms.log.Warn("node dead: no answer to pings, or its NATS server gone", zap.String("node", n))
			if ms.opts.SessionReplicas > 1 {
				ms.goUnlessClosed(func() { ms.adopt(st, n, alive) })
			}
		}
	}
}

// pingNodes returns the names of the nodes that answer a ping within
// timeout.
func (ms *membership) pingNodes(timeout time.Duration) map[string]bool {
	got := map[string]bool{}
	inbox := ms.nc.NewRespInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := ms.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return got
	}
	defer func() { _ = sub.Unsubscribe() }()
	if ms.nc.PublishRequest(pingSubject(ms.opts.Name), inbox, nil) != nil {
		return got
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case m := <-ch:
			got[string(m.Data)] = true
		case <-deadline.C:
			return got
		case <-ms.stop:
			return got
		}
	}
}

// ping returns once every other node answered a ping, or timeout passed:
// then every NATS server has the interest this node's server had before
// (each forwards the ping after the interest changes it got before it).
// With an embedded server the nodes are its routes' servers; with an
// external NATS those the heartbeats show reachable, or, before any
// heartbeat, the wait ends pingQuiet after the last answer. It reports
// whether the nodes it waited for answered (false: timeout or closing).
func (ms *membership) ping(timeout time.Duration) bool {
	want, counted := ms.peers()
	if counted && len(want) == 0 {
		return true
	}
	inbox := ms.nc.NewRespInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := ms.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return false
	}
	defer func() { _ = sub.Unsubscribe() }()
	if ms.nc.PublishRequest(pingSubject(ms.opts.Name), inbox, nil) != nil {
		return false
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var quiet <-chan time.Time
	for {
		select {
		case m := <-ch:
			delete(want, string(m.Data))
			if counted && len(want) == 0 {
				return true
			}
			if !counted {
				quiet = time.After(pingQuiet)
			}
		case <-quiet:
			return true
		case <-ms.stop:
			return false
		case <-deadline.C:
			if counted {
				ms.warn("nodes did not answer a ping in time: a session moving here may miss messages they publish meanwhile",
					zap.Int("missing", len(want)))
			}
			return !counted
		}
	}
}

// peers are the other nodes to wait for: with an embedded server its
// routes' servers, with an external NATS those the heartbeats show
// reachable; counted is false when neither is known (an external NATS
// before any heartbeat).
func (ms *membership) peers() (want map[string]bool, counted bool) {
	want = map[string]bool{}
	if ms.emb != nil {
		if rz, err := ms.emb.srv.Routez(nil); err == nil {
			counted = true
			for _, r := range rz.Routes {
				if r.RemoteName != ms.opts.Node {
					want[r.RemoteName] = true
				}
			}
		}
	}
	if !counted && ms.table.Load() != nil {
		// External NATS: the heartbeats name the nodes to wait for.
		counted = true
		for _, st := range ms.list() {
			if st.Reachable && st.Node != ms.opts.Node {
				want[st.Node] = true
			}
		}
	}
	return want, counted
}
