//go:build unix

package main

// Cluster tests: three real xmq processes on loopback, each with its
// embedded NATS server routed to the others, and paho clients on
// different nodes.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	"github.com/nats-io/nats.go"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// clusterNodes starts n xmq processes forming one cluster and returns
// them, each with its own data directory.
func clusterNodes(t *testing.T, n int) []*proc {
	t.Helper()
	nodes, _ := clusterNodesPorts(t, n, n)
	return nodes
}

// clusterNodesPorts starts the first n of m nodes (the others may join
// later: every node routes to all m route ports) and returns them with
// the route ports.
func clusterNodesPorts(t *testing.T, n, m int) ([]*proc, []int) {
	t.Helper()
	return clusterNodesConfig(t, n, m, "")
}

// clusterNodesConfig is clusterNodesPorts with extra lines (indented) in
// each node's cluster section.
func clusterNodesConfig(t *testing.T, n, m int, extra string) ([]*proc, []int) {
	t.Helper()
	bin, err := xmqBinary()
	if err != nil {
		t.Skipf("cannot build xmq: %v", err)
	}
	var ports []int
	for range m {
		ports = append(ports, mqtttest.FreePort(t))
	}
	cfgs := make([]string, m)
	for i := range m {
		var routes []string
		for j, p := range ports {
			if j != i {
				routes = append(routes, fmt.Sprintf("127.0.0.1:%d", p))
			}
		}
		// Secured as a deployment is: a secret, and a NATS application
		// user on the client port (TestClusterNATSApplication).
		cfgs[i] = writeFile(t, fmt.Sprintf(`cluster:
  enabled: true
  node: n%d
  secret: %s
  nats:
    embedded:
      listen: 127.0.0.1:%d
      client_listen: 127.0.0.1:0
      routes: [%s]
      users: [{name: app, password: %s}]
%s`, i+1, testClusterSecret, ports[i], strings.Join(routes, ", "), testAppPassword, extra))
	}
	clusterConfigs = cfgs
	return spawnNodes(t, bin, cfgs[:n]), ports
}

// The test clusters' secret and their NATS application's password.
const (
	testClusterSecret = "cluster-test-secret-0123456789"
	testAppPassword   = "app-password"
)

// clusterConfigs are the configuration files of the last clusterNodesPorts.
var clusterConfigs []string

// startNode starts node i (from 0) of the last clusterNodesPorts.
func startNode(t *testing.T, i int) *proc {
	t.Helper()
	bin, err := xmqBinary()
	if err != nil {
		t.Skip(err)
	}
	return spawnNodes(t, bin, clusterConfigs[i:i+1])[0]
}

