//go:build unix

package main

// Crash tests: a real xmq process with a data directory, persistent QoS 1
// and QoS 2 traffic, kill -9 at random points, restart, and every message
// whose PUBACK/PUBCOMP its publisher received must be delivered — QoS 1
// duplicates only with DUP set, QoS 2 exactly once — in order per publisher.
// Unix only: a graceful stop is SIGTERM, which Windows cannot send.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/mqtttest"
	"github.com/xmq-io/xmq/store"
)

// xmqBinary builds the broker once per test binary.
var xmqBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "xmq-crash-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "xmq")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// proc is a broker process.
type proc struct {
	cmd    *exec.Cmd
	addr   string
	stderr *mqtttest.Buffer
	exited chan struct{}
	dir    string // the data directory, set by spawnNodes
}

// startBroker runs xmq on a free loopback port with dataDir and waits until
// it listens. args are added to the command line.
func startBroker(t *testing.T, dataDir string, args ...string) *proc {
	t.Helper()
	bin, err := xmqBinary()
	if err != nil {
		t.Skipf("cannot build xmq: %v", err)
	}
	p, err := spawnBroker(bin, dataDir, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill() })
	return p
}

func spawnBroker(bin, dataDir string, args ...string) (*proc, error) {
	full := []string{"-listen", "127.0.0.1:0", "-data", dataDir, "-log-format", "json", "-log-level", "info"}
	if webFlag(bin) {
		full = append(full, "-web", "")
	}
	p := &proc{cmd: exec.Command(bin, append(full, args...)...), stderr: &mqtttest.Buffer{}, exited: make(chan struct{})}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stderr = pw
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	pw.Close()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			p.stderr.Write(append(line, '\n'))
			var rec struct {
				Msg     string `json:"msg"`
				Address string `json:"address"`
			}
			if json.Unmarshal(line, &rec) == nil && rec.Msg == "listening" {
				select {
				case addr <- rec.Address:
				default:
				}
			}
		}
	}()
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	select {
	case p.addr = <-addr:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("xmq exited before listening: %v\n%s", p.cmd.ProcessState, p.stderr)
	case <-time.After(10 * time.Second):
		p.kill()
		return nil, fmt.Errorf("xmq not listening after 10s\n%s", p.stderr)
	}
}

// webFlag reports whether this build has the -web flag (the dashboard),
// which the crash tests turn off.
var webFlag = func() func(string) bool {
	var once sync.Once
	var has bool
	return func(bin string) bool {
		once.Do(func() {
			out, _ := exec.Command(bin, "-h").Output()
			has = bytes.Contains(out, []byte("  -web "))
		})
		return has
	}
}()

// kill is kill -9.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// stop is a graceful shutdown (SIGTERM).
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("xmq did not stop on SIGTERM\n%s", p.stderr)
	}
	if !p.cmd.ProcessState.Success() {
		t.Errorf("xmq exited with %v\n%s", p.cmd.ProcessState, p.stderr)
	}
}

// crashPub is a publisher whose acknowledged messages must survive. Its
// state lives across connections, as a persistent MQTT client's does.
type crashPub struct {
	id    string
	v     byte
	qos   byte
	topic string
	size  int // payload bytes (at least 62)

	mu sync.Mutex
	// interval paces publishing: a message every interval (0: as fast
	// as the window allows; below 0: no more).
	interval time.Duration
	next     int            // next sequence number to publish
	nextID   uint16         // last packet id used
	flight   map[uint16]int // packet id → sequence, awaiting PUBACK / PUBCOMP
	recd     map[uint16]bool
	acked    []int // sequences acknowledged (PUBACK / PUBCOMP)
	refused  int
}

// closedTime is a channel that is always ready.
var closedTime = func() <-chan time.Time {
	ch := make(chan time.Time)
	close(ch)
	return ch
}()

