//go:build unix

package main

// Measurements of a node's death (docs/cluster.md), run on demand:
//
//	XMQ_MEASURE=1 go test -count=1 -v -run 'TestMeasure' ./cmd/xmq

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

func measureOnly(t *testing.T) {
	t.Helper()
	if os.Getenv("XMQ_MEASURE") == "" {
		t.Skip("a measurement: set XMQ_MEASURE=1")
	}
}

// percentile is the p-th percentile (0 < p ≤ 100) of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p/100))]
}

// TestMeasureReplicaLatency: a QoS 1 publisher's PUBLISH → PUBACK round
// trip, one message at a time, on the node of a persistent subscriber
// (online, so every message is written to the store for it), with
// session_replicas 1 and 3.
func TestMeasureReplicaLatency(t *testing.T) {
	measureOnly(t)
	const n = 2000
	for _, replicas := range []int{1, 3} {
		nodes, _ := clusterNodesConfig(t, 3, 3, fmt.Sprintf("  session_replicas: %d\n", replicas))
		waitStateReady(t, nodes...)
		awaitRegistry(t, nodes...)
		sub := newCrashSub(fmt.Sprintf("lat-sub-%d", replicas), codec.V311, 1, "lat/x")
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { _ = sub.run(t, nodes[0].addr, stop) })
		waitUntil(t, "subscription", func() bool { return allSubscribed(sub) })
		pub, _, err := dialMQTT(t, nodes[0].addr, fmt.Sprintf("lat-pub-%d", replicas), codec.V311, true)
		if err != nil {
			t.Fatal(err)
		}
		rtt := make([]time.Duration, 0, n)
		for i := range n {
			start := time.Now()
			pub.Send(&codec.Publish{QoS: 1, PacketID: uint16(i%60000 + 1), Topic: []byte("lat/x"), Payload: payload("lat", i)})
			mqtttest.Expect[*codec.Ack](pub)
			rtt = append(rtt, time.Since(start))
		}
		pub.Close()
		close(stop)
		wg.Wait()
		slices.Sort(rtt)
		t.Logf("session_replicas %d: PUBLISH→PUBACK over %d messages: p50 %v, p90 %v, p99 %v, max %v", replicas, n,
			percentile(rtt, 50).Round(time.Microsecond), percentile(rtt, 90).Round(time.Microsecond),
			percentile(rtt, 99).Round(time.Microsecond), rtt[len(rtt)-1].Round(time.Microsecond))
		for _, p := range nodes {
			p.kill()
		}
	}
}

// TestMeasureNodeKill: 300 persistent QoS 1 subscribers and 30 publishers
// (10 messages/s each, 10 subscribers per publisher) spread over 3 nodes
// (client i on node i%3), kill -9 of node 3; its clients
// reconnect to nodes 1 and 2. With session_replicas 3 the node stays dead;
// with 1 it restarts with its data 5 s later. Reported: the time until
// every client of node 3 is connected again, messages acknowledged and
// never delivered, duplicates, messages out of order.
func TestMeasureNodeKill(t *testing.T) {
	measureOnly(t)
	only := os.Getenv("XMQ_MEASURE_REPLICAS")
	for _, replicas := range []int{3, 1} {
		if only != "" && only != fmt.Sprint(replicas) {
			continue
		}
		t.Run(fmt.Sprint("replicas", replicas), func(t *testing.T) { measureNodeKill(t, replicas) })
	}
}