// waitStateReady waits until each node logs that its replicated state
// (client id registry, retained messages) is in use.
func waitStateReady(t *testing.T, nodes ...*proc) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range nodes {
		for !strings.Contains(p.stderr.String(), `"msg":"cluster state ready"`) {
			if time.Now().After(deadline) {
				t.Fatalf("cluster state not ready within 30s\n%s", p.stderr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// spawnNodes starts one xmq per configuration file, at once, each with
// the arguments extra too.
func spawnNodes(t *testing.T, bin string, cfgs []string, extra ...string) []*proc {
	t.Helper()
	procs := make([]*proc, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		dir := t.TempDir()
		wg.Go(func() {
			if procs[i], errs[i] = spawnBroker(bin, dir, append([]string{"-c", cfg}, extra...)...); procs[i] != nil {
				procs[i].dir = dir
			}
		})
	}
	wg.Wait()
	for i, p := range procs {
		if p != nil {
			t.Cleanup(p.kill)
		}
		if errs[i] != nil {
			t.Fatalf("node %d: %v", i+1, errs[i])
		}
	}
	return procs
}

// pahoClient is an MQTT 5 paho.golang client whose received messages
// arrive on msgs.
type pahoClient struct {
	*paho.Client
	msgs chan *paho.Publish
	gone chan *paho.Disconnect // the server's DISCONNECT
}

// connectTimeout bounds pahoConnect's wait for CONNACK.
var connectTimeout = 30 * time.Second

// pahoConnect connects an MQTT 5 client with id to addr.
func pahoConnect(t *testing.T, addr, id string, mods ...func(*paho.Connect)) *pahoClient {
	t.Helper()
	c, _ := pahoConnectAck(t, addr, id, mods...)
	return c
}

// pahoConnectAck is pahoConnect returning the CONNACK too.
func pahoConnectAck(t *testing.T, addr, id string, mods ...func(*paho.Connect)) (*pahoClient, *paho.Connack) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := &pahoClient{msgs: make(chan *paho.Publish, 10000), gone: make(chan *paho.Disconnect, 1)}
	c.Client = paho.NewClient(paho.ClientConfig{
		// Thread-safe: paho writes a packet in several Writes, and its
		// pinger must not slip a PINGREQ between them (e2e/pahoConn).
		ClientID: id, Conn: packets.NewThreadSafeConn(conn), PacketTimeout: connectTimeout,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(r paho.PublishReceived) (bool, error) {
			c.msgs <- r.Packet
			return true, nil
		}},
		OnClientError:      func(error) {},
		OnServerDisconnect: func(d *paho.Disconnect) { c.gone <- d },
	})
	cp := &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30}
	for _, m := range mods {
		m(cp)
	}
	// Long enough for a claim that waits out the election of the
	// registry's and the session stream's leaders after a node's death
	// (up to 10 s each), under the race detector.
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	ack, err := c.Connect(ctx, cp)
	if err != nil {
		t.Fatalf("connect %s to %s: %v (%+v)", id, addr, err, ack)
	}
	t.Cleanup(func() {
		_ = c.Disconnect(&paho.Disconnect{})
		_ = conn.Close()
	})
	return c, ack
}

func (c *pahoClient) subscribe(t *testing.T, s *paho.Subscribe) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ack, err := c.Subscribe(ctx, s)
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	for i, rc := range ack.Reasons {
		if rc > 2 {
			t.Fatalf("SUBACK %#x for %s", rc, s.Subscriptions[i].Topic)
		}
	}
}

func (c *pahoClient) publish(t *testing.T, p *paho.Publish) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Publish(ctx, p); err != nil {
		t.Fatalf("publish %s: %v", p.Topic, err)
	}
}

// next returns the next message that is not a probe (awaitInterest).
func (c *pahoClient) next(t *testing.T) *paho.Publish {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case p := <-c.msgs:
			if string(p.Payload) == "probe" {
				continue
			}
			return p
		case <-timeout:
			t.Fatal("no message within 5s")
			return nil
		}
	}
}

// nothing checks that no message (but probes) arrives for a while.
func (c *pahoClient) nothing(t *testing.T, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case p := <-c.msgs:
			if string(p.Payload) != "probe" {
				t.Fatalf("unexpected message %s %q (QoS %d, retain %v, dup %v, %+v)", p.Topic, p.Payload, p.QoS, p.Retain, p.Duplicate(), p.Properties)
			}
		case <-timeout:
			return
		}
	}
}

