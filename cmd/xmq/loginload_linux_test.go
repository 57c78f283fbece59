package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/codec"
)

// BenchmarkLoginUnderAttack is the hashing-fairness measurement of issue
// 23, end to end: a broker process (on CPU 0 with GOMAXPROCS=1 when
// taskset is there) with a password file at bcrypt's default cost, 1,000
// wrong logins from 100 loopback addresses in progress, and a first login
// of another user from an address that has not failed. It reports that
// login's CONNECT→CONNACK time (ms/login, the median of b.N broker runs;
// max-ms the worst). Run the generator on the other CPU:
//
//	taskset -c 1 go test -run X -bench LoginUnderAttack -benchtime 5x ./cmd/xmq/
func BenchmarkLoginUnderAttack(b *testing.B) {
	const sources, each = 100, 10
	dir := b.TempDir()
	file := filepath.Join(dir, "passwd")
	for _, u := range [][2]string{{"alice", "wonderland"}, {"bob", "builder"}} {
		if err := auth.SetPassword(file, u[0], []byte(u[1]), false, auth.PasswordOptions{Cost: bcrypt.DefaultCost, SCRAM: auth.PasswordSCRAMs}); err != nil {
			b.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "xmq.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "auth:\n  password_file: %s\n  allow_anonymous: false\n", file), 0o600); err != nil {
		b.Fatal(err)
	}
	bin, err := xmqBinary()
	if err != nil {
		b.Skipf("cannot build xmq: %v", err)
	}
	var took []time.Duration
	for i := range b.N {
		b.StopTimer()
		p := spawnPinned(b, bin, cfg)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for s := range sources {
			src := net.IPv4(127, byte(10+i%200), byte(s/250), byte(1+s%250))
			for range each {
				wg.Go(func() { loginOnce(p.addr, src, "alice", "guess", stop) })
			}
		}
		time.Sleep(300 * time.Millisecond) // the attack is under way
		b.StartTimer()
		start := time.Now()
		rc, err := loginAt(p.addr, net.IPv4(127, 250, 0, byte(1+i%250)), "bob", "builder", 30*time.Second)
		took = append(took, time.Since(start))
		b.StopTimer()
		if err != nil || rc != codec.Success {
			b.Fatalf("legitimate login: %v %v", rc, err)
		}
		close(stop)
		wg.Wait()
		p.kill()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms/login")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
}

// spawnPinned starts the broker on CPU 0 with one P when taskset exists.
func spawnPinned(b *testing.B, bin, cfg string) *proc {
	b.Helper()
	if ts, err := exec.LookPath("taskset"); err == nil {
		wrapper := filepath.Join(b.TempDir(), "xmq-pinned")
		script := fmt.Sprintf("#!/bin/sh\nGOMAXPROCS=1 exec %s -c 0 %s \"$@\"\n", ts, bin)
		if err := os.WriteFile(wrapper, []byte(script), 0o700); err != nil {
			b.Fatal(err)
		}
		bin = wrapper
	}
	p, err := spawnBroker(bin, "", "-c", cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.kill)
	return p
}

// connectFrom dials addr from src and sends a CONNECT with user and pass.
func connectFrom(addr string, src net.IP, id, user, pass string) (net.Conn, *codec.Reader, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	cp := &codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, ClientID: []byte(id),
		UsernameFlag: true, Username: []byte(user), PasswordFlag: true, Password: []byte(pass)}
	if _, err := conn.Write(cp.Append(nil, codec.V5)); err != nil {
		conn.Close()
		return nil, nil, err
	}
	r := codec.NewReader(bufio.NewReader(conn), 0)
	r.Version = codec.V5
	return conn, r, nil
}

// loginOnce logs in from src and waits for the answer, or for stop.
func loginOnce(addr string, src net.IP, user, pass string, stop <-chan struct{}) {
	conn, r, err := connectFrom(addr, src, "bot", user, pass)
	if err != nil {
		return
	}
	defer conn.Close()
	go func() { <-stop; conn.Close() }()
	_, _ = r.ReadPacket()
}

// loginAt logs in from src and returns the CONNACK's reason code.
func loginAt(addr string, src net.IP, user, pass string, wait time.Duration) (codec.ReasonCode, error) {
	conn, r, err := connectFrom(addr, src, "good", user, pass)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	pk, err := r.ReadPacket()
	if err != nil {
		return 0, err
	}
	ack, ok := pk.(*codec.Connack)
	if !ok {
		return 0, fmt.Errorf("got %T", pk)
	}
	return ack.ReasonCode, nil
}