func newCrashPub(id string, v, qos byte, topic string) *crashPub {
	return &crashPub{id: id, v: v, qos: qos, topic: topic, flight: map[uint16]int{}, recd: map[uint16]bool{}}
}

func payload(pub string, seq int) []byte {
	p := fmt.Sprintf("%s:%08d:", pub, seq)
	return []byte(p + strings.Repeat("x", max(62-len(p), 0)))
}

// payload is message seq's payload, padded to p.size.
func (p *crashPub) payload(seq int) []byte {
	b := payload(p.id, seq)
	return append(b, strings.Repeat("x", max(p.size-len(b), 0))...)
}

func parsePayload(b []byte) (pub string, seq int, ok bool) {
	parts := strings.SplitN(string(b), ":", 3)
	if len(parts) != 3 {
		return "", 0, false
	}
	_, err := fmt.Sscanf(parts[1], "%d", &seq)
	return parts[0], seq, err == nil
}

// run connects, finishes the QoS 2 flows of the last connection and
// publishes with a window of 16 until the connection fails or stop closes.
func (p *crashPub) run(t testing.TB, addr string, stop <-chan struct{}) error {
	c, _, err := dialMQTT(t, addr, p.id, p.v, false)
	if err != nil {
		return err
	}
	defer c.Close()
	window := make(chan struct{}, 16)
	p.mu.Lock()
	if p.qos == 1 {
		clear(p.flight) // a QoS 1 publisher that lost its acks just gives up on them
	}
	// Resent in their original order [MQTT-4.6.0-1].
	ids := make([]uint16, 0, len(p.flight))
	for id := range p.flight {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b uint16) int { return p.flight[a] - p.flight[b] })
	for _, id := range ids {
		seq := p.flight[id]
		window <- struct{}{}
		var err error
		if p.recd[id] {
			err = c.TrySend(&codec.Ack{Kind: codec.PUBREL, PacketID: id})
		} else {
			err = c.TrySend(&codec.Publish{QoS: p.qos, Dup: true, PacketID: id, Topic: []byte(p.topic), Payload: p.payload(seq)})
		}
		if err != nil {
			p.mu.Unlock()
			return err
		}
	}
	p.mu.Unlock()
	readErr := make(chan error, 1)
	readDone := make(chan struct{})
	// Deferred after c.Close, so it runs first: close the connection
	// and wait for the reader, whose writes to p the caller reads next.
	defer func() { c.Close(); <-readDone }()
	go func() {
		defer close(readDone)
		for {
			pk, _, err := c.NextWithin(c.Timeout)
			if errors.Is(err, mqtttest.ErrTimeout) {
				continue
			}
			if err != nil {
				readErr <- err
				return
			}
			a, ok := pk.(*codec.Ack)
			if !ok {
				readErr <- fmt.Errorf("publisher got %v", pk)
				return
			}
			p.mu.Lock()
			seq, known := p.flight[a.PacketID]
			if !known {
				p.mu.Unlock()
				continue
			}
			switch {
			case a.Kind == codec.PUBCOMP && a.ReasonCode == codec.PacketIdentifierNotFound:
				// The broker completed the flow before the crash; only
				// its PUBCOMP was lost (MQTT 5 says so; 3.1.1 cannot).
				delete(p.flight, a.PacketID)
				delete(p.recd, a.PacketID)
				p.acked = append(p.acked, seq)
				<-window
			case a.ReasonCode.IsError():
				delete(p.flight, a.PacketID)
				p.refused++
				<-window
			case a.Kind == codec.PUBREC:
				p.recd[a.PacketID] = true
				_ = c.TrySend(&codec.Ack{Kind: codec.PUBREL, PacketID: a.PacketID})
			case a.Kind == codec.PUBACK || a.Kind == codec.PUBCOMP:
				delete(p.flight, a.PacketID)
				delete(p.recd, a.PacketID)
				p.acked = append(p.acked, seq)
				<-window
			}
			p.mu.Unlock()
		}
	}()
	for {
		p.mu.Lock()
		iv := p.interval
		p.mu.Unlock()
		var pace <-chan time.Time
		switch {
		case iv > 0:
			pace = time.After(iv)
		case iv < 0:
			pace = nil // never
		default:
			pace = closedTime
		}
		select {
		case <-pace:
		case err := <-readErr:
			return err
		case <-stop:
			return nil
		}
		select {
		case window <- struct{}{}:
		case err := <-readErr:
			return err
		case <-stop:
			return nil
		}
		p.mu.Lock()
		p.nextID++
		for p.nextID == 0 || p.flight[p.nextID] != 0 {
			p.nextID++
		}
		id, seq := p.nextID, p.next
		p.next++
		p.flight[id] = seq
		p.mu.Unlock()
		if err := c.TrySend(&codec.Publish{QoS: p.qos, PacketID: id, Topic: []byte(p.topic), Payload: p.payload(seq)}); err != nil {
			return err
		}
	}
}

