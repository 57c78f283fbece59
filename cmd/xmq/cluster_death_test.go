//go:build unix

package main

// A node dies (kill -9): its clients reconnect to the others. With
// session_replicas 3 they resume their sessions there and a dead node's
// wills fire from a survivor; with 1 the node's sessions come back with
// it, and a session whose client started another one meanwhile gives its
// messages to that one.

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// deathTraffic runs a QoS 1 publisher and a persistent subscriber (MQTT
// 5 and 3.1.1) on node victim, kills it under traffic, then reconnects
// the subscriber to node back. With resume the subscriber is online
// during the traffic and the publisher goes on on node other once the
// subscriber is back; without, the subscriber is offline during the
// traffic (its messages queue on the victim). With resume, a second
// publisher per subscriber publishes on node other all along, the kill
// and the subscribers' return included: what it publishes while no node
// holds their sessions comes from the replay (replay.go). afterKill runs
// once the subscribers are reconnecting. It returns the pairs (a
// publisher on the victim and the subscriber), and the publishers on
// other in the subscribers' order.
func deathTraffic(t *testing.T, nodes []*proc, victim, back, other int, resume bool, afterKill func()) ([]*crashPub, []*crashSub, []*crashPub) {
	t.Helper()
	pubs := []*crashPub{newCrashPub("dpub5", codec.V5, 1, "death/q5"), newCrashPub("dpub3", codec.V311, 1, "death/q3")}
	subs := []*crashSub{newCrashSub("dsub5", codec.V5, 1, "death/q5"), newCrashSub("dsub3", codec.V311, 1, "death/q3")}
	var along []*crashPub
	alongStop := make(chan struct{})
	var alongWG sync.WaitGroup
	stop := make(chan struct{})
	var wg sync.WaitGroup
	subStop := make(chan struct{})
	for _, s := range subs {
		wg.Go(func() { _ = s.run(t, nodes[victim].addr, subStop) })
	}
	waitUntil(t, "subscriptions", func() bool { return allSubscribed(subs...) })
	if !resume {
		// Offline during the traffic: what is published queues in the
		// victim's store.
		close(subStop)
		wg.Wait()
	}
	for _, p := range pubs {
		wg.Go(func() { _ = p.run(t, nodes[victim].addr, stop) })
	}
	if resume {
		along = []*crashPub{newCrashPub("dpub5s", codec.V5, 1, "death/q5"), newCrashPub("dpub3s", codec.V311, 1, "death/q3")}
		for _, p := range along {
			p.interval = 5 * time.Millisecond
			alongWG.Go(func() { _ = p.run(t, nodes[other].addr, alongStop) })
		}
	}
	time.Sleep(400 * time.Millisecond)
	nodes[victim].kill()
	close(stop)
	if resume {
		close(subStop)
	}
	wg.Wait()

	stop = make(chan struct{})
	for _, s := range subs {
		// Again while the connection fails: a CONNECT waits while the
		// cluster elects the leaders the dead node held (seconds), past
		// the test client's 5 s CONNACK wait at times.
		wg.Go(func() { rerun(t, s, nodes[back].addr, stop) })
	}
	if resume {
		// The subscribers' sessions are somewhere again before anything
		// is published for them: what is published while no node holds a
		// session is not queued for it (docs/cluster.md).
		t.Cleanup(func() {
			if t.Failed() {
				for _, l := range strings.Split(nodes[back].stderr.String(), "\n") {
					if (strings.Contains(l, "dsub") || strings.Contains(l, "session") || strings.Contains(l, `"warn"`) || strings.Contains(l, `"error"`)) && !strings.Contains(l, "connect to route") {
						t.Logf("back: %.300s", l)
					}
				}
			}
		})
		// Their claims wait for the JetStream leaders the dead node held.
		mqtttest.WaitWithin(t, 90*time.Second, "subscribers back", func() bool {
			for _, s := range subs {
				if !logHas(nodes[back], `"session_present":true`, `"client_id":"`+s.id+`"`) {
					return false
				}
			}
			return true
		})
		pstop := make(chan struct{})
		for _, p := range pubs {
			wg.Go(func() { _ = p.run(t, nodes[other].addr, pstop) })
		}
		time.Sleep(500 * time.Millisecond)
		close(pstop)
		close(alongStop)
		alongWG.Wait()
	}
	if afterKill != nil {
		afterKill()
	}
	waitUntil(t, "subscribers to drain", func() bool {
		return subs[0].quietFor() > 500*time.Millisecond && subs[1].quietFor() > 500*time.Millisecond
	})
	close(stop)
	wg.Wait()
	return pubs, subs, along
}

