package web

import "github.com/prometheus/client_golang/prometheus"

// ClusterStats is this node's view of its cluster (package cluster's
// counters, adapted by the composition root), for the xmq_cluster_*
// series.
type ClusterStats struct {
	Connected         bool  // connected to NATS
	Routes            int   // embedded NATS: routes to other nodes; -1 with an external NATS
	StateReady        bool  // the replicated state (client id registry, retained) is in use
	Forwarded         int64 // messages handed to NATS for the other nodes
	ForwardDropped    int64 // messages that could not be
	Received          int64 // messages received from other nodes
	ReceivedDropped   int64 // received messages dropped (not a mapped topic, slow consumer)
	Interest          int64 // distinct filters and shared groups this node receives
	ClaimsUnavailable int64 // connections held on this node only: the registry was not writable
	ClaimsRefused     int64 // connections refused: the id's session elsewhere is another user's, or their claim was older
	TakenOver         int64 // local connections or sessions another node's connection took over
	RetainDropped     int64 // retained changes kept on this node only
	SessionsIn        int64 // persistent sessions moved here from another node
	SessionsOut       int64 // persistent sessions moved from here to another node
	SessionsLost      int64 // connections that started a new session: the one on another node could not be moved
	HandedOver        int64 // shared-group messages handed to members on other nodes: their member here left
	// SessionsAdopted and SessionsRestored count a dead node's sessions
	// rebuilt here from the session replicas (adopted while their client
	// was away; for their client connecting here); SessionsMerged stale
	// sessions whose messages went to their client's session elsewhere.
	SessionsAdopted, SessionsRestored, SessionsMerged int64
	ReplicaDropped                                    int64 // session records not replicated (too many waiting)
	NodesDead                                         int64 // nodes seen dying (no answer to pings)
	Replayed                                          int64 // deliveries of messages published while no node held their subscriber's session
	// NodesReachable and NodesUnreachable count the nodes of the
	// heartbeat table (this one included, reachable);
	// UnreachableTransitions counts the times a node became unreachable.
	NodesReachable, NodesUnreachable int
	UnreachableTransitions           int64
	HeartbeatsRefused                int64 // heartbeats of nodes beyond cluster.max_nodes, ignored
}

type clusterCollector struct {
	stats                                                     func() ClusterStats
	connected, routes, ready, msgs, dropped, interest, claims *prometheus.Desc
	taken, retainDropped, sessions, sessionsLost, handedOver  *prometheus.Desc
	nodes, unreachable                                        *prometheus.Desc
	restored, merged, replicaDropped, dead, replayed          *prometheus.Desc
	claimsRefused, beatsRefused                               *prometheus.Desc
}

func newClusterCollector(stats func() ClusterStats) *clusterCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("xmq_cluster_"+name, help, labels, nil)
	}
	return &clusterCollector{stats: stats,
		connected: d("connected", "1 while this node is connected to NATS, else 0."),
		routes:    d("routes", "Routes of the embedded NATS server to the other nodes (a partition shows as fewer)."),
		ready:     d("state_ready", "1 while the replicated state (client id registry, retained messages) is in use."),
		msgs:      d("messages_total", "Messages sent to the other nodes (out) and received from them (in).", "direction"),
		dropped:   d("dropped_total", "Messages not sent (out: topic too long, too large, NATS down) or not routed (in).", "direction"),
		interest:  d("interest", "Distinct filters and shared groups this node receives from the other nodes."),
		claims:    d("claims_unavailable_total", "Connections held on this node only: the client id registry was not writable."),
		claimsRefused: d("claims_refused_total", "Connections refused because their client id's session on another node belongs "+
			"to another user (0x87 / 0x05), or because their claim began before the connection it would replace (0x8E)."),
		beatsRefused: d("heartbeats_refused_total", "Heartbeats of nodes beyond cluster.max_nodes, ignored."),
		taken:        d("taken_over_total", "Connections or sessions of this node that a connection on another node took over."),
		retainDropped: d("retained_dropped_total",
			"Retained messages kept on this node only (too many waiting to be replicated)."),
		sessions: d("sessions_moved_total",
			"Persistent sessions moved to this node (in) or from it (out) when their client reconnected elsewhere.", "direction"),
		sessionsLost: d("sessions_lost_total",
			"Connections that started a new session here: their session on another node could not be moved (node down, no answer)."),
		handedOver: d("shared_handed_over_total",
			"Shared-group messages handed to the group's members on other nodes: their member here left with them unacknowledged, no other was here."),
		nodes: d("nodes", "Nodes this node knows from their heartbeats (itself included), by state: reachable, or unreachable "+
			"(no heartbeat for three intervals: down or cut off by a partition).", "state"),
		unreachable: d("node_unreachable_total", "Times another node became unreachable from this one (a partition or a node down)."),
		restored: d("sessions_restored_total", "A dead node's persistent sessions rebuilt here from the session replicas: adopted "+
			"while their client was away (by=adoption), or for their client connecting here (by=client).", "by"),
		merged: d("sessions_merged_total",
			"Stale sessions of this node (down while their client moved on) whose messages went to the client's session on another node."),
		replicaDropped: d("session_records_dropped_total",
			"Persistent sessions' records not replicated (too many waiting for the stream); the next acknowledgement is refused."),
		dead: d("nodes_dead_total", "Times another node was seen dead (no answer to pings, or its NATS server gone)."),
		replayed: d("replayed_total", "Deliveries into a dead node's sessions rebuilt here of messages published while no node held them, "+
			"fetched from the nodes' replay rings."),
	}
}

// Describe implements prometheus.Collector.
func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.connected, c.routes, c.ready, c.msgs, c.dropped, c.interest, c.claims, c.taken, c.retainDropped,
		c.sessions, c.sessionsLost, c.handedOver, c.nodes, c.unreachable, c.restored, c.merged, c.replicaDropped, c.dead, c.replayed,
		c.claimsRefused, c.beatsRefused} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(c.connected, b(st.Connected))
	if st.Routes >= 0 {
		gauge(c.routes, float64(st.Routes))
	}
	gauge(c.ready, b(st.StateReady))
	gauge(c.interest, float64(st.Interest))
	counter(c.msgs, st.Forwarded, "out")
	counter(c.msgs, st.Received, "in")
	counter(c.dropped, st.ForwardDropped, "out")
	counter(c.dropped, st.ReceivedDropped, "in")
	counter(c.claims, st.ClaimsUnavailable)
	counter(c.taken, st.TakenOver)
	counter(c.retainDropped, st.RetainDropped)
	counter(c.sessions, st.SessionsIn, "in")
	counter(c.sessions, st.SessionsOut, "out")
	counter(c.sessionsLost, st.SessionsLost)
	counter(c.handedOver, st.HandedOver)
	ch <- prometheus.MustNewConstMetric(c.nodes, prometheus.GaugeValue, float64(st.NodesReachable), "reachable")
	ch <- prometheus.MustNewConstMetric(c.nodes, prometheus.GaugeValue, float64(st.NodesUnreachable), "unreachable")
	counter(c.unreachable, st.UnreachableTransitions)
	counter(c.restored, st.SessionsAdopted, "adoption")
	counter(c.restored, st.SessionsRestored, "client")
	counter(c.merged, st.SessionsMerged)
	counter(c.replicaDropped, st.ReplicaDropped)
	counter(c.dead, st.NodesDead)
	counter(c.replayed, st.Replayed)
	counter(c.claimsRefused, st.ClaimsRefused)
	counter(c.beatsRefused, st.HeartbeatsRefused)
}
