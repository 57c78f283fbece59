package main

import (
	"strconv"
	"time"

	"github.com/xmq-io/xmq/cluster"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/listeners"
	"github.com/xmq-io/xmq/web"
)

// The operations side of a cluster node: its heartbeats describe the
// broker, the cluster totals join $SYS, and the web API reaches the other
// nodes (docs/cluster.md, Operations).

// startHeartbeats makes cl describe srv, listening on lns, in its
// heartbeats.
func startHeartbeats(cl *cluster.Cluster, srv *core.Server, lns []listeners.Listener) {
	addrs := make([]string, len(lns))
	for i, l := range lns {
		addrs[i] = l.Transport() + "://" + l.Addr().String()
	}
	cl.StartHeartbeats(cluster.Self{Version: build().Version, Started: srv.StartTime(), Listeners: addrs,
		Load: func() cluster.Load {
			st := srv.Stats()
			return cluster.Load{Clients: int64(st.Sessions - st.OfflineSessions), OfflineSessions: int64(st.OfflineSessions),
				Subscriptions: st.Subscriptions, MessagesIn: st.MessagesIn, MessagesOut: st.MessagesOut}
		}})
}

// clusterSysTopics are the cluster totals published under
// $SYS/broker/cluster/ with each node's own $SYS topics (docs/sys-topics.md),
// from the reachable nodes' last heartbeats; none before the first.
func clusterSysTopics(cl *cluster.Cluster) func() [][2]string {
	return func() [][2]string {
		t := cl.Totals()
		if t.Nodes == 0 {
			return nil
		}
		i := func(n int64) string { return strconv.FormatInt(n, 10) }
		return [][2]string{
			{"cluster/nodes/total", i(int64(t.Nodes))},
			{"cluster/nodes/reachable", i(int64(t.Reachable))},
			{"cluster/nodes/unreachable", i(int64(t.Unreachable))},
			{"cluster/clients/connected", i(t.Clients)},
			{"cluster/clients/disconnected", i(t.OfflineSessions)},
			{"cluster/subscriptions/count", i(t.Subscriptions)},
			{"cluster/publish/messages/received", i(t.MessagesIn)},
			{"cluster/publish/messages/sent", i(t.MessagesOut)},
		}
	}
}

// webPeers adapts the cluster to the web API's Peers.
type webPeers struct{ cl *cluster.Cluster }

func (p webPeers) Nodes() []web.Node {
	ns := p.cl.Nodes()
	out := make([]web.Node, len(ns))
	for i, n := range ns {
		out[i] = nodeView(n)
	}
	return out
}

// nodeView is n as the web API shows it (TestViewsMirrorSources checks
// that it copies every field but those left out on purpose).
func nodeView(n cluster.NodeStatus) web.Node {
	return web.Node{Node: n.Node, Version: n.Version, Started: n.Started, Listeners: n.Listeners, Clients: n.Clients,
		OfflineSessions: n.OfflineSessions, Subscriptions: n.Subscriptions, MessagesIn: n.MessagesIn, MessagesOut: n.MessagesOut,
		RateIn: n.RateIn, RateOut: n.RateOut, Routes: n.Routes, Ready: n.Ready, LastSeen: n.LastSeen, Reachable: n.Reachable,
		UnreachableSince: n.UnreachableSince, Local: n.Local}
}

func (p webPeers) Holder(clientID string) (string, bool, error) { return p.cl.Holder(clientID) }

func (p webPeers) Ask(node string, req []byte, timeout time.Duration) ([]byte, error) {
	return p.cl.AskNode(node, req, timeout)
}