// deathNodes starts three nodes with extra configuration, their logs
// kept on failure (XMQ_DEATH_LOGS), and waits until their replicated
// state and registry are in use.
func deathNodes(t *testing.T, extra string) []*proc {
	t.Helper()
	nodes, _ := clusterNodesConfig(t, 3, 3, extra)
	keepLogs(t, nodes)
	waitStateReady(t, nodes...)
	awaitRegistry(t, nodes...)
	return nodes
}

// rerun runs s against addr until stop, again after each connection
// that fails (a CONNECT waits while the cluster elects the leaders a dead
// node held); an error of another kind fails the test.
func rerun(t *testing.T, s *crashSub, addr string, stop <-chan struct{}) {
	for {
		err := s.run(t, addr, stop)
		select {
		case <-stop:
			return
		default:
		}
		if err != nil && !isConnErr(err) && !strings.Contains(err.Error(), "CONNECT") {
			t.Errorf("%s: %v", s.id, err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// deathBroker lets the subscribers' queues hold what the publishers
// send while they are away (the default max_queued would refuse some).
const deathBroker = "broker:\n  max_queued: 1000000\n"

// TestClusterNodeDeathReplicas: with session_replicas 3, kill -9 of the
// node holding a publisher and a persistent subscriber under QoS 1
// traffic, never restarted: the subscriber resumes its session on
// another node (it does not subscribe again) and gets every message its
// publisher had acknowledged, and those published after, in order,
// repeats only with DUP; and so does every message a publisher on a
// surviving node had acknowledged, those published while no node held
// the session included.
func TestClusterNodeDeathReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	nodes := deathNodes(t, "  session_replicas: 3\n"+deathBroker)
	pubs, subs, along := deathTraffic(t, nodes, 2, 0, 1, true, nil)
	for i, p := range pubs {
		checkDelivered(t, p, subs[i])
		checkDelivered(t, along[i], subs[i])
	}
	if t.Failed() {
		for i, n := range nodes[:2] {
			for _, l := range strings.Split(n.stderr.String(), "\n") {
				if strings.Contains(l, "dsub") || strings.Contains(l, "dpub") || strings.Contains(l, "session") {
					t.Logf("node %d: %s", i+1, l)
				}
			}
		}
	}
}

// TestClusterNodeDeathRestart: with session_replicas 1, kill -9 of the
// node holding a publisher and an offline persistent subscriber under
// QoS 1 traffic; the subscriber reconnects to another node meanwhile (a
// new session there: its node does not answer) and the node comes back
// with its data: the stale session's messages go to the subscriber's new
// session, so every acknowledged message arrives (repeats with DUP).
func TestClusterNodeDeathRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	nodes := deathNodes(t, deathBroker)
	pubs, subs, _ := deathTraffic(t, nodes, 2, 0, 1, false, func() {
		// The subscribers have a new session on node 1 before node 3
		// comes back: theirs there are stale.
		mqtttest.WaitWithin(t, 45*time.Second, "new sessions", func() bool {
			return logHas(nodes[0], `"session_present":false`, `"client_id":"dsub5"`) &&
				logHas(nodes[0], `"session_present":false`, `"client_id":"dsub3"`)
		})
		p := restartNode(t, nodes[2], 2)
		waitStateReady(t, p)
		time.Sleep(time.Second)
	})
	for i, p := range pubs {
		checkDelivered(t, p, subs[i])
	}
}

// TestClusterNodeRejoinReplay: with session_replicas 1, persistent
// subscribers offline on a node that is killed, while publishers on
// another node publish all along, and the node comes back with its data:
// what was published while it was down reaches the subscribers' sessions
// there from the other nodes' replay rings, so every acknowledged message
// arrives, in order, repeats only with DUP.
func TestClusterNodeRejoinReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	nodes := deathNodes(t, deathBroker)
	const victim, other = 2, 1
	subs := []*crashSub{newCrashSub("rsub5", codec.V5, 1, "rejoin/q5"), newCrashSub("rsub3", codec.V311, 1, "rejoin/q3")}
	pubs := []*crashPub{newCrashPub("rpub5", codec.V5, 1, "rejoin/q5"), newCrashPub("rpub3", codec.V311, 1, "rejoin/q3")}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, s := range subs {
		wg.Go(func() { _ = s.run(t, nodes[victim].addr, stop) })
	}
	waitUntil(t, "subscriptions", func() bool { return allSubscribed(subs...) })
	close(stop) // offline: their sessions stay on the victim
	wg.Wait()
	pstop := make(chan struct{})
	for _, p := range pubs {
		p.interval = 5 * time.Millisecond
		wg.Go(func() { _ = p.run(t, nodes[other].addr, pstop) })
	}
	time.Sleep(time.Second)
	nodes[victim].kill()
	time.Sleep(2 * time.Second)
	back := restartNode(t, nodes[victim], victim)
	waitStateReady(t, back)
	time.Sleep(time.Second)
	close(pstop)
	wg.Wait()
	stop = make(chan struct{})
	for _, s := range subs {
		wg.Go(func() { rerun(t, s, back.addr, stop) })
	}
	mqtttest.WaitWithin(t, 30*time.Second, "subscribers back", func() bool {
		return logHas(back, `"session_present":true`, `"client_id":"rsub5"`) && logHas(back, `"session_present":true`, `"client_id":"rsub3"`)
	})
	time.Sleep(500 * time.Millisecond)
	waitUntil(t, "subscribers to drain", func() bool {
		return subs[0].quietFor() > 500*time.Millisecond && subs[1].quietFor() > 500*time.Millisecond
	})
	close(stop)
	wg.Wait()
	for i, p := range pubs {
		checkDelivered(t, p, subs[i])
	}
	if !logHas(back, "replayed into its sessions") {
		t.Error("the node that came back logged no replay")
	}
	keepLogs(t, append(nodes[:3:3], back))
}

// TestClusterCleanStartReplay: with session_replicas 3, a persistent
// session started with Clean Start on node 3 after node 1 forwarded
// messages on its filter (still in node 1's replay ring; node 3 routes
// nothing of node 1's, so it has no mark for it) is rebuilt on a survivor
// when node 3 is killed: it gets what node 1 published while no node held
// it, from the replay, and nothing published before it began.
func TestClusterCleanStartReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	nodes := deathNodes(t, "  session_replicas: 3\n")
	pub := pahoConnect(t, nodes[0].addr, "cs-pub")
	for _, p := range payloadSeq("before", 0, 20) {
		pub.publish(t, &paho.Publish{Topic: "cs/x", QoS: 1, Payload: []byte(p)})
	}
	sub := pahoConnect(t, nodes[2].addr, "cs-sub", func(cp *paho.Connect) {
		cp.Properties = &paho.ConnectProperties{SessionExpiryInterval: ptr(uint32(300))} // Clean Start, kept
	})
	// SUBACK follows a Sync: the subscription is in the stream.
	sub.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "cs/x", QoS: 1}}})
	nodes[2].kill()
	after := payloadSeq("after", 0, 10)
	for _, p := range after {
		pub.publish(t, &paho.Publish{Topic: "cs/x", QoS: 1, Payload: []byte(p)})
	}
	// The claim waits for the JetStream leaders node 3 held.
	connectTimeout = 90 * time.Second
	t.Cleanup(func() { connectTimeout = 30 * time.Second })
	back, ack := pahoConnectAck(t, nodes[0].addr, "cs-sub", persistentV5)
	if !ack.SessionPresent {
		t.Fatal("session present 0: the session was not rebuilt")
	}
	checkMoved(t, receiveAll(t, after, pahoNext(back)), after, nil)
	if !logHas(nodes[0], "replayed into them") && !logHas(nodes[1], "replayed into them") {
		t.Error("no survivor logged a replay")
	}
}

