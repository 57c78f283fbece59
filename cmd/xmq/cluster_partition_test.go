//go:build unix

package main

// A network partition between real xmq nodes: every route between two
// nodes goes through a TCP proxy of the test, which can cut a node off
// from the others and let it back.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// linkProxy forwards the TCP connections it accepts to target while up;
// cut closes those open and refuses new ones until heal.
type linkProxy struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

func newLinkProxy(t *testing.T, target string) *linkProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &linkProxy{l: l, target: target, conns: map[net.Conn]struct{}{}}
	done := make(chan struct{})
	go p.serve(done)
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		p.cut()
	})
	return p
}

func (p *linkProxy) addr() string { return p.l.Addr().String() }

func (p *linkProxy) serve(done chan struct{}) {
	defer close(done)
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

func (p *linkProxy) pipe(in net.Conn) {
	p.mu.Lock()
	down := p.down
	p.mu.Unlock()
	if down {
		_ = in.Close()
		return
	}
	out, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		_ = in.Close()
		return
	}
	p.mu.Lock()
	if p.down { // cut meanwhile
		p.mu.Unlock()
		_ = in.Close()
		_ = out.Close()
		return
	}
	p.conns[in], p.conns[out] = struct{}{}, struct{}{}
	p.mu.Unlock()
	copyClose := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
	}
	go copyClose(out, in)
	copyClose(in, out)
	p.mu.Lock()
	delete(p.conns, in)
	delete(p.conns, out)
	p.mu.Unlock()
}