// awaitInterest publishes probes to topic from pub until every sub has
// one: subscriptions reach the other nodes asynchronously, not by SUBACK
// (docs/cluster.md). The probes left over are skipped by next.
func awaitInterest(t *testing.T, pub *pahoClient, topic string, subs ...*pahoClient) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, s := range subs {
	wait:
		for {
			pub.publish(t, &paho.Publish{Topic: topic, Payload: []byte("probe")})
			select {
			case p := <-s.msgs:
				if string(p.Payload) != "probe" {
					t.Fatalf("message %s %q before the probes", p.Topic, p.Payload)
				}
				break wait
			case <-time.After(25 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("no probe on %s reached a subscriber within 10s", topic)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestClusterRouting: a PUBLISH on one node reaches the matching
// subscribers on the others with one node's semantics: QoS downgrade,
// retain as published, subscription identifiers, properties, message
// expiry counting the transit, topic aliases of the publisher, order per
// publisher.
func TestClusterRouting(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	nodes := clusterNodes(t, 3)
	pub := pahoConnect(t, nodes[0].addr, "pub")
	s2 := pahoConnect(t, nodes[1].addr, "s2")
	s3 := pahoConnect(t, nodes[2].addr, "s3")
	s2.subscribe(t, &paho.Subscribe{Properties: &paho.SubscribeProperties{SubscriptionIdentifier: ptr(5)},
		Subscriptions: []paho.SubscribeOptions{{Topic: "c/#", QoS: 1, RetainAsPublished: true}}})
	s3.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "c/+/x", QoS: 0}}})
	awaitInterest(t, pub, "c/probe/x", s2, s3)

	props := &paho.PublishProperties{ContentType: "text/plain", ResponseTopic: "re/ply", CorrelationData: []byte{1, 2, 3},
		PayloadFormat: ptr(byte(1)), MessageExpiry: ptr(uint32(60)),
		User: paho.UserProperties{{Key: "a", Value: "1"}, {Key: "a", Value: "2"}, {Key: "k.e y", Value: "v\nw"}}}
	pub.publish(t, &paho.Publish{Topic: "c/a/x", QoS: 2, Retain: true, Payload: []byte("hello"), Properties: props})
	got2, got3 := s2.next(t), s3.next(t)
	for _, g := range []struct {
		name   string
		p      *paho.Publish
		qos    byte
		retain bool
		subID  int
	}{{"s2", got2, 1, true, 5}, {"s3", got3, 0, false, 0}} {
		p := g.p
		if p.Topic != "c/a/x" || string(p.Payload) != "hello" || p.QoS != g.qos || p.Retain != g.retain {
			t.Errorf("%s got %s %q QoS %d retain %v; want QoS %d retain %v", g.name, p.Topic, p.Payload, p.QoS, p.Retain, g.qos, g.retain)
		}
		pp := p.Properties
		if pp == nil {
			t.Fatalf("%s: no properties", g.name)
		}
		if pp.ContentType != "text/plain" || pp.ResponseTopic != "re/ply" || !bytes.Equal(pp.CorrelationData, []byte{1, 2, 3}) ||
			pp.PayloadFormat == nil || *pp.PayloadFormat != 1 || !slices.Equal(pp.User, props.User) {
			t.Errorf("%s: properties %+v, want %+v", g.name, pp, props)
		}
		if pp.MessageExpiry == nil || *pp.MessageExpiry < 58 || *pp.MessageExpiry > 60 {
			t.Errorf("%s: message expiry %v, want the 60s less the transit", g.name, pp.MessageExpiry)
		}
		if id := pp.SubscriptionIdentifier; (g.subID == 0) != (id == nil) || id != nil && *id != g.subID {
			t.Errorf("%s: subscription identifier %v, want %d", g.name, id, g.subID)
		}
	}

	// The publisher's topic alias is resolved on its node.
	pub.publish(t, &paho.Publish{Topic: "c/alias/x", QoS: 1, Payload: []byte("a1"), Properties: &paho.PublishProperties{TopicAlias: ptr(uint16(1))}})
	pub.publish(t, &paho.Publish{QoS: 1, Payload: []byte("a2"), Properties: &paho.PublishProperties{TopicAlias: ptr(uint16(1))}})
	for _, want := range []string{"a1", "a2"} {
		if p := s2.next(t); p.Topic != "c/alias/x" || string(p.Payload) != want {
			t.Errorf("s2 got %s %q, want c/alias/x %q", p.Topic, p.Payload, want)
		}
		if p := s3.next(t); p.Topic != "c/alias/x" || string(p.Payload) != want {
			t.Errorf("s3 got %s %q, want c/alias/x %q", p.Topic, p.Payload, want)
		}
	}

	// Order per publisher per subscriber, QoS 0 and 1 interleaved.
	const n = 300
	for i := range n {
		pub.publish(t, &paho.Publish{Topic: "c/o/x", QoS: byte(i % 2), Payload: fmt.Appendf(nil, "%d", i)})
	}
	for _, s := range []*pahoClient{s2, s3} {
		for i := range n {
			if p := s.next(t); string(p.Payload) != fmt.Sprint(i) {
				t.Fatalf("message %d: got %q", i, p.Payload)
			}
		}
	}
	// What no subscriber matches goes nowhere.
	pub.publish(t, &paho.Publish{Topic: "other/x", QoS: 1, Payload: []byte("none")})
	s2.nothing(t, 200*time.Millisecond)
	s3.nothing(t, 0)

	// A subscriber on the publisher's node and one on another get it once each.
	s1 := pahoConnect(t, nodes[0].addr, "s1")
	s1.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "c/+", QoS: 1}}})
	pub.publish(t, &paho.Publish{Topic: "c/both", QoS: 1, Payload: []byte("both")})
	for _, s := range []*pahoClient{s1, s2} {
		if p := s.next(t); string(p.Payload) != "both" {
			t.Errorf("got %q", p.Payload)
		}
		s.nothing(t, 150*time.Millisecond)
	}
}