// willConnect connects id to addr with a persistent session and a will
// on will/ID with the given delay.
func willConnect(t *testing.T, addr, id string, delay uint32) *pahoClient {
	t.Helper()
	return pahoConnect(t, addr, id, persistentV5, func(cp *paho.Connect) {
		cp.WillMessage = &paho.WillMessage{Topic: "will/" + id, Payload: []byte("gone " + id), QoS: 1}
		cp.WillProperties = &paho.WillProperties{WillDelayInterval: ptr(delay)}
	})
}

// TestClusterWillOnNodeDeath: with session_replicas 3, the wills of the
// clients of a killed node: one whose client stays away fires once, from
// a surviving node, after its delay; one whose client reconnects to
// another node at once (its claim races the adoption), and one whose
// client reconnects after a survivor adopted its session but before its
// delay passed, do not fire.
func TestClusterWillOnNodeDeath(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	nodes := deathNodes(t, "  session_replicas: 3\n")
	watch := pahoConnect(t, nodes[0].addr, "will-watch")
	watch.subscribe(t, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "will/#", QoS: 1}}})
	waitUntil(t, "node 3 seen by the others", func() bool {
		return logHas(nodes[0], `"node seen","node":"n3"`) && logHas(nodes[1], `"node seen","node":"n3"`)
	})
	// A claim right after the death waits for the JetStream leaders the
	// dead node held (up to 10 s each, slower under the race detector):
	// the client waits for it rather than give up (its will would go).
	connectTimeout = 90 * time.Second
	t.Cleanup(func() { connectTimeout = 30 * time.Second })
	willConnect(t, nodes[2].addr, "w-away", 2)
	willConnect(t, nodes[2].addr, "w-back", 20)
	willConnect(t, nodes[2].addr, "w-late", 20)
	time.Sleep(300 * time.Millisecond) // the wills are replicated before CONNACK; the registry write too
	killed := time.Now()
	nodes[2].kill()
	back := make(chan struct{})
	go func() {
		defer close(back)
		willConnect(t, nodes[1].addr, "w-back", 20)
	}()
	// After the death is noticed and the session adopted (the adoption
	// is logged).
	mqtttest.WaitWithin(t, 45*time.Second, "adoption", func() bool {
		return logHas(nodes[0], "sessions of a dead node adopted") && logHas(nodes[1], "sessions of a dead node adopted")
	})
	willConnect(t, nodes[0].addr, "w-late", 20)
	<-back
	t.Logf("w-late back after %v", time.Since(killed).Round(100*time.Millisecond))

	// Until a will not cancelled would have come (20 s after its
	// adoption), and at least 10 s after the last client is back.
	deadline := time.After(max(time.Until(killed.Add(25*time.Second)), 10*time.Second))
	var got []string
	for done := false; !done; {
		select {
		case p := <-watch.msgs:
			got = append(got, p.Topic)
			if p.Topic == "will/w-away" {
				t.Logf("will of w-away after %v", time.Since(killed).Round(100*time.Millisecond))
			}
		case <-deadline:
			done = true
		}
	}
	if len(got) != 1 || got[0] != "will/w-away" {
		t.Errorf("wills received %v, want will/w-away once", got)
	}
}

