//go:build unix

package main

// Sessions moving between nodes: a persistent-session client that
// reconnects to another node resumes its session there.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/xmq-io/xmq/codec"
)

// received is one delivery: its payload and DUP flag.
type received struct {
	payload string
	dup     bool
}

// checkMoved checks a moved session's deliveries: each of want at
// least once, in its publisher's order (a publisher is the payload's
// prefix before '-') of first deliveries; a message delivered again only
// with DUP; those of acked (acknowledged before the move) only with DUP,
// if at all; nothing else.
func checkMoved(t *testing.T, got []received, want, acked []string) {
	t.Helper()
	count := map[string]int{}
	last := map[string]int{} // publisher → index in want of its last first delivery
	index := map[string]int{}
	for i, w := range want {
		index[w] = i
	}
	isAcked := map[string]bool{}
	for _, a := range acked {
		isAcked[a] = true
	}
	for _, g := range got {
		count[g.payload]++
		switch {
		case isAcked[g.payload] || count[g.payload] > 1:
			if !g.dup {
				t.Errorf("%q delivered again without DUP (deliveries %v)", g.payload, got)
			}
			continue
		}
		i, ok := index[g.payload]
		if !ok {
			t.Errorf("unexpected %q", g.payload)
			continue
		}
		pub, _, _ := strings.Cut(g.payload, "-")
		if l, seen := last[pub]; seen && l > i {
			t.Errorf("%q delivered after %q: out of order (deliveries %v)", g.payload, want[l], got)
		}
		last[pub] = i
	}
	for _, w := range want {
		if count[w] == 0 {
			t.Errorf("%q lost (deliveries %v)", w, got)
		}
	}
}

// receiveAll collects the deliveries from next (ok false: nothing within
// its wait) until every one of want has come, then while more come
// within 300 ms (duplicates would).
func receiveAll(t *testing.T, want []string, next func(wait time.Duration) (received, bool)) []received {
	t.Helper()
	seen := map[string]bool{}
	var got []received
	deadline := time.Now().Add(10 * time.Second)
	for len(seen) < len(want) && time.Now().Before(deadline) {
		if r, ok := next(100 * time.Millisecond); ok {
			got = append(got, r)
			if strings.Contains(strings.Join(want, "\x00")+"\x00", r.payload+"\x00") {
				seen[r.payload] = true
			}
		}
	}
	for {
		r, ok := next(300 * time.Millisecond)
		if !ok {
			return got
		}
		got = append(got, r)
	}
}

// pahoNext reads c's deliveries for receiveAll, probes skipped.
func pahoNext(c *pahoClient) func(time.Duration) (received, bool) {
	return func(wait time.Duration) (received, bool) {
		timeout := time.After(wait)
		for {
			select {
			case p := <-c.msgs:
				if string(p.Payload) == "probe" {
					continue
				}
				return received{string(p.Payload), p.Duplicate()}, true
			case <-timeout:
				return received{}, false
			}
		}
	}
}

// awaitRegistry waits until the client id registry works across nodes:
// right after startup its JetStream bucket may still elect a leader, and
// a connection meanwhile is held on its node only (no session to move).
// A connection on the first node must be taken over from the second.
func awaitRegistry(t *testing.T, nodes ...*proc) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		id := fmt.Sprintf("registry-probe-%d", i)
		first := pahoConnect(t, nodes[0].addr, id)
		pahoConnect(t, nodes[1].addr, id)
		select {
		case <-first.gone:
			return
		case <-time.After(time.Second):
		}
		if time.Now().After(deadline) {
			t.Fatal("the client id registry does not work across nodes within 20s")
		}
	}
}

// persistentV5 makes a paho CONNECT resume or keep its session (Clean
// Start 0, Session Expiry 300 s).
func persistentV5(cp *paho.Connect) {
	cp.CleanStart = false
	cp.Properties = &paho.ConnectProperties{SessionExpiryInterval: ptr(uint32(300))}
}

