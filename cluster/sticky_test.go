package cluster

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// TestStickySharedGroups: with a hash strategy, a shared group's messages
// published on a node with no member go, per publisher, all to the one
// node the hash picks among the nodes with members, each once and in
// order, spread over those nodes; when the picked node has no member any
// more (its heartbeat not yet saying so), its messages are handed over to
// another node with members: none is lost.
func TestStickySharedGroups(t *testing.T) {
	nodes := startNodesWith(t, freePorts(t, 3), 3, func(o *Options) {
		o.SharedHash, o.HeartbeatInterval = SharedHashClient, time.Second
	})
	a, b, c := nodes[0], nodes[1], nodes[2]
	for _, nd := range nodes {
		nd.StartHeartbeats(Self{})
	}
	b.Interest("g", "s/#", true)
	c.Interest("g", "s/#", true)
	mqtttest.WaitWithin(t, 5*time.Second, "the group's nodes in a's table", func() bool {
		tp := a.sticky.table.Load()
		return tp != nil && len(*tp) == 1 && slices.Equal((*tp)[0].nodes, []string{"n2", "n3"})
	})
	const pubs, each = 20, 5
	send := func(round int) {
		for i := range each {
			for p := range pubs {
				a.Forward(codec.Message{Topic: "s/x", Payload: []byte(strconv.Itoa(round*each + i)), QoS: 1, From: "p" + strconv.Itoa(p)}, nil)
			}
		}
	}
	// collect returns, per publisher, the node and the payloads in order.
	collect := func(want int) map[string][]string {
		t.Helper()
		got := map[string][]string{}
		deadline := time.After(5 * time.Second)
		for n := 0; n < want; n++ {
			select {
			case d := <-b.local.ch:
				got[d.from] = append(got[d.from], "n2:"+string(d.payload))
			case d := <-c.local.ch:
				got[d.from] = append(got[d.from], "n3:"+string(d.payload))
			case <-deadline:
				t.Fatalf("%d of %d deliveries", n, want)
			}
		}
		b.local.none(t, 200*time.Millisecond)
		c.local.none(t, 0)
		return got
	}
	send(0)
	owner := map[string]string{}
	for p, ds := range collect(pubs * each) {
		node, _, _ := strings.Cut(ds[0], ":")
		want := make([]string, each)
		for i := range want {
			want[i] = fmt.Sprintf("%s:%d", node, i)
		}
		if !slices.Equal(ds, want) {
			t.Errorf("%s: got %q, want all on one node, in order: %q", p, ds, want)
		}
		owner[p] = node
	}
	if n := len(owner); n != pubs {
		t.Fatalf("%d publishers delivered, want %d", n, pubs)
	}
	onC := 0
	for _, n := range owner {
		if n == "n3" {
			onC++
		}
	}
	if onC == 0 || onC == pubs {
		t.Errorf("%d of %d publishers on n3: the hash does not spread them", onC, pubs)
	}

	// n3's members leave; a still sends n3's publishers there until n3's
	// next heartbeat: n3 answers that no member got them, and a hands
	// them over to the group's other node.
	c.local.noMembers.Store(true)
	c.Interest("g", "s/#", false)
	time.Sleep(20 * time.Millisecond) // n3's queue subscription gone from a's server
	// As a's table was before n3's heartbeat says the group left (the
	// next heartbeat, up to a second away, rebuilds it).
	a.sticky.table.Store(&[]stickyGroup{{interest: interest{"g", "s/#"}, match: []byte("s/#"), nodes: []string{"n2", "n3"}}})
	send(1)
	for p, ds := range collect(pubs * each) {
		want := make([]string, each)
		for i := range want {
			want[i] = fmt.Sprintf("n2:%d", each+i)
		}
		if owner[p] == "n2" && !slices.Equal(ds, want) {
			t.Errorf("%s (on n2): got %q, want %q", p, ds, want)
		}
		slices.Sort(ds)
		slices.Sort(want)
		if !slices.Equal(ds, want) {
			t.Errorf("%s: got %q, want each once on n2", p, ds)
		}
	}
	if n := a.Stats().HandedOver; n == 0 {
		t.Error("nothing handed over: the fallback did not run")
	}
}