// logHas reports whether one of p's log lines holds all of parts.
func logHas(p *proc, parts ...string) bool {
	for _, l := range strings.Split(p.stderr.String(), "\n") {
		all := true
		for _, s := range parts {
			all = all && strings.Contains(l, s)
		}
		if all {
			return true
		}
	}
	return false
}

// keepLogs writes the nodes' logs to $XMQ_DEATH_LOGS/nN.log when the test
// fails, for a look at what each node did.
func keepLogs(t *testing.T, nodes []*proc) {
	t.Cleanup(func() {
		d := os.Getenv("XMQ_DEATH_LOGS")
		if !t.Failed() || d == "" {
			return
		}
		for i, n := range nodes {
			_ = os.WriteFile(fmt.Sprintf("%s/n%d.log", d, i+1), []byte(n.stderr.String()), 0o644)
		}
	})
}

// restartNode starts node i (from 0) of the last clusterNodesConfig again,
// with p's data directory.
func restartNode(t *testing.T, p *proc, i int) *proc {
	t.Helper()
	bin, err := xmqBinary()
	if err != nil {
		t.Fatal(err)
	}
	np, err := spawnBroker(bin, p.dir, "-c", clusterConfigs[i])
	if err != nil {
		t.Fatal(err)
	}
	np.dir = p.dir
	t.Cleanup(np.kill)
	return np
}