func payloadSeq(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// TestClusterSessionMoves (MQTT 5): a persistent session left offline on
// node 1 with QoS 1 messages queued from nodes 1 and 3 moves to node 2
// when its client reconnects there: Session Present, every message once
// in its publisher's order, and its subscription now on node 2, routed
// to from nodes 1 and 3, node 1 delivering nothing more. A session whose
// client is still connected on node 1, with messages in flight, moves
// too: the connection there gets DISCONNECT 0x8E, the unacknowledged
// messages come again with DUP.
func TestClusterSessionMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	nodes := clusterNodes(t, 3)
	waitStateReady(t, nodes...)
	awaitRegistry(t, nodes...)
	pubA := pahoConnect(t, nodes[0].addr, "mv-pub-a")
	pubC := pahoConnect(t, nodes[2].addr, "mv-pub-c")

	sub := pahoConnect(t, nodes[0].addr, "mover", persistentV5)
	sub.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "mv/#", QoS: 1}}})
	awaitInterest(t, pubC, "mv/probe", sub)
	if err := sub.Disconnect(&paho.Disconnect{}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 20 {
		a, c := fmt.Sprintf("a-%d", i), fmt.Sprintf("c-%d", i)
		pubA.publish(t, &paho.Publish{Topic: "mv/x", QoS: 1, Payload: []byte(a)})
		pubC.publish(t, &paho.Publish{Topic: "mv/y", QoS: 1, Payload: []byte(c)})
		want = append(want, a, c)
	}
	moved, ack := pahoConnectAck(t, nodes[1].addr, "mover", persistentV5)
	if !ack.SessionPresent {
		t.Fatalf("Session Present 0 on node 2\nnode 1:\n%s\nnode 2:\n%s", nodes[0].stderr, nodes[1].stderr)
	}
	checkMoved(t, receiveAll(t, want, pahoNext(moved)), want, nil)
	awaitInterest(t, pubA, "mv/probe", moved)
	awaitInterest(t, pubC, "mv/probe", moved)
	pubA.publish(t, &paho.Publish{Topic: "mv/x", QoS: 1, Payload: []byte("a-after")})
	pubC.publish(t, &paho.Publish{Topic: "mv/y", QoS: 1, Payload: []byte("c-after")})
	after := []string{"a-after", "c-after"}
	checkMoved(t, receiveAll(t, after, pahoNext(moved)), after, nil)
	if !strings.Contains(nodes[1].stderr.String(), `"msg":"session moved here"`) {
		t.Error("node 2 did not log the move")
	}

	// Still connected on node 1, three QoS 1 messages in flight.
	live, _, err := dialMQTT(t, nodes[0].addr, "live", codec.V5, false)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	live.Send(&codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: []byte("lv/#"), QoS: 1}}})
	if p := live.Next(); p.Type() != codec.SUBACK {
		t.Fatalf("got %v, want SUBACK", p)
	}
	sent := payloadSeq("l", 0, 5)
	for _, m := range sent {
		pubA.publish(t, &paho.Publish{Topic: "lv/x", QoS: 1, Payload: []byte(m)})
	}
	for i := range sent {
		p, ok := live.Next().(*codec.Publish)
		if !ok || string(p.Payload) != sent[i] {
			t.Fatalf("got %v, want PUBLISH %s", p, sent[i])
		}
		if i < 2 {
			live.Send(&codec.Ack{Kind: codec.PUBACK, PacketID: p.PacketID})
		}
	}
	time.Sleep(100 * time.Millisecond) // the two PUBACKs handled: they are not redelivered
	moved2, ack := pahoConnectAck(t, nodes[1].addr, "live", persistentV5)
	if !ack.SessionPresent {
		t.Fatal("Session Present 0 after a takeover on another node")
	}
	if d, ok := live.Next().(*codec.Disconnect); !ok || d.ReasonCode != codec.SessionTakenOver {
		t.Errorf("old connection got %v, want DISCONNECT Session taken over", d)
	}
	got := receiveAll(t, sent[2:], pahoNext(moved2))
	checkMoved(t, got, sent[2:], sent[:2])
	for _, g := range got {
		if !g.dup {
			t.Errorf("%q was in flight: want DUP on its redelivery", g.payload)
		}
	}
	awaitInterest(t, pubC, "lv/probe", moved2)
	pubC.publish(t, &paho.Publish{Topic: "lv/y", QoS: 1, Payload: []byte("c-live")})
	checkMoved(t, receiveAll(t, []string{"c-live"}, pahoNext(moved2)), []string{"c-live"}, nil)
}

// v3Session is an eclipse/paho.mqtt.golang client (MQTT 3.1.1) with Clean
// Session 0 whose deliveries arrive on msgs.
type v3Session struct {
	mqtt.Client
	msgs chan mqtt.Message
	lost chan error
}

func connectV3Session(t *testing.T, addr, id string) (*v3Session, bool) {
	t.Helper()
	c := &v3Session{msgs: make(chan mqtt.Message, 1000), lost: make(chan error, 1)}
	o := mqtt.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).SetProtocolVersion(4).
		SetCleanSession(false).SetAutoReconnect(false).SetConnectRetry(false).SetKeepAlive(30 * time.Second).
		SetConnectTimeout(5 * time.Second).SetOrderMatters(true).
		SetDefaultPublishHandler(func(_ mqtt.Client, m mqtt.Message) { c.msgs <- m }).
		SetConnectionLostHandler(func(_ mqtt.Client, err error) { c.lost <- err })
	c.Client = mqtt.NewClient(o)
	tok := c.Connect()
	if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect %q to %s: %v", id, addr, tok.Error())
	}
	t.Cleanup(func() {
		if c.IsConnectionOpen() {
			c.Disconnect(100)
		}
	})
	return c, tok.(*mqtt.ConnectToken).SessionPresent()
}

// next is the next delivery but probes (awaitInterest) within wait.
func (c *v3Session) next(wait time.Duration) (received, bool) {
	timeout := time.After(wait)
	for {
		select {
		case m := <-c.msgs:
			if string(m.Payload()) == "probe" {
				continue
			}
			return received{string(m.Payload()), m.Duplicate()}, true
		case <-timeout:
			return received{}, false
		}
	}
}

