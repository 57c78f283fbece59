package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xmq-io/xmq/core"
)

// fakeCluster is the Peers of several web servers in one process: Ask
// calls the other server's ServeForwarded, unless its node is down.
type fakeCluster struct {
	mu       sync.Mutex
	servers  map[string]*Server
	order    []string
	down     map[string]bool
	registry map[string]string // client id → node
	regErr   error
	asks     int
}

type fakePeers struct {
	c    *fakeCluster
	self string
}

func (p fakePeers) Nodes() []Node {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	out := []Node{{Node: p.self, Reachable: true, Local: true, Ready: true, Routes: len(p.c.order) - 1}}
	for _, n := range p.c.order {
		if n != p.self {
			out = append(out, Node{Node: n, Reachable: !p.c.down[n], Clients: 1})
		}
	}
	return out
}

func (p fakePeers) Holder(id string) (string, bool, error) {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	return p.c.registry[id], false, p.c.regErr
}

func (p fakePeers) Ask(node string, req []byte, _ time.Duration) ([]byte, error) {
	p.c.mu.Lock()
	p.c.asks++
	s, down := p.c.servers[node], p.c.down[node]
	p.c.mu.Unlock()
	if s == nil || down {
		return nil, errors.New("timeout")
	}
	return s.ServeForwarded(req), nil
}

// newFakeCluster starts one web server per broker, nodes n1, n2, …
func newFakeCluster(t *testing.T, brokers ...*fakeBroker) *fakeCluster {
	t.Helper()
	c := &fakeCluster{servers: map[string]*Server{}, down: map[string]bool{}, registry: map[string]string{}}
	for i, b := range brokers {
		name := fmt.Sprintf("n%d", i+1)
		c.order = append(c.order, name)
		c.servers[name] = newTestServer(t, b, func(o *Options) { o.Node, o.Peers = name, fakePeers{c, name} })
	}
	return c
}

func (c *fakeCluster) get(t *testing.T, node, path string, auth [2]string) resp {
	t.Helper()
	return call(t, c.servers[node].Handler(), req{path: path, basic: auth})
}

// TestNodesAPI: the nodes API lists this node first, then the others,
// with their health; a broker outside a cluster answers 404; viewers
// may read it, anonymous requests not.
func TestNodesAPI(t *testing.T) {
	single := newTestServer(t, &fakeBroker{}, nil).Handler()
	if r := call(t, single, req{path: "/api/v1/nodes", basic: admin}); r.status != 404 || r.errCode(t) != "not_clustered" {
		t.Fatalf("single broker: %d %s, want 404 not_clustered", r.status, r.body)
	}
	c := newFakeCluster(t, &fakeBroker{}, &fakeBroker{}, &fakeBroker{})
	c.down["n3"] = true
	if r := c.get(t, "n2", "/api/v1/nodes", [2]string{}); r.status != 401 {
		t.Fatalf("no credentials: %d", r.status)
	}
	r := call(t, c.servers["n2"].Handler(), req{path: "/api/v1/nodes", header: map[string]string{"X-API-Key": viewerKey}})
	var got nodesJSON
	if err := json.Unmarshal(r.body, &got); err != nil || r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var names []string
	for _, n := range got.Items {
		names = append(names, n.Node)
	}
	if got.Node != "n2" || !slices.Equal(names, []string{"n2", "n1", "n3"}) || got.Reachable != 2 || got.Unreachable != 1 || !got.Items[0].Local {
		t.Fatalf("nodes %+v", got)
	}
}

// TestClientOnAnotherNode: a client held on another node is looked up
// there, with its node; a node down or the registry unavailable is said
// so; nothing is forwarded before the request is authenticated, nor
// forwarded again by the node asked.
func TestClientOnAnotherNode(t *testing.T) {
	b2 := &fakeBroker{clients: []core.ClientInfo{{ClientID: "c/2", Username: "u2", Connected: true, Listener: "tcp"}}}
	c := newFakeCluster(t, &fakeBroker{}, b2, &fakeBroker{})
	c.registry["c/2"] = "n2"
	c.registry["gone"] = "n3"
	c.registry["lost"] = "n2" // the registry is behind: n2 no longer has it
	r := c.get(t, "n1", "/api/v1/clients/c/2", admin)
	m := r.json(t)
	if r.status != 200 || m["client_id"] != "c/2" || m["node"] != "n2" || m["username"] != "u2" || m["transport"] != "tcp" {
		t.Fatalf("client on n2 asked on n1: %d %s", r.status, r.body)
	}
	if r := c.get(t, "n2", "/api/v1/clients/c/2", admin); r.json(t)["node"] != "n2" {
		t.Fatalf("client on n2 asked on n2: %s", r.body)
	}
	for _, tt := range []struct {
		id, code string
		status   int
	}{
		{"nobody", "not_found", 404},
		{"lost", "not_found", 404},
	} {
		if r := c.get(t, "n1", "/api/v1/clients/"+tt.id, admin); r.status != tt.status || r.errCode(t) != tt.code {
			t.Errorf("%s: %d %s, want %d %s", tt.id, r.status, r.body, tt.status, tt.code)
		}
	}
	c.down["n3"] = true
	if r := c.get(t, "n1", "/api/v1/clients/gone", admin); r.status != 504 || r.errCode(t) != "node_unavailable" {
		t.Errorf("client on a node down: %d %s", r.status, r.body)
	}
	c.regErr = errors.New("no quorum")
	if r := c.get(t, "n1", "/api/v1/clients/c/2", admin); r.status != 503 || r.errCode(t) != "registry_unavailable" {
		t.Errorf("registry down: %d %s", r.status, r.body)
	}
	c.regErr = nil
	asks := c.asks
	if r := c.get(t, "n1", "/api/v1/clients/c/2", [2]string{"admin", "wrong"}); r.status != 401 || c.asks != asks {
		t.Errorf("wrong password: %d, %d requests forwarded", r.status, c.asks-asks)
	}
	// The node asked answers from its own state only, even when the
	// registry names yet another node.
	fr, _ := json.Marshal(forwardedRequest{Op: "client", ID: "gone", User: "admin", From: "n2"})
	var a forwardedAnswer
	if err := json.Unmarshal(c.servers["n1"].ServeForwarded(fr), &a); err != nil || a.Status != 404 || c.asks != asks {
		t.Errorf("forwarded lookup of a client elsewhere: %+v %v, %d asks", a, err, c.asks-asks)
	}
}