// crashSub is a persistent subscriber; for QoS 2 it delivers on PUBLISH and
// remembers the packet id until PUBREL, across connections (method B).
type crashSub struct {
	id     string
	v      byte
	qos    byte
	filter string

	// bridged: the messages cross a bridge, so a QoS 1 redelivery may
	// reach this subscriber as a new message, without DUP [MQTT-3.3.1-3].
	bridged bool

	mu         sync.Mutex
	subscribed bool
	unreleased map[uint16]bool
	got        []delivered
	last       time.Time
}

type delivered struct {
	pub string
	seq int
	dup bool
}

func newCrashSub(id string, v, qos byte, filter string) *crashSub {
	return &crashSub{id: id, v: v, qos: qos, filter: filter, unreleased: map[uint16]bool{}}
}

// run connects and receives until the connection fails or stop closes.
func (s *crashSub) run(t testing.TB, addr string, stop <-chan struct{}) error {
	c, ack, err := dialMQTT(t, addr, s.id, s.v, false)
	if err != nil {
		return err
	}
	defer c.Close()
	go func() { <-stop; c.Close() }()
	s.mu.Lock()
	first := !s.subscribed
	s.mu.Unlock()
	// Subscribed again when its session is gone (a cluster node died
	// with it), as a real client does on Session Present 0.
	if first || !ack.SessionPresent {
		if err := c.TrySend(&codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: []byte(s.filter), QoS: s.qos}}}); err != nil {
			return err
		}
	}
	for {
		pk, _, err := c.NextWithin(c.Timeout)
		if errors.Is(err, mqtttest.ErrTimeout) {
			continue
		}
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.last = time.Now()
		switch pk := pk.(type) {
		case *codec.Suback:
			s.subscribed = pk.ReasonCodes[0] == codec.ReasonCode(s.qos)
		case *codec.Publish:
			pub, seq, ok := parsePayload(pk.Payload)
			if !ok {
				s.mu.Unlock()
				return fmt.Errorf("bad payload %q", pk.Payload)
			}
			switch pk.QoS {
			case 1:
				s.got = append(s.got, delivered{pub, seq, pk.Dup})
				_ = c.TrySend(&codec.Ack{Kind: codec.PUBACK, PacketID: pk.PacketID})
			case 2:
				if !s.unreleased[pk.PacketID] {
					s.unreleased[pk.PacketID] = true
					s.got = append(s.got, delivered{pub, seq, pk.Dup})
				}
				_ = c.TrySend(&codec.Ack{Kind: codec.PUBREC, PacketID: pk.PacketID})
			}
		case *codec.Ack:
			if pk.Kind == codec.PUBREL {
				delete(s.unreleased, pk.PacketID)
				_ = c.TrySend(&codec.Ack{Kind: codec.PUBCOMP, PacketID: pk.PacketID})
			}
		}
		s.mu.Unlock()
	}
}