// awaitInterest publishes probes to topic from pub until c gets one: a
// subscription reaches the other nodes asynchronously.
func (c *v3Session) awaitInterest(t *testing.T, pub *pahoClient, topic string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pub.publish(t, &paho.Publish{Topic: topic, Payload: []byte("probe")})
		select {
		case m := <-c.msgs:
			if string(m.Payload()) != "probe" {
				t.Fatalf("message %q before the probes", m.Payload())
			}
			return
		case <-time.After(25 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no probe on %s within 10s", topic)
		}
	}
}

// TestClusterSessionMoves311: the same with MQTT 3.1.1 (Clean Session
// 0): a session left offline on node 1 resumes on node 2 with its queued
// messages, then, still connected on node 2, it is taken over from node
// 3 and moves there, its connection on node 2 closed.
func TestClusterSessionMoves311(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	nodes := clusterNodes(t, 3)
	waitStateReady(t, nodes...)
	awaitRegistry(t, nodes...)
	pubC := pahoConnect(t, nodes[2].addr, "v3-pub-c")
	pubA := pahoConnect(t, nodes[0].addr, "v3-pub-a")

	sub, _ := connectV3Session(t, nodes[0].addr, "mover311")
	if tok := sub.Subscribe("v3/#", 1, nil); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	sub.awaitInterest(t, pubC, "v3/probe")
	sub.Disconnect(100)
	want := payloadSeq("c", 0, 20)
	for _, m := range want {
		pubC.publish(t, &paho.Publish{Topic: "v3/x", QoS: 1, Payload: []byte(m)})
	}
	moved, present := connectV3Session(t, nodes[1].addr, "mover311")
	if !present {
		t.Fatalf("Session Present 0 on node 2\nnode 1:\n%s\nnode 2:\n%s", nodes[0].stderr, nodes[1].stderr)
	}
	checkMoved(t, receiveAll(t, want, moved.next), want, nil)

	// Connected on node 2: node 3 takes it over and the session moves on.
	again, present := connectV3Session(t, nodes[2].addr, "mover311")
	if !present {
		t.Fatal("Session Present 0 after a takeover on another node")
	}
	select {
	case <-moved.lost:
	case <-time.After(5 * time.Second):
		t.Error("the connection on node 2 was not closed")
	}
	// Its subscription is on node 3 now: messages from node 1 reach it.
	again.awaitInterest(t, pubA, "v3/probe")
	pubA.publish(t, &paho.Publish{Topic: "v3/x", QoS: 1, Payload: []byte("a-after")})
	got := receiveAll(t, []string{"a-after"}, again.next)
	checkMoved(t, got, []string{"a-after"}, nil)
}

// TestClusterSessionMovesUnderTraffic: QoS 1 messages published from
// node 3 without pause while the session moves from node 1 to node 2:
// every acknowledged message reaches the client, again only with DUP, in
// order.
func TestClusterSessionMovesUnderTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	nodes := clusterNodes(t, 3)
	waitStateReady(t, nodes...)
	awaitRegistry(t, nodes...)
	pubC := pahoConnect(t, nodes[2].addr, "tr-pub-c")
	for round := range 5 {
		id := fmt.Sprintf("traffic-%d", round)
		topic := fmt.Sprintf("tr/%d", round)
		sub := pahoConnect(t, nodes[0].addr, id, persistentV5)
		sub.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic + "/#", QoS: 1}}})
		awaitInterest(t, pubC, topic+"/probe", sub)
		stop := make(chan struct{})
		published := make(chan []string, 1)
		go func() {
			var sent []string
			defer func() { published <- sent }()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				m := fmt.Sprintf("c-%d", i)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := pubC.Publish(ctx, &paho.Publish{Topic: topic + "/x", QoS: 1, Payload: []byte(m)})
				cancel()
				if err != nil {
					return
				}
				sent = append(sent, m)
			}
		}()
		time.Sleep(50 * time.Millisecond)
		_ = sub.Disconnect(&paho.Disconnect{})
		moved, ack := pahoConnectAck(t, nodes[1].addr, id, persistentV5)
		time.Sleep(100 * time.Millisecond)
		close(stop)
		sent := <-published
		if !ack.SessionPresent {
			t.Fatalf("round %d: Session Present 0\nnode 1:\n%s\nnode 2:\n%s", round, nodes[0].stderr, nodes[1].stderr)
		}
		got := receiveFrom(sub) // before the move
		had := map[string]bool{}
		for _, r := range got {
			had[r.payload] = true
		}
		var rest []string
		for _, m := range sent {
			if !had[m] {
				rest = append(rest, m)
			}
		}
		got = append(got, receiveAll(t, rest, pahoNext(moved))...)
		checkMoved(t, got, sent, nil)
		if t.Failed() {
			t.Fatalf("round %d: %d sent", round, len(sent))
		}
	}
}

// receiveFrom drains what c received so far, probes skipped.
func receiveFrom(c *pahoClient) []received {
	var out []received
	for {
		select {
		case p := <-c.msgs:
			if string(p.Payload) != "probe" {
				out = append(out, received{string(p.Payload), p.Duplicate()})
			}
		default:
			return out
		}
	}
}