// TestServeForwardedRefuses: only the read-only lookups are answered for
// another node.
func TestServeForwardedRefuses(t *testing.T) {
	b := &fakeBroker{clients: []core.ClientInfo{{ClientID: "x", Connected: true}}}
	s := newTestServer(t, b, func(o *Options) { o.Node = "n1" })
	for _, tt := range []struct {
		req    string
		status int
	}{
		{`{"op":"disconnect","id":"x"}`, 403},
		{`{"op":"publish"}`, 403},
		{`not json`, 400},
		{`{"op":"client","id":"x"}`, 200},
	} {
		var a forwardedAnswer
		if err := json.Unmarshal(s.ServeForwarded([]byte(tt.req)), &a); err != nil || a.Status != tt.status {
			t.Errorf("%s: %+v %v, want status %d", tt.req, a, err, tt.status)
		}
	}
	if len(b.kicked) != 0 {
		t.Errorf("a forwarded request disconnected %v", b.kicked)
	}
}

// TestSubscriptionsAcrossNodes: the subscriptions list gathers every
// node's, pages through them in one order with their nodes, restricts
// to one node on request, and names the nodes that did not answer.
func TestSubscriptionsAcrossNodes(t *testing.T) {
	sub := func(id, f string) core.SubscriptionInfo { return core.SubscriptionInfo{ClientID: id, Filter: f} }
	c := newFakeCluster(t,
		&fakeBroker{subs: []core.SubscriptionInfo{sub("a", "x"), sub("d", "x")}},
		&fakeBroker{subs: []core.SubscriptionInfo{sub("b", "x"), sub("b", "y"), sub("e", "x")}},
		&fakeBroker{subs: []core.SubscriptionInfo{sub("c", "x")}})
	list := func(node, query string) subscriptionsJSON {
		t.Helper()
		r := c.get(t, node, "/api/v1/subscriptions?"+query, admin)
		var p subscriptionsJSON
		if err := json.Unmarshal(r.body, &p); err != nil || r.status != 200 {
			t.Fatalf("%s: %d %s", query, r.status, r.body)
		}
		return p
	}
	keys := func(p subscriptionsJSON) (out []string) {
		for _, s := range p.Items {
			out = append(out, s.Node+":"+s.ClientID+"/"+s.Filter)
		}
		return out
	}
	want := []string{"n1:a/x", "n2:b/x", "n2:b/y", "n3:c/x", "n1:d/x", "n2:e/x"}
	for _, node := range []string{"n1", "n3"} {
		var got []string
		p := list(node, "limit=2")
		if p.Total == nil || *p.Total != 6 {
			t.Errorf("on %s: total %v, want 6", node, p.Total)
		}
		for pages := 0; ; pages++ {
			got = append(got, keys(p)...)
			if p.Next == "" || pages > 5 {
				break
			}
			p = list(node, "limit=2&after="+p.Next)
		}
		if !slices.Equal(got, want) {
			t.Errorf("pages on %s: %q, want %q", node, got, want)
		}
	}
	if got := keys(list("n1", "node=n2")); !slices.Equal(got, []string{"n2:b/x", "n2:b/y", "n2:e/x"}) {
		t.Errorf("node=n2: %q", got)
	}
	if got := keys(list("n1", "node=n1&limit=1")); !slices.Equal(got, []string{"n1:a/x"}) {
		t.Errorf("node=n1: %q", got)
	}
	if r := c.get(t, "n1", "/api/v1/subscriptions?node=n9", admin); r.status != 404 {
		t.Errorf("node=n9: %d %s", r.status, r.body)
	}
	c.down["n2"] = true
	p := list("n1", "")
	if got := keys(p); !slices.Equal(got, []string{"n1:a/x", "n3:c/x", "n1:d/x"}) || !slices.Equal(p.NodesMissing, []string{"n2"}) || p.Total != nil {
		t.Errorf("n2 down: %q, missing %q, total %v", got, p.NodesMissing, p.Total)
	}
}

// TestMergePagesStopsAtANodesCursor: a node whose page came back short
// with more to come (a search's budget) bounds the merged page: nothing
// past its cursor, whose items beyond are not known yet.
func TestMergePagesStopsAtANodesCursor(t *testing.T) {
	s := func(id string) subscriptionJSON {
		return subscriptionJSON{SubscriptionInfo: core.SubscriptionInfo{ClientID: id, Filter: "f"}}
	}
	p := mergePages([]nodePage{
		{items: []subscriptionJSON{s("a"), s("c"), s("e")}},
		{items: []subscriptionJSON{s("b")}, next: []string{"d", "f"}},
	}, 10)
	var got []string
	for _, it := range p.Items {
		got = append(got, it.ClientID)
	}
	if !slices.Equal(got, []string{"a", "b", "c"}) || p.Next != encodeCursor('s', "d", "f") || p.Total != nil {
		t.Fatalf("merged %q next %q total %v; want a b c, next after d/f", got, p.Next, p.Total)
	}
}