// allSubscribed reports whether every subscriber has its SUBACK.
func allSubscribed(subs ...*crashSub) bool {
	for _, s := range subs {
		s.mu.Lock()
		ok := s.subscribed
		s.mu.Unlock()
		if !ok {
			return false
		}
	}
	return true
}

func (s *crashSub) quietFor() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Since(s.last)
}

// crashRounds is how many rounds a kill -9 test runs (n, half with
// -short) and the source of its random kill times, whose seed it logs.
func crashRounds(t *testing.T, n int) (int, *rand.Rand) {
	t.Helper()
	if testing.Short() {
		n /= 2
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return n, rand.New(rand.NewPCG(seed, seed))
}

// TestCrashPersistentDelivery: rounds of traffic, each ended by kill -9 at
// a random moment, then a clean run that drains everything.
func TestCrashPersistentDelivery(t *testing.T) {
	rounds, rng := crashRounds(t, 6)
	dataDir := t.TempDir()
	// Publishers outrun offline subscribers by tens of thousands of
	// messages; the default max_queued would refuse most of them, and a
	// 3.1.1 publisher is acknowledged for what a full queue refused.
	cfg := writeFile(t, "broker:\n  max_queued: 1000000\n")
	pubs := []*crashPub{newCrashPub("pub1", codec.V311, 1, "crash/q1"), newCrashPub("pub2", codec.V5, 2, "crash/q2")}
	// sub3, the only member of a shared group, gets pub1's messages too: a
	// delivery acknowledged before its commit round is never written
	// (store.pending), for a shared group's member as for a subscriber.
	subs := []*crashSub{newCrashSub("sub1", codec.V5, 1, "crash/q1"), newCrashSub("sub2", codec.V311, 2, "crash/q2"),
		newCrashSub("sub3", codec.V311, 1, "$share/g/crash/q1")}

	// Subscribe first, so that nothing published is owed to no one.
	b := startBroker(t, dataDir, "-c", cfg)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Go(func() { _ = s.run(t, b.addr, stop) })
	}
	waitUntil(t, "subscriptions", func() bool { return allSubscribed(subs...) })
	close(stop)
	wg.Wait()
	b.stop(t)

	for round := range rounds {
		b := startBroker(t, dataDir, "-c", cfg)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, p := range pubs {
			wg.Go(func() {
				if err := p.run(t, b.addr, stop); err != nil && !isConnErr(err) {
					t.Errorf("round %d: %s: %v", round, p.id, err)
				}
			})
		}
		// Subscribers are offline in even rounds (messages queue on disk)
		// and online in odd ones (delivery and acks race the kill).
		if round%2 == 1 {
			for _, s := range subs {
				wg.Go(func() { _ = s.run(t, b.addr, stop) })
			}
		}
		time.Sleep(time.Duration(50+rng.IntN(350)) * time.Millisecond)
		b.kill()
		close(stop)
		wg.Wait()
	}

	// A last run: publishers finish their QoS 2 flows, subscribers drain.
	b = startBroker(t, dataDir, "-c", cfg)
	stop = make(chan struct{})
	var pwg sync.WaitGroup
	wg = sync.WaitGroup{}
	for _, s := range subs {
		wg.Go(func() {
			if err := s.run(t, b.addr, stop); err != nil && !isConnErr(err) {
				t.Errorf("%s: %v", s.id, err)
			}
		})
	}
	pstop := make(chan struct{})
	for _, p := range pubs {
		p.mu.Lock()
		p.next = -1 << 30 // marks the extra messages this run adds; not checked
		p.mu.Unlock()
		pwg.Go(func() { _ = p.run(t, b.addr, pstop) })
	}
	waitUntil(t, "QoS 2 flows to finish", func() bool {
		pubs[1].mu.Lock()
		defer pubs[1].mu.Unlock()
		for _, seq := range pubs[1].flight {
			if seq >= 0 {
				return false
			}
		}
		return true
	})
	close(pstop)
	pwg.Wait()
	waitUntil(t, "subscribers to drain", func() bool {
		for _, s := range subs {
			if s.quietFor() <= 300*time.Millisecond {
				return false
			}
		}
		return true
	})
	close(stop)
	wg.Wait()
	b.stop(t)

	for i, p := range pubs {
		checkDelivered(t, p, subs[i])
	}
	checkDelivered(t, pubs[0], subs[2])
}