// TestClusterTakeover: one client id, one connection cluster-wide. A
// connection on another node takes it over (MQTT 5: DISCONNECT Session
// taken over; 3.1.1: closed); two nodes connecting one id at once end
// with one connection.
func TestClusterTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	nodes := clusterNodes(t, 3)
	waitStateReady(t, nodes...)
	old := pahoConnect(t, nodes[0].addr, "dev")
	pahoConnect(t, nodes[1].addr, "dev")
	select {
	case d := <-old.gone:
		if d.ReasonCode != 0x8E {
			t.Errorf("DISCONNECT %#x, want 0x8E Session taken over", d.ReasonCode)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the connection on node 1 was not taken over")
	}

	v3, _, err := dialMQTT(t, nodes[0].addr, "old311", 4, true)
	if err != nil {
		t.Fatal(err)
	}
	defer v3.Close()
	pahoConnect(t, nodes[2].addr, "old311")
	if p, _, err := v3.NextWithin(5 * time.Second); err == nil {
		t.Errorf("3.1.1 connection got %v, want it closed", p)
	}

	// Two nodes at once, several times: one connection stays.
	for i := range 3 {
		id := fmt.Sprintf("racer-%d", i)
		var b, c *pahoClient
		var wg sync.WaitGroup
		wg.Go(func() { b = pahoConnect(t, nodes[1].addr, id) })
		wg.Go(func() { c = pahoConnect(t, nodes[2].addr, id) })
		wg.Wait()
		var gone int
		for _, cl := range []*pahoClient{b, c} {
			select {
			case <-cl.gone:
				gone++
			case <-time.After(time.Second):
			}
		}
		if gone != 1 {
			t.Errorf("%s: %d of two racing connections taken over, want 1", id, gone)
		}
	}
}

