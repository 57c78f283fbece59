//go:build unix

package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// TestBridgeCrash: two xmq processes, L bridged to R, with persistent QoS 1
// and QoS 2 traffic both ways (publishers on one broker, subscribers on
// the other). Rounds end with kill -9 of R or of L at a random moment,
// then a restart. Every message whose PUBACK/PUBCOMP its publisher
// received arrives, in order; QoS 2 exactly once. A QoS 1 message may
// arrive twice (a redelivery across the bridge), and the second copy
// cannot carry DUP: a broker does not pass the DUP flag on to subscribers
// [MQTT-3.3.1-3].
func TestBridgeCrash(t *testing.T) {
	rounds, rng := crashRounds(t, 4)
	rAddr := mqtttest.FreeAddr(t)
	rDir, lDir := t.TempDir(), t.TempDir()
	queued := "broker:\n  max_queued: 1000000\n"
	rCfg := writeFile(t, queued)
	lCfg := writeFile(t, queued+fmt.Sprintf(`bridges:
  - name: up
    addresses: [mqtt://%s]
    backoff_min: 20ms
    backoff_max: 200ms
    topics:
      - {topic: "out/#", direction: out, qos: 2}
      - {topic: "in/#", direction: in, qos: 2}
`, rAddr))
	var procs []*proc
	startR := func() *proc {
		p := startBroker(t, rDir, "-c", rCfg, "-listen", rAddr)
		procs = append(procs, p)
		return p
	}
	startL := func() *proc { p := startBroker(t, lDir, "-c", lCfg); procs = append(procs, p); return p }
	t.Cleanup(func() {
		if t.Failed() {
			for i, p := range procs {
				t.Logf("process %d (%s):\n%s", i, p.cmd.Args[4], p.stderr)
			}
		}
	})

	type flow struct {
		pub    *crashPub
		sub    *crashSub
		pubOnL bool // the publisher is on L, the subscriber on R (out); else the other way (in)
	}
	flows := []flow{
		{newCrashPub("out1", codec.V311, 1, "out/q1"), newCrashSub("osub1", codec.V5, 1, "out/q1"), true},
		{newCrashPub("out2", codec.V5, 2, "out/q2"), newCrashSub("osub2", codec.V311, 2, "out/q2"), true},
		{newCrashPub("in1", codec.V5, 1, "in/q1"), newCrashSub("isub1", codec.V5, 1, "in/q1"), false},
		{newCrashPub("in2", codec.V311, 2, "in/q2"), newCrashSub("isub2", codec.V5, 2, "in/q2"), false},
	}
	for _, f := range flows {
		f.sub.bridged = true
	}
	r, l := startR(), startL()
	// The bridge's subscriptions at both ends exist once it has connected
	// the first time; after that its sessions keep them.
	waitUntil(t, "the bridge to connect", func() bool { return strings.Contains(l.stderr.String(), `"msg":"bridge connected"`) })
	addrs := func(f flow) (pub, sub string) {
		if f.pubOnL {
			return l.addr, r.addr
		}
		return r.addr, l.addr
	}
	// Subscribe first, so that nothing published is owed to no one.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, f := range flows {
		_, sa := addrs(f)
		wg.Go(func() { _ = f.sub.run(t, sa, stop) })
	}
	waitUntil(t, "subscriptions", func() bool {
		for _, f := range flows {
			if !allSubscribed(f.sub) {
				return false
			}
		}
		return true
	})
	close(stop)
	wg.Wait()

	for round := range rounds {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, f := range flows {
			pa, sa := addrs(f)
			wg.Go(func() { _ = f.pub.run(t, pa, stop) })
			if round%2 == 1 { // subscribers offline in even rounds: messages queue on disk
				wg.Go(func() { _ = f.sub.run(t, sa, stop) })
			}
		}
		time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		if round%2 == 0 {
			r.kill()
			r = startR()
		} else {
			l.kill()
			l = startL()
		}
		time.Sleep(50 * time.Millisecond) // traffic meets the restarted broker and the reconnecting bridge
		close(stop)
		wg.Wait()
	}

	// A last run: publishers finish their QoS 2 flows, subscribers drain.
	stop = make(chan struct{})
	pstop := make(chan struct{})
	var pwg sync.WaitGroup
	wg = sync.WaitGroup{}
	for _, f := range flows {
		pa, sa := addrs(f)
		wg.Go(func() {
			if err := f.sub.run(t, sa, stop); err != nil && !isConnErr(err) {
				t.Errorf("%s: %v", f.sub.id, err)
			}
		})
		f.pub.mu.Lock()
		f.pub.next = -1 << 30 // marks the extra messages this run adds; not checked
		f.pub.mu.Unlock()
		pwg.Go(func() { _ = f.pub.run(t, pa, pstop) })
	}
	waitUntil(t, "QoS 2 flows to finish", func() bool {
		for _, f := range flows {
			f.pub.mu.Lock()
			for _, seq := range f.pub.flight {
				if seq >= 0 && f.pub.qos == 2 {
					f.pub.mu.Unlock()
					return false
				}
			}
			f.pub.mu.Unlock()
		}
		return true
	})
	close(pstop)
	pwg.Wait()
	waitUntil(t, "subscribers to drain", func() bool {
		for _, f := range flows {
			if f.sub.quietFor() < 700*time.Millisecond {
				return false
			}
		}
		return true
	})
	close(stop)
	wg.Wait()
	r.stop(t)
	l.stop(t)
	for _, f := range flows {
		checkDelivered(t, f.pub, f.sub)
	}
}

// TestBridgeSIGHUP: a bridge added to the configuration file of a running
// xmq starts on SIGHUP, and stops (its local session gone) when removed.
func TestBridgeSIGHUP(t *testing.T) {
	r := startBroker(t, t.TempDir())
	cfg := writeFile(t, "")
	l := startBroker(t, t.TempDir(), "-c", cfg)
	bridge := fmt.Sprintf("bridges:\n  - {name: up, addresses: [mqtt://%s], topics: [{topic: 'hup/#', qos: 1}]}\n", r.addr)
	if err := os.WriteFile(cfg, []byte(bridge), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = l.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, "the bridge to connect", func() bool { return strings.Contains(l.stderr.String(), `"msg":"bridge connected"`) })
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_ = l.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, "the bridge to go", func() bool {
		return strings.Contains(l.stderr.String(), `"msg":"bridges configured","added":[],"changed":[],"removed":["up"]`)
	})
	if !strings.Contains(l.stderr.String(), `"msg":"bridge stopped"`) {
		t.Errorf("no log line of the bridge stopping:\n%s", l.stderr)
	}
	l.stop(t)
	r.stop(t)
}