func measureNodeKill(t *testing.T, replicas int) {
	// XMQ_MEASURE_SUBS (a multiple of 30) and XMQ_MEASURE_INTERVAL (each
	// publisher's) change the shape: a fleet whose sessions all need a
	// replay at once.
	nsubs, npubs, interval := 300, 30, 100*time.Millisecond
	if v, err := strconv.Atoi(os.Getenv("XMQ_MEASURE_SUBS")); err == nil && v >= npubs {
		nsubs = v / npubs * npubs
	}
	if v, err := time.ParseDuration(os.Getenv("XMQ_MEASURE_INTERVAL")); err == nil && v > 0 {
		interval = v
	}
	per := nsubs / npubs
	nodes, _ := clusterNodesConfig(t, 3, 3, fmt.Sprintf("  session_replicas: %d\n", replicas)+deathBroker)
	waitStateReady(t, nodes...)
	awaitRegistry(t, nodes...)
	var pubs []*crashPub
	for i := range npubs {
		p := newCrashPub(fmt.Sprintf("kpub%d", i), codec.V311, 1, fmt.Sprintf("kill/%d", i))
		p.interval = interval
		pubs = append(pubs, p)
	}
	var subs []*crashSub
	for j := range nsubs {
		// Publisher i's subscribers are spread over the 3 nodes.
		subs = append(subs, newCrashSub(fmt.Sprintf("ksub%d", j), codec.V311, 1, fmt.Sprintf("kill/%d", j/per)))
	}
	// Client i starts on node i%3; those of node 3 then go to node (i%2)+1.
	stop := make(chan struct{})
	killed := make(chan struct{})
	var wg sync.WaitGroup
	run := func(i int, f func(t testing.TB, addr string, stop <-chan struct{}) error) {
		wg.Go(func() {
			addr := nodes[i%3].addr
			for {
				_ = f(t, addr, stop)
				select {
				case <-stop:
					return
				case <-killed:
					if i%3 == 2 {
						addr = nodes[i%2].addr
					}
				default:
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	for j, s := range subs {
		run(j, s.run)
	}
	waitUntil(t, "subscriptions", func() bool { return allSubscribed(subs...) })
	for i, p := range pubs {
		run(i, p.run)
	}
	time.Sleep(3 * time.Second)
	killedAt := time.Now()
	nodes[2].kill()
	close(killed)
	if replicas == 1 {
		time.Sleep(5 * time.Second)
		restartNode(t, nodes[2], 2)
	}
	// Every client of node 3 is back once node 1 and 2 log its CONNECT.
	waitBack := func() time.Duration {
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			all := true
			for j := 2; j < nsubs && all; j += 3 {
				all = logHas(nodes[j%2], `"msg":"client connected"`, fmt.Sprintf(`"client_id":"ksub%d"`, j))
			}
			for i := 2; i < npubs && all; i += 3 {
				all = logHas(nodes[i%2], `"msg":"client connected"`, fmt.Sprintf(`"client_id":"kpub%d"`, i))
			}
			if all {
				return time.Since(killedAt)
			}
			time.Sleep(100 * time.Millisecond)
		}
		return -1
	}
	back := waitBack()
	time.Sleep(5 * time.Second)
	for _, p := range pubs {
		p.mu.Lock()
		p.interval = -1 // stop publishing new messages
		p.mu.Unlock()
	}
	time.Sleep(2 * time.Second)
	waitUntil(t, "subscribers to drain", func() bool {
		for _, s := range subs {
			if s.quietFor() < time.Second {
				return false
			}
		}
		return true
	})
	close(stop)
	wg.Wait()
	acked, lost, dups, disorder := 0, 0, 0, 0
	for j, s := range subs {
		p := pubs[j/per]
		count := map[int]int{}
		last := -1
		for _, d := range s.got {
			if d.pub != p.id {
				continue
			}
			count[d.seq]++
			if count[d.seq] > 1 {
				dups++
				continue
			}
			if d.seq <= last {
				disorder++
			}
			last = d.seq
		}
		for _, seq := range p.acked {
			acked++
			if count[seq] == 0 {
				lost++
			}
		}
	}
	t.Logf("session_replicas %d: %d subscribers, %d publishers every %v, node 3 killed: its clients back after %v; "+
		"%d deliveries owed, %d lost, %d duplicates, %d out of order", replicas, nsubs, npubs, interval, back.Round(100*time.Millisecond),
		acked, lost, dups, disorder)
}