// checkDelivered checks what s received of p's messages.
func checkDelivered(t *testing.T, p *crashPub, s *crashSub) {
	t.Helper()
	count := map[int]int{}
	last := -1
	dupNoFlag := 0
	outOfOrder := 0
	for _, d := range s.got {
		if d.pub != p.id || d.seq < 0 {
			continue
		}
		count[d.seq]++
		if count[d.seq] > 1 {
			if p.qos == 2 {
				t.Errorf("%s: QoS 2 message %d delivered %d times", s.id, d.seq, count[d.seq])
			} else if !d.dup {
				dupNoFlag++
			}
			continue
		}
		if d.seq <= last {
			outOfOrder++
		}
		last = d.seq
	}
	lost := 0
	for _, seq := range p.acked {
		if seq >= 0 && count[seq] == 0 {
			lost++
			if lost <= 5 {
				t.Errorf("%s: acknowledged message %d never delivered to %s", p.id, seq, s.id)
			}
		}
	}
	dups := 0
	for _, n := range count {
		dups += n - 1
	}
	t.Logf("%s → %s (QoS %d): %d acknowledged, %d refused, %d delivered, %d duplicates, %d lost",
		p.id, s.id, p.qos, len(p.acked), p.refused, len(count), dups, lost)
	if dupNoFlag > 0 && !s.bridged {
		t.Errorf("%s: %d QoS 1 duplicates without DUP", s.id, dupNoFlag)
	}
	if outOfOrder > 0 {
		t.Errorf("%s: %d messages of %s out of order", s.id, outOfOrder, p.id)
	}
	if p.refused > 0 {
		t.Errorf("%s: %d messages refused", p.id, p.refused)
	}
	if len(p.acked) == 0 {
		t.Errorf("%s: no message acknowledged in any round", p.id)
	}
}

// isConnErr: err is the connection's failure (a broker killed, a CONNACK
// that never came), not a protocol error.
func isConnErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, mqtttest.ErrTimeout) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "EOF")
}

// TestRestartKeepsRetainedAndSubscriptions: after kill -9, a persistent
// session keeps its subscription and the retained message is still there;
// a client that starts clean with the same id finds nothing of its session.
func TestRestartKeepsRetainedAndSubscriptions(t *testing.T) {
	dataDir := t.TempDir()
	b := startBroker(t, dataDir)
	pub, _, err := dialMQTT(t, b.addr, "pub", codec.V5, true)
	if err != nil {
		t.Fatal(err)
	}
	pub.Send(&codec.Publish{QoS: 1, PacketID: 1, Retain: true, Topic: []byte("keep/r"), Payload: []byte("retained")})
	mqtttest.Expect[*codec.Ack](pub)
	for _, id := range []string{"keeper", "quitter"} {
		s, _, err := dialMQTT(t, b.addr, id, codec.V311, false)
		if err != nil {
			t.Fatal(err)
		}
		s.Send(&codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: []byte("keep/live"), QoS: 1}}})
		mqtttest.Expect[*codec.Suback](s)
		s.Close()
	}
	pub.Send(&codec.Publish{QoS: 1, PacketID: 2, Topic: []byte("keep/live"), Payload: []byte("queued")})
	mqtttest.Expect[*codec.Ack](pub)
	b.kill()

	b = startBroker(t, dataDir)
	keeper, ack, err := dialMQTT(t, b.addr, "keeper", codec.V311, false)
	if err != nil {
		t.Fatal(err)
	}
	if !ack.SessionPresent {
		t.Error("persistent session not present after the restart")
	}
	if p := mqtttest.Expect[*codec.Publish](keeper); string(p.Payload) != "queued" {
		t.Errorf("queued message %q, want %q", p.Payload, "queued")
	}
	pub, _, err = dialMQTT(t, b.addr, "pub", codec.V5, true)
	if err != nil {
		t.Fatal(err)
	}
	pub.Send(&codec.Publish{QoS: 1, PacketID: 3, Topic: []byte("keep/live"), Payload: []byte("after")})
	if p := mqtttest.Expect[*codec.Publish](keeper); string(p.Payload) != "after" {
		t.Errorf("subscription lost: got %q, want %q", p.Payload, "after")
	}
	quitter, ack, err := dialMQTT(t, b.addr, "quitter", codec.V311, true)
	if err != nil {
		t.Fatal(err)
	}
	if ack.SessionPresent {
		t.Error("clean start: session present")
	}
	quitter.Send(&codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: []byte("keep/#"), QoS: 1}}})
	mqtttest.Expect[*codec.Suback](quitter)
	if p := mqtttest.Expect[*codec.Publish](quitter); string(p.Payload) != "retained" || !p.Retain {
		t.Errorf("got %q retain %v, want the retained message and nothing of the old session", p.Payload, p.Retain)
	}
	if p, _, err := quitter.NextWithin(200 * time.Millisecond); err == nil {
		t.Errorf("clean-start client got %v from its old session", p)
	}
	b.stop(t)
}

