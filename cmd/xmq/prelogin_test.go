//go:build linux

package main

import (
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
)

// rssKiB reads a VmRSS-style field of a process, in KiB.
func rssKiB(t *testing.T, pid int, field string) int {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// hugeConnect is an MQTT 5 CONNECT of about size bytes, all of it empty
// user properties: the shape that took the broker to gigabytes, since a
// 5-byte pair decodes into a 48-byte value.
func hugeConnect(id string, size int) []byte {
	p := &codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, ClientID: []byte(id)}
	p.Props.User = make([]codec.UserProperty, size/5)
	return p.Append(nil, codec.V5)
}

// TestPreLoginFlood: unauthenticated clients cannot exhaust the broker.
// 150 CONNECTs of 1 MB full of user properties, then 2,000 connections
// each holding a CONNECT just under max_connect_size with its last byte
// missing, leave the broker under 100 MB above its idle RSS, and a good
// client still logs in in well under a second.
func TestPreLoginFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 2,150 connections")
	}
	p := startBroker(t, "")
	pid := p.cmd.Process.Pid
	time.Sleep(200 * time.Millisecond)
	idle := rssKiB(t, pid, "VmRSS")

	// 150 CONNECTs of 1 MB each, written in full.
	big := hugeConnect("big", 1<<20)
	var wg sync.WaitGroup
	for range 150 {
		wg.Go(func() {
			c, err := net.Dial("tcp", p.addr)
			if err != nil {
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = c.Write(big) // the broker closes early: a write error is expected
		})
	}
	wg.Wait()

	// 2,000 CONNECTs just under 64 KiB, all but the last byte sent.
	slow := hugeConnect("slow", 60<<10)
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			_ = c.Close()
		}
	})
	sem := make(chan struct{}, 100)
	for range 2000 {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := net.Dial("tcp", p.addr)
			if err != nil {
				return
			}
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, _ = c.Write(slow[:len(slow)-1])
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		})
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond) // let the broker read what it will

	// A good client logs in meanwhile.
	start := time.Now()
	c, ack, err := dialMQTT(t, p.addr, "good", codec.V5, true)
	if err != nil {
		t.Fatalf("good client: %v (%+v)", err, ack)
	}
	took := time.Since(start)
	c.Close()

	peak := rssKiB(t, pid, "VmHWM")
	t.Logf("idle RSS %d KiB, peak %d KiB (+%d KiB); good client logged in in %v", idle, peak, peak-idle, took)
	if peak-idle > 100<<10 {
		t.Errorf("the flood took the broker from %d KiB to %d KiB, more than 100 MB above idle", idle, peak)
	}
	if took > time.Second {
		t.Errorf("the good client took %v to log in", took)
	}
	if log := p.stderr.String(); !strings.Contains(log, "pre-login memory budget") ||
		!strings.Contains(log, "larger than max_connect_size") {
		t.Errorf("nothing logged about the refused handshakes:\n%s", p.stderr)
	}
}