// TestClusterRetained: a retained message set on one node is seen by a
// new subscriber on another, cleared everywhere, and survives the loss of
// the node that set it (a node joining afterwards gets it from the replicas).
func TestClusterRetained(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four brokers")
	}
	nodes, _ := clusterNodesPorts(t, 3, 4)
	waitStateReady(t, nodes...)
	pub := pahoConnect(t, nodes[0].addr, "rpub")
	pub.publish(t, &paho.Publish{Topic: "rt/a", QoS: 1, Retain: true, Payload: []byte("kept"),
		Properties: &paho.PublishProperties{ContentType: "ct", User: paho.UserProperties{{Key: "k", Value: "v"}}}})
	pub.publish(t, &paho.Publish{Topic: "rt/b", QoS: 1, Retain: true, Payload: []byte("cleared")})
	pub.publish(t, &paho.Publish{Topic: "rt/b", QoS: 1, Retain: true})

	// retainedOn subscribes a new client on addr to rt/# and returns what
	// it gets, waiting for the replication (asynchronous) to show want.
	// After a node's loss the others' watches of the bucket resume once
	// NATS notices (missed heartbeats, seconds): the generous deadline.
	retainedOn := func(addr, want string) []*paho.Publish {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for i := 0; ; i++ {
			s := pahoConnect(t, addr, fmt.Sprintf("rsub-%d", i))
			s.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "rt/#", QoS: 1}}})
			var got []*paho.Publish
			var payloads []string
		collect:
			for {
				select {
				case p := <-s.msgs:
					got = append(got, p)
					payloads = append(payloads, string(p.Payload))
				case <-time.After(200 * time.Millisecond):
					break collect
				}
			}
			_ = s.Disconnect(&paho.Disconnect{})
			if strings.Join(payloads, ",") == want {
				return got
			}
			if time.Now().After(deadline) {
				t.Errorf("retained on %s: %q, want %q", addr, payloads, want)
				return got
			}
		}
	}
	got := retainedOn(nodes[2].addr, "kept")
	if p := got[0]; p.Topic != "rt/a" || !p.Retain || p.Properties == nil || p.Properties.ContentType != "ct" ||
		!slices.Equal(p.Properties.User, paho.UserProperties{{Key: "k", Value: "v"}}) {
		t.Errorf("retained on node 3: %+v", p)
	}
	retainedOn(nodes[1].addr, "kept")

	// The node that set it dies; a new node gets it from the others.
	nodes[0].kill()
	killed := time.Now()
	n4 := startNode(t, 3)
	waitStateReady(t, n4)
	retainedOn(n4.addr, "kept")
	// Cleared on one node: gone from all.
	clr := pahoConnect(t, nodes[1].addr, "rclear")
	clr.publish(t, &paho.Publish{Topic: "rt/a", QoS: 1, Retain: true})
	start := time.Now()
	retainedOn(n4.addr, "")
	retainedOn(nodes[2].addr, "")
	t.Logf("cleared on every node %v after the clear, %v after the kill", time.Since(start).Round(100*time.Millisecond),
		time.Since(killed).Round(100*time.Millisecond))
	if t.Failed() {
		t.Logf("node 2:\n%s\nnode 4:\n%s", nodes[1].stderr, n4.stderr)
	}
}

// TestClusterSubscribeThenPublish: once SUBACK is in, a message published
// on another node reaches the subscription, without waiting or probing:
// request/response across nodes, where the answer follows the SUBACK.
func TestClusterSubscribeThenPublish(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	nodes := clusterNodes(t, 3)
	pub := pahoConnect(t, nodes[0].addr, "answerer")
	sub := pahoConnect(t, nodes[1].addr, "requester")
	sub.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "warm/probe"}}})
	awaitInterest(t, pub, "warm/probe", sub) // the routes are up
	for i := range 20 {
		reply := fmt.Sprintf("reply/%d", i)
		sub.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: reply, QoS: 1}}})
		pub.publish(t, &paho.Publish{Topic: reply, QoS: 1, Payload: []byte("answer")})
		if p := sub.next(t); p.Topic != reply {
			t.Fatalf("got %q, want the answer on %s", p.Topic, reply)
		}
	}
}