func TestReadOnlyDataDir(t *testing.T) {
	dataDir := t.TempDir()
	if err := os.MkdirAll(storeDir(dataDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chattr", "+i", storeDir(dataDir)).CombinedOutput(); err != nil {
			t.Skipf("chattr +i: %v %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("chattr", "-i", storeDir(dataDir)).Run() })
	} else {
		if err := os.Chmod(storeDir(dataDir), 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(storeDir(dataDir), 0o700) })
	}
	err := run(t.Context(), []string{"-listen", "127.0.0.1:0", "-data", dataDir}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not writable") || !strings.Contains(err.Error(), "fix:") {
		t.Fatalf("run with a read-only store directory: %v, want a clear error with the fix", err)
	}
}

// TestStoreCheck: `xmq store check` passes a store a broker wrote, and
// reports a damaged one — which a start refuses with the same advice.
func TestStoreCheck(t *testing.T) {
	dataDir := t.TempDir()
	b := startBroker(t, dataDir)
	c, _, err := dialMQTT(t, b.addr, "s", codec.V5, false)
	if err != nil {
		t.Fatal(err)
	}
	c.Send(&codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: []byte("x"), QoS: 1}}})
	mqtttest.Expect[*codec.Suback](c)
	c.Send(&codec.Publish{QoS: 1, PacketID: 2, Retain: true, Topic: []byte("r"), Payload: []byte("v")})
	mqtttest.Expect[*codec.Ack](c)
	b.stop(t)

	var out bytes.Buffer
	if err := run(t.Context(), []string{"store", "check", dataDir}, &out, io.Discard); err != nil {
		t.Fatalf("store check: %v\n%s", err, &out)
	}
	if !strings.Contains(out.String(), "sessions 1") || !strings.Contains(out.String(), "retained 1") ||
		!strings.HasSuffix(out.String(), "ok\n") {
		t.Errorf("store check output:\n%s", &out)
	}

	// A record no build wrote: check lists it, a start refuses with advice.
	st, err := store.Open(storeDir(dataDir), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutSession("junk", []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = run(t.Context(), []string{"store", "check", dataDir}, &out, io.Discard)
	if err == nil || !strings.Contains(out.String(), `session "junk"`) {
		t.Errorf("store check of a damaged store: %v\n%s", err, &out)
	}
	err = run(t.Context(), []string{"-listen", "127.0.0.1:0", "-data", dataDir}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "xmq store check "+dataDir) {
		t.Errorf("start on a damaged store: %v, want the store check advice", err)
	}
}