func (p *linkProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *linkProxy) heal() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// proxiedCluster starts n nodes whose routes to each other all go
// through a proxy per direction (links[i][j]: node i to node j), with
// the web server on, heartbeats every interval and $SYS every second.
// Each node advertises a closed port as its route address: no node
// learns another's real address by gossip and connects around the
// proxies; the configured routes make the whole mesh.
func proxiedCluster(t *testing.T, n int, interval time.Duration) ([]*proc, [][]*linkProxy) {
	t.Helper()
	bin, err := xmqBinary()
	if err != nil {
		t.Skipf("cannot build xmq: %v", err)
	}
	ports := make([]int, n)
	for i := range n {
		ports[i] = mqtttest.FreePort(t)
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := closed.Addr().String()
	_ = closed.Close()
	links := make([][]*linkProxy, n)
	cfgs := make([]string, n)
	for i := range n {
		links[i] = make([]*linkProxy, n)
		var routes []string
		for j := range n {
			if j != i {
				links[i][j] = newLinkProxy(t, fmt.Sprintf("127.0.0.1:%d", ports[j]))
				routes = append(routes, links[i][j].addr())
			}
		}
		cfgs[i] = writeFile(t, fmt.Sprintf(`broker:
  sys_interval: 1s
web:
  allow_anonymous_loopback: true
cluster:
  enabled: true
  node: n%d
  secret: %s
  heartbeat_interval: %s
  nats:
    embedded:
      listen: 127.0.0.1:%d
      client_listen: 127.0.0.1:0
      advertise: %s
      routes: [%s]
`, i+1, testClusterSecret, interval, ports[i], nowhere, strings.Join(routes, ", ")))
	}
	// The flag turns on the web server that spawnBroker turns off.
	procs := spawnNodes(t, bin, cfgs, "-web", "127.0.0.1:0")
	return procs, links
}

// webURL is the node's web server URL, from its log.
func webURL(t *testing.T, p *proc) string {
	t.Helper()
	re := regexp.MustCompile(`"msg":"dashboard, admin API and metrics","url":"(http://[^"]+)/"`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := re.FindStringSubmatch(p.stderr.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no web server logged\n%s", p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitLog waits until the node's log holds s.
func waitLog(t *testing.T, p *proc, s string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(p.stderr.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log within %v\n%s", s, d, p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitHTTP waits until GET url answers with every one of want in its body.
func waitHTTP(t *testing.T, url string, d time.Duration, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		_, body := httpGet(t, url)
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(body, w)
		}
		if ok {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: no %q within %v:\n%s", url, want, d, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type nodesAnswer struct {
	Node        string `json:"node"`
	Reachable   int    `json:"reachable"`
	Unreachable int    `json:"unreachable"`
	Items       []struct {
		Node      string   `json:"node"`
		Reachable bool     `json:"reachable"`
		Ready     bool     `json:"ready"`
		Routes    int      `json:"routes"`
		Clients   int      `json:"clients_connected"`
		Listeners []string `json:"listeners"`
	} `json:"items"`
}

func getNodes(t *testing.T, base string) nodesAnswer {
	t.Helper()
	status, body := httpGet(t, base+"/api/v1/nodes")
	var a nodesAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil || status != 200 {
		t.Fatalf("GET /api/v1/nodes: %d %s", status, body)
	}
	return a
}

// waitNodes waits until the node's GET /api/v1/nodes satisfies ok.
func waitNodes(t *testing.T, base string, ok func(nodesAnswer) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a := getNodes(t, base)
		if ok(a) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/api/v1/nodes: %+v", base, a)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClusterPartition: node n1 cut off from n2 and n3 logs both as
// unreachable (and they n1), shows it in /metrics (unreachable nodes, no
// routes) and /readyz; once the links are back, without a restart,
// routing resumes (a PUBLISH on n1 reaches a subscriber on n2 again),
// the node tables are whole and the partition is logged as healed. The
// nodes API, the cross-node lookups and $SYS cluster totals are checked
// on the way.
func TestClusterPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	const interval = 200 * time.Millisecond
	nodes, links := proxiedCluster(t, 3, interval)
	waitStateReady(t, nodes...)
	web := make([]string, len(nodes))
	for i, p := range nodes {
		web[i] = webURL(t, p)
	}
	pub := pahoConnect(t, nodes[0].addr, "ppub")
	sub := pahoConnect(t, nodes[1].addr, "psub")
	sub.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "part/#", QoS: 1}}})
	awaitInterest(t, pub, "part/probe", sub)
	sys := pahoConnect(t, nodes[0].addr, "psys")
	sys.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "$SYS/broker/cluster/#"}}})

	// The whole cluster, as every node sees it.
	// Each heartbeat says whether its node is ready: the one after its
	// state is, up to an interval after the log says so.
	for i := range nodes {
		waitNodes(t, web[i], func(a nodesAnswer) bool {
			ready := 0
			for _, n := range a.Items {
				if n.Ready {
					ready++
				}
			}
			return a.Reachable == 3 && ready == 3
		})
	}
	a := getNodes(t, web[0])
	if a.Node != "n1" || len(a.Items) != 3 || a.Items[1].Node != "n2" || a.Items[1].Routes != 2 || !a.Items[1].Ready ||
		len(a.Items[1].Listeners) != 1 || !strings.HasPrefix(a.Items[1].Listeners[0], "tcp://127.0.0.1:") {
		t.Fatalf("n1's nodes: %+v", a)
	}
	// The client on n2 and its subscription, asked on n1.
	waitHTTP(t, web[0]+"/api/v1/clients/psub", 10*time.Second, `"client_id":"psub"`, `"node":"n2"`)
	waitHTTP(t, web[0]+"/api/v1/subscriptions?client_id=p", 10*time.Second, `"filter":"part/#"`, `"node":"n2"`, `"$SYS/broker/cluster/#"`, `"node":"n1"`)
	// $SYS totals on n1: 3 nodes, the 3 clients connected (ppub, psys on n1, psub on n2).
	sysValue(t, sys, "$SYS/broker/cluster/nodes/reachable", "3")
	sysValue(t, sys, "$SYS/broker/cluster/clients/connected", "3")

	for j := 1; j < 3; j++ {
		links[0][j].cut()
		links[j][0].cut()
	}
	cutAt := time.Now()
	waitLog(t, nodes[0], `"msg":"node n2 unreachable: no heartbeat for `, 10*time.Second)
	waitLog(t, nodes[0], `"msg":"node n3 unreachable: no heartbeat for `, 10*time.Second)
	waitLog(t, nodes[1], `"msg":"node n1 unreachable: no heartbeat for `, 10*time.Second)
	t.Logf("partition detected in %v (heartbeat every %v)", time.Since(cutAt), interval)
	waitHTTP(t, web[0]+"/metrics", 5*time.Second, `xmq_cluster_nodes{node="n1",state="unreachable"} 2`,
		`xmq_cluster_nodes{node="n1",state="reachable"} 1`, `xmq_cluster_node_unreachable_total{node="n1"} 2`,
		`xmq_cluster_routes{node="n1"} 0`)
	waitHTTP(t, web[1]+"/metrics", 5*time.Second, `xmq_cluster_nodes{node="n2",state="unreachable"} 1`,
		`xmq_cluster_nodes{node="n2",state="reachable"} 2`)
	if status, body := httpGet(t, web[0]+"/readyz"); status != 503 {
		t.Errorf("n1 cut off: /readyz %d %s, want 503", status, body)
	}
	if a := getNodes(t, web[0]); a.Unreachable != 2 || a.Items[1].Reachable {
		t.Errorf("n1's nodes while cut off: %+v", a)
	}
	sysValue(t, sys, "$SYS/broker/cluster/nodes/reachable", "1")

	for j := 1; j < 3; j++ {
		links[0][j].heal()
		links[j][0].heal()
	}
	healAt := time.Now()
	waitLog(t, nodes[0], `"msg":"node n2 reachable again after `, 20*time.Second)
	waitLog(t, nodes[1], `"msg":"node n1 reachable again after `, 20*time.Second)
	awaitInterest(t, pub, "part/probe", sub)
	t.Logf("healed in %v: routing and heartbeats back", time.Since(healAt))
	pub.publish(t, &paho.Publish{Topic: "part/after", QoS: 1, Payload: []byte("healed")})
	if p := sub.next(t); string(p.Payload) != "healed" {
		t.Fatalf("after the heal got %q", p.Payload)
	}
	for i := range nodes {
		waitHTTP(t, web[i]+"/api/v1/nodes", 10*time.Second, `"reachable":3`, `"unreachable":0`)
	}
	waitHTTP(t, web[0]+"/metrics", 5*time.Second, `xmq_cluster_nodes{node="n1",state="unreachable"} 0`,
		`xmq_cluster_node_unreachable_total{node="n1"} 2`, `xmq_cluster_routes{node="n1"} `)
	waitHTTP(t, web[0]+"/readyz", 10*time.Second, `"ready"`)
	sysValue(t, sys, "$SYS/broker/cluster/nodes/reachable", "3")
	if c := strings.Count(nodes[0].stderr.String(), `"msg":"node n2 unreachable`); c != 1 {
		t.Errorf("n1 logged n2 unreachable %d times, want once", c)
	}
}

// sysValue waits until topic carries want on c (a $SYS subscriber).
func sysValue(t *testing.T, c *pahoClient, topic, want string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	last := ""
	for {
		select {
		case p := <-c.msgs:
			if p.Topic == topic {
				if last = string(p.Payload); last == want {
					return
				}
			}
		case <-deadline:
			t.Fatalf("%s: %q, want %q within 10s", topic, last, want)
		}
	}
}