// TestClusterShared: each message to a shared group goes to exactly one
// member cluster-wide, to a member on the publisher's node when there is
// one.
func TestClusterShared(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	nodes := clusterNodes(t, 3)
	pub := pahoConnect(t, nodes[0].addr, "spub")
	m2 := pahoConnect(t, nodes[1].addr, "m2")
	m3 := pahoConnect(t, nodes[2].addr, "m3")
	for _, m := range []*pahoClient{m2, m3} {
		m.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "$share/g/sh/#", QoS: 1}}})
	}
	awaitInterest(t, pub, "sh/probe", m2, m3)
	const n = 100
	for i := range n {
		pub.publish(t, &paho.Publish{Topic: "sh/x", QoS: 1, Payload: fmt.Appendf(nil, "%d", i)})
	}
	got := map[string]int{}
	count := func(name string, m *pahoClient, d time.Duration) {
		timeout := time.After(d)
		for {
			select {
			case p := <-m.msgs:
				if string(p.Payload) != "probe" {
					got[name]++
					got[string(p.Payload)]++
				}
			case <-timeout:
				return
			}
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for got["m2"]+got["m3"] < n && time.Now().Before(deadline) {
		count("m2", m2, 20*time.Millisecond)
		count("m3", m3, 20*time.Millisecond)
	}
	count("m2", m2, 100*time.Millisecond)
	count("m3", m3, 0)
	if got["m2"]+got["m3"] != n || got["m2"] == 0 || got["m3"] == 0 {
		t.Errorf("members on nodes 2 and 3 got %d and %d of %d messages, want each once over both", got["m2"], got["m3"], n)
	}
	for i := range n {
		if got[fmt.Sprint(i)] != 1 {
			t.Errorf("message %d delivered %d times", i, got[fmt.Sprint(i)])
		}
	}
	// A member on the publisher's node: it gets them all.
	m1 := pahoConnect(t, nodes[0].addr, "m1")
	m1.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "$share/g/sh/#", QoS: 1}}})
	for i := range 20 {
		pub.publish(t, &paho.Publish{Topic: "sh/y", QoS: 1, Payload: fmt.Appendf(nil, "local %d", i)})
	}
	for i := range 20 {
		if p := m1.next(t); string(p.Payload) != fmt.Sprintf("local %d", i) {
			t.Fatalf("local member got %q", p.Payload)
		}
	}
	m2.nothing(t, 200*time.Millisecond)
	m3.nothing(t, 0)

	// The only member on the publisher's node leaves with messages it did
	// not acknowledge: they go to the members on the other nodes, once.
	if err := m1.Disconnect(&paho.Disconnect{}); err != nil {
		t.Fatal(err)
	}
	lazy, _, err := dialMQTT(t, nodes[0].addr, "lazy", codec.V5, true)
	if err != nil {
		t.Fatal(err)
	}
	lazy.Send(&codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: []byte("$share/g/sh/#"), QoS: 1}}})
	mqtttest.Expect[*codec.Suback](lazy)
	const unacked = 10
	for i := range unacked {
		pub.publish(t, &paho.Publish{Topic: "sh/z", QoS: 1, Payload: fmt.Appendf(nil, "unacked %d", i)})
	}
	for i := range unacked {
		if p := mqtttest.Expect[*codec.Publish](lazy); string(p.Payload) != fmt.Sprintf("unacked %d", i) {
			t.Fatalf("the member on node 1 got %q", p.Payload)
		}
	}
	lazy.Close() // gone without acknowledging any
	clear(got)
	deadline = time.Now().Add(5 * time.Second)
	for got["m2"]+got["m3"] < unacked && time.Now().Before(deadline) {
		count("m2", m2, 20*time.Millisecond)
		count("m3", m3, 20*time.Millisecond)
	}
	count("m2", m2, 100*time.Millisecond)
	count("m3", m3, 0)
	for i := range unacked {
		if k := fmt.Sprintf("unacked %d", i); got[k] != 1 {
			t.Errorf("%s handed over to the other nodes' members %d times, want once", k, got[k])
		}
	}
}

