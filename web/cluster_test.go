package web

import (
	"context"
	"testing"

	"github.com/xmq-io/xmq/core"
)

// TestMetricsCluster: a node of a cluster labels every series with its
// name and exports its cluster counters; a single broker does neither.
func TestMetricsCluster(t *testing.T) {
	srv, err := core.New(core.Options{SysInterval: -1}, core.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	st := ClusterStats{Connected: true, Routes: 2, StateReady: true, Forwarded: 10, ForwardDropped: 1, Received: 20,
		ReceivedDropped: 2, Interest: 3, ClaimsUnavailable: 4, TakenOver: 5, RetainDropped: 6,
		SessionsIn: 7, SessionsOut: 8, SessionsLost: 9, NodesReachable: 2, NodesUnreachable: 1, UnreachableTransitions: 11,
		SessionsAdopted: 12, SessionsRestored: 13, SessionsMerged: 14, ReplicaDropped: 15, NodesDead: 16, Replayed: 17,
		ClaimsRefused: 18, HeartbeatsRefused: 19}
	s := newTestServer(t, srv, func(o *Options) {
		o.Node = "n2"
		o.Cluster = func() ClusterStats { return st }
	})
	fams := scrape(t, s.Handler())
	for _, tt := range []struct {
		name, labels string
		want         float64
	}{
		{"xmq_cluster_connected", "node=n2", 1},
		{"xmq_cluster_routes", "node=n2", 2},
		{"xmq_cluster_state_ready", "node=n2", 1},
		{"xmq_cluster_messages_total", "direction=out,node=n2", 10},
		{"xmq_cluster_messages_total", "direction=in,node=n2", 20},
		{"xmq_cluster_dropped_total", "direction=out,node=n2", 1},
		{"xmq_cluster_dropped_total", "direction=in,node=n2", 2},
		{"xmq_cluster_interest", "node=n2", 3},
		{"xmq_cluster_claims_unavailable_total", "node=n2", 4},
		{"xmq_cluster_taken_over_total", "node=n2", 5},
		{"xmq_cluster_claims_refused_total", "node=n2", 18},
		{"xmq_cluster_heartbeats_refused_total", "node=n2", 19},
		{"xmq_cluster_retained_dropped_total", "node=n2", 6},
		{"xmq_cluster_sessions_moved_total", "direction=in,node=n2", 7},
		{"xmq_cluster_sessions_moved_total", "direction=out,node=n2", 8},
		{"xmq_cluster_sessions_lost_total", "node=n2", 9},
		{"xmq_cluster_nodes", "node=n2,state=reachable", 2},
		{"xmq_cluster_nodes", "node=n2,state=unreachable", 1},
		{"xmq_cluster_node_unreachable_total", "node=n2", 11},
		{"xmq_cluster_sessions_restored_total", "by=adoption,node=n2", 12},
		{"xmq_cluster_sessions_restored_total", "by=client,node=n2", 13},
		{"xmq_cluster_sessions_merged_total", "node=n2", 14},
		{"xmq_cluster_session_records_dropped_total", "node=n2", 15},
		{"xmq_cluster_nodes_dead_total", "node=n2", 16},
		{"xmq_cluster_replayed_total", "node=n2", 17},
		{"xmq_messages_received_total", "node=n2,qos=0", 0},
	} {
		if got, err := value(fams, tt.name, tt.labels); err != nil || got != tt.want {
			t.Errorf("%s{%s} = %v, %v; want %v", tt.name, tt.labels, got, err, tt.want)
		}
	}
	for name, f := range fams {
		for _, m := range f.Metric {
			node := false
			for _, l := range m.Label {
				node = node || l.GetName() == "node" && l.GetValue() == "n2"
			}
			if !node {
				t.Errorf("%s has a series without node=n2", name)
				break
			}
		}
	}
	single := scrape(t, newTestServer(t, srv, nil).Handler())
	for name := range single {
		if len(name) > 12 && name[:12] == "xmq_cluster_" {
			t.Errorf("a single broker exports %s", name)
		}
	}
}
