package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// TestDiskFull: the data directory sits on a small tmpfs that another
// program fills while persistent QoS 1 traffic flows. The broker refuses
// what it cannot store (MQTT 5: 0x97), answers every new CONNECT within a
// second during and after the fault, says so on /healthz and /readyz,
// resumes by itself once the space is back, and after a restart every
// message it acknowledged is delivered. XMQ_DISKFULL_RUNS sets how many
// times (default 2; the measurement ran 10).
func TestDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	runs := 2
	if n, err := strconv.Atoi(os.Getenv("XMQ_DISKFULL_RUNS")); err == nil && n > 0 {
		runs = n
	}
	for i := range runs {
		// Every other run turns min_free_bytes off, so that the engine
		// itself meets the full disk: the store becomes unavailable and
		// gives up its reserve.
		hard := i%2 == 1
		t.Run(fmt.Sprintf("run%d-hard=%v", i+1, hard), func(t *testing.T) { diskFullRun(t, hard) })
	}
}

func diskFullRun(t *testing.T, hard bool) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=128m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	minFree := 16 << 20
	if hard {
		minFree = -1
	}
	conf := fmt.Sprintf("broker:\n  max_queued: 10000000\n  max_queued_bytes: 0\n"+
		"store:\n  min_free_bytes: %d\n  emergency_reserve_bytes: 8388608\n", minFree)
	cfg := writeFile(t, conf)
	data := filepath.Join(mnt, "data")
	p := startBroker(t, data, "-c", cfg, "-web", "127.0.0.1:0")
	web := webURL(t, p)

	// An offline persistent subscriber: what is published for it is stored.
	sub := newCrashSub("sub", codec.V5, 1, "t/#")
	stopSub := make(chan struct{})
	subDone := make(chan struct{})
	go func() { defer close(subDone); _ = sub.run(t, p.addr, stopSub) }()
	mqtttest.WaitWithin(t, 5*time.Second, "SUBACK", func() bool { return allSubscribed(sub) })
	close(stopSub)
	<-subDone

	pub := newCrashPub("pub", codec.V5, 1, "t/a")
	pub.interval = time.Millisecond
	pub.size = 8 << 10 // the engine rotates its log and writes tables while the disk fills
	stopPub := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			err := pub.run(t, p.addr, stopPub)
			select {
			case <-stopPub:
				return
			default:
			}
			if err != nil && !isConnErr(err) {
				t.Errorf("publisher: %v", err)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	acked := func() int { pub.mu.Lock(); defer pub.mu.Unlock(); return len(pub.acked) }
	refused := func() int { pub.mu.Lock(); defer pub.mu.Unlock(); return pub.refused }
	mqtttest.WaitWithin(t, 10*time.Second, "messages acknowledged", func() bool { return acked() > 100 })

	// New CONNECTs, all along: each must be answered within a second.
	stopProbe := make(chan struct{})
	var probes, slow int
	var worst time.Duration
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stopProbe:
				return
			case <-time.After(200 * time.Millisecond):
			}
			start := time.Now()
			c, _, err := dialMQTT(t, p.addr, fmt.Sprint("probe-", i), codec.V5, true)
			d := time.Since(start)
			probes++
			worst = max(worst, d)
			if err != nil || d > time.Second {
				slow++
				t.Errorf("CONNECT %d: %v after %v", i, err, d)
			}
			if c != nil {
				c.Close()
			}
		}
	})

	// The other program: fills the file system until it is refused.
	fill := filepath.Join(mnt, "fill")
	f, err := os.Create(fill)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()
	mqtttest.WaitWithin(t, 10*time.Second, "a refusal for space", func() bool { return refused() > 0 })
	if hard {
		mqtttest.WaitWithin(t, 10*time.Second, "the reserve given up", func() bool {
			_, err := os.Stat(filepath.Join(data, "store", "EMERGENCY-RESERVE"))
			return os.IsNotExist(err)
		})
	}
	mqtttest.WaitWithin(t, 5*time.Second, "/healthz degraded", func() bool {
		code, body := httpGet(t, web+"/healthz")
		return code == 200 && strings.Contains(body, `"degraded"`)
	})
	start := time.Now()
	code, body := httpGet(t, web+"/readyz")
	if d := time.Since(start); d > time.Second {
		t.Errorf("/readyz took %v on a full disk", d)
	}
	if code != 503 || !strings.Contains(body, "store") {
		t.Errorf("/readyz on a full disk: %d %s, want 503 naming the store", code, body)
	}
	t.Logf("full: /readyz %d %s", code, strings.TrimSpace(body))
	time.Sleep(2 * time.Second) // keep the pressure on: refusals, CONNECTs

	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	before := acked()
	mqtttest.WaitWithin(t, 10*time.Second, "acknowledgements again", func() bool { return acked() > before+100 })
	mqtttest.WaitWithin(t, 5*time.Second, "/healthz ok", func() bool {
		code, body := httpGet(t, web+"/healthz")
		return code == 200 && strings.Contains(body, `"ok"`)
	})
	if code, body := httpGet(t, web+"/readyz"); code != 200 {
		t.Errorf("/readyz after the fault: %d %s", code, body)
	}
	time.Sleep(time.Second)
	close(stopProbe)
	close(stopPub)
	wg.Wait()
	p.stop(t)
	t.Logf("%d acknowledged, %d refused; %d CONNECTs, worst %v, %d slow", len(pub.acked), pub.refused, probes, worst.Round(time.Millisecond), slow)

	// Everything acknowledged is delivered after a restart.
	p = startBroker(t, data, "-c", cfg)
	stopSub = make(chan struct{})
	subDone = make(chan struct{})
	go func() { defer close(subDone); _ = sub.run(t, p.addr, stopSub) }()
	mqtttest.WaitWithin(t, 30*time.Second, "the queue delivered", func() bool {
		sub.mu.Lock()
		n := len(sub.got)
		sub.mu.Unlock()
		return n >= len(pub.acked) && sub.quietFor() > 500*time.Millisecond
	})
	close(stopSub)
	<-subDone
	got := map[int]bool{}
	for _, d := range sub.got {
		got[d.seq] = true
	}
	lost := 0
	for _, seq := range pub.acked {
		if !got[seq] {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged messages lost", lost, len(pub.acked))
	}
	p.stop(t)
}