// TestClusterNodeKilled: kill -9 of one of three nodes under QoS 1
// traffic between the other two loses nothing and keeps the order; its
// clients reconnect to another node and are routed to from there.
func TestClusterNodeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	nodes := clusterNodes(t, 3)
	pub := pahoConnect(t, nodes[0].addr, "kpub")
	sub := pahoConnect(t, nodes[1].addr, "ksub")
	sub.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "k/#", QoS: 1}}})
	victim := pahoConnect(t, nodes[2].addr, "kvictim")
	victim.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "k/#", QoS: 1}}})
	awaitInterest(t, pub, "k/probe", sub, victim)
	const n = 400
	for i := range n {
		if i == n/2 {
			nodes[2].kill()
		}
		pub.publish(t, &paho.Publish{Topic: "k/x", QoS: 1, Payload: fmt.Appendf(nil, "%d", i)})
	}
	for i := range n {
		if p := sub.next(t); string(p.Payload) != fmt.Sprint(i) {
			t.Fatalf("message %d: got %q", i, p.Payload)
		}
	}
	// The killed node's client comes back on node 1 and is routed to.
	routedAcross(t, nodes[1], nodes[0], "kpub2", "kvictim", "k")
}

// routedAcross checks that a QoS 1 message published on from by client
// pubID reaches subID, subscribed on to, under topic root prefix.
func routedAcross(t *testing.T, from, to *proc, pubID, subID, prefix string) {
	t.Helper()
	sub := pahoConnect(t, to.addr, subID)
	sub.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: prefix + "/#", QoS: 1}}})
	pub := pahoConnect(t, from.addr, pubID)
	awaitInterest(t, pub, prefix+"/probe", sub)
	pub.publish(t, &paho.Publish{Topic: prefix + "/y", QoS: 1, Payload: []byte("across")})
	if p := sub.next(t); string(p.Payload) != "across" {
		t.Errorf("%s got %q", subID, p.Payload)
	}
}

// TestClusterSharedSticky: with shared_strategy hash_clientid, the
// messages of each publisher on a node with no member of the group go
// all to one member, in order, whichever node it is on; the publishers
// are spread over the members of both other nodes.
func TestClusterSharedSticky(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	nodes, _ := clusterNodesConfig(t, 3, 3, "  heartbeat_interval: 200ms\nbroker:\n  shared_strategy: hash_clientid\n")
	m2 := pahoConnect(t, nodes[1].addr, "st2")
	m3 := pahoConnect(t, nodes[2].addr, "st3")
	for _, m := range []*pahoClient{m2, m3} {
		m.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "$share/g/st/#", QoS: 1}}})
	}
	const pubs, each = 12, 10
	var ps []*pahoClient
	for i := range pubs {
		ps = append(ps, pahoConnect(t, nodes[0].addr, fmt.Sprintf("stp%d", i)))
	}
	// Node 1 learns the group's nodes from their heartbeats.
	time.Sleep(time.Second)
	for i := range each {
		for p, c := range ps {
			c.publish(t, &paho.Publish{Topic: "st/x", QoS: 1, Payload: fmt.Appendf(nil, "%d %d", p, i)})
		}
	}
	got := map[int][]string{}
	deadline := time.After(10 * time.Second)
	for n := 0; n < pubs*each; n++ {
		var member string
		var payload []byte
		select {
		case m := <-m2.msgs:
			member, payload = "st2", m.Payload
		case m := <-m3.msgs:
			member, payload = "st3", m.Payload
		case <-deadline:
			t.Fatalf("%d of %d messages delivered", n, pubs*each)
		}
		var p, i int
		if _, err := fmt.Sscanf(string(payload), "%d %d", &p, &i); err != nil {
			t.Fatalf("payload %q", payload)
		}
		got[p] = append(got[p], fmt.Sprintf("%s %d", member, i))
	}
	m2.nothing(t, 200*time.Millisecond)
	m3.nothing(t, 0)
	members := map[string]int{}
	for p := range pubs {
		member, _, _ := strings.Cut(got[p][0], " ")
		members[member]++
		for i, d := range got[p] {
			if d != fmt.Sprintf("%s %d", member, i) {
				t.Errorf("publisher %d: got %q, want every message at one member, in order", p, got[p])
				break
			}
		}
	}
	if len(members) != 2 {
		t.Errorf("publishers per member %v: want both members used", members)
	}
}

// TestClusterNATSApplication: a NATS application connected to a node's
// embedded NATS server reads MQTT traffic published on any node on the
// mapped subjects, with QoS, properties and publisher in headers, and
// publishes into it: an MQTT subscriber on another node gets the message
// (docs/cluster.md, "NATS applications").
func TestClusterNATSApplication(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	nodes := clusterNodes(t, 3)
	url := natsURL(t, nodes[2])
	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Fatal("a NATS client without credentials was let in")
	}
	nc, err := nats.Connect(url, nats.UserInfo("app", testAppPassword))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	in, err := nc.SubscribeSync("mqtt.app.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	pub := pahoConnect(t, nodes[0].addr, "apppub")
	sub := pahoConnect(t, nodes[1].addr, "appsub")
	sub.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "app/from nats/#", QoS: 1}}})

	// MQTT → NATS: the node forwards only where there is interest; the
	// application's subscription is interest.
	var m *nats.Msg
	deadline := time.Now().Add(10 * time.Second)
	for m == nil && time.Now().Before(deadline) {
		pub.publish(t, &paho.Publish{Topic: "app/x.y", QoS: 1, Payload: []byte("to nats"),
			Properties: &paho.PublishProperties{ContentType: "text/plain", User: paho.UserProperties{{Key: "k", Value: "v"}}}})
		m, _ = in.NextMsg(200 * time.Millisecond)
	}
	if m == nil {
		t.Fatal("the NATS application got nothing")
	}
	if m.Subject != "mqtt.app.x%2Ey" || string(m.Data) != "to nats" || m.Header.Get("Mqtt-Qos") != "1" ||
		m.Header.Get("Mqtt-Content-Type") != "text%2Fplain" || m.Header.Get("Mqtt-User") != "k=v" || m.Header.Get("Mqtt-From") != "apppub" {
		t.Errorf("NATS got %s %q %v", m.Subject, m.Data, m.Header)
	}

	// NATS → MQTT: a plain NATS message (QoS 0) and one with headers. NATS
	// delivers at most once: until the subscriber's interest has reached the
	// application's server, a plain message goes nowhere (seen once under
	// load), so it is sent again until one arrives, as above.
	var plain *paho.Publish
	for deadline := time.Now().Add(10 * time.Second); plain == nil && time.Now().Before(deadline); {
		if err := nc.Publish("mqtt.app.from%20nats.plain", []byte("plain")); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-sub.msgs:
			if string(m.Payload) != "probe" { // awaitInterest's, as next skips them
				plain = m
			}
		case <-time.After(200 * time.Millisecond):
		}
	}
	if plain == nil {
		t.Fatal("the MQTT subscriber got nothing from NATS")
	}
	if plain.Topic != "app/from nats/plain" || string(plain.Payload) != "plain" || plain.QoS != 0 {
		t.Errorf("MQTT got %s %q QoS %d", plain.Topic, plain.Payload, plain.QoS)
	}
	h := nats.Header{}
	h.Set("Mqtt-Qos", "1")
	h.Set("Mqtt-Content-Type", "application%2Fjson")
	if err := nc.PublishMsg(&nats.Msg{Subject: "mqtt.app.from%20nats.rich", Data: []byte(`{"a":1}`), Header: h}); err != nil {
		t.Fatal(err)
	}
	p := sub.next(t)
	for string(p.Payload) == "plain" { // the resent ones
		p = sub.next(t)
	}
	if p.Topic != "app/from nats/rich" || p.QoS != 1 || p.Properties == nil || p.Properties.ContentType != "application/json" {
		t.Errorf("MQTT got %s QoS %d %+v", p.Topic, p.QoS, p.Properties)
	}
}
