package bridge_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/xmq-io/xmq/bridge"
	"github.com/xmq-io/xmq/certs/certstest"
	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/bridgelocal"
	"github.com/xmq-io/xmq/internal/mqtttest"
	"github.com/xmq-io/xmq/listeners"
	"github.com/xmq-io/xmq/store"
)

// storeBroker is a TCP broker on addr (free port: "") with an on-disk
// store in dir, so a restart keeps its sessions.
func storeBroker(t *testing.T, dir, addr string) *broker {
	t.Helper()
	st, err := store.Open(dir, store.Options{Durability: store.DurabilityNone})
	if err != nil {
		t.Fatal(err)
	}
	return newBroker(t, core.Options{}, core.Config{Store: st}, listeners.Options{Address: addr})
}

// TestQueueWhileRemoteDown: with the remote gone, QoS 1 messages out wait
// in the bridge's local session, bounded by max_queued with the session
// queue's overflow policy and counters, QoS 0 ones are dropped and
// counted; when the remote is back the queued ones arrive in order.
func TestQueueWhileRemoteDown(t *testing.T) {
	dir := t.TempDir()
	remote := storeBroker(t, dir, "")
	local := tcpBroker(t, core.Options{MaxQueued: 30}, core.Config{})
	m := local.bridges(t, nil, fast(bridge.Config{Name: "up", Addresses: []string{remote.url},
		Topics: []bridge.Rule{{Topic: "q/#", QoS: 1}}}))
	waitState(t, m, "up", bridge.StateConnected)
	rsub := dialClient(t, remote, "rsub", codec.V5, persistent)
	rsub.Subscribe("q/#", 1)
	rsub.Close()
	remote.stop()
	mqtttest.WaitFor(t, "the link to go down", func() bool { st, _ := m.Bridge("up"); return st.State != bridge.StateConnected })

	lpub := dialClient(t, local, "lpub", codec.V5)
	refused := 0
	for i := range 40 {
		if rc := lpub.Publish(&codec.Publish{Topic: []byte("q/x"), QoS: 1, Payload: []byte(fmt.Sprint("m", i))}); rc == codec.QuotaExceeded {
			refused++
		}
	}
	for range 5 {
		lpub.Pub("q/x", "qos0", 0, false)
	}
	lpub.Pub("q/flush", "", 1, false) // after the QoS 0 ones: they have been routed
	st, _ := m.Bridge("up")
	if refused != 10 || st.Queued != 30 || st.Dropped["local_queue"] != 16 {
		t.Errorf("refused %d, queued %d, local drops %d; want 10, 30 and 16 (10 refused, 5 QoS 0, the flush)",
			refused, st.Queued, st.Dropped["local_queue"])
	}

	remote = storeBroker(t, dir, remote.addr)
	rsub = dialClient(t, remote, "rsub", codec.V5, persistent)
	got := payloads(rsub.Expect(30))
	if want := seq("m", 30); !slices.Equal(got, want) {
		t.Errorf("after the remote came back: %q, want %q", got, want)
	}
	rsub.Nothing()
	mqtttest.WaitFor(t, "an empty queue", func() bool { st, _ := m.Bridge("up"); return st.Queued == 0 && st.Inflight == 0 })
}

func seq(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}

// TestStopStart: an operator's stop keeps the local session, which queues;
// start delivers what it queued.
func TestStopStart(t *testing.T) {
	remote := tcpBroker(t, core.Options{}, core.Config{})
	local := tcpBroker(t, core.Options{}, core.Config{})
	m := local.bridges(t, nil, fast(bridge.Config{Name: "up", Addresses: []string{remote.url}, Topics: []bridge.Rule{{Topic: "s/#", QoS: 1}}}))
	waitState(t, m, "up", bridge.StateConnected)
	rsub := dialClient(t, remote, "rsub", codec.V5)
	rsub.Subscribe("s/#", 1)
	if err := m.Stop("up"); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.Bridge("up"); st.State != bridge.StateStopped {
		t.Fatalf("state %s after Stop", st.State)
	}
	lpub := dialClient(t, local, "lpub", codec.V5)
	lpub.Pub("s/1", "while stopped", 1, false)
	rsub.Nothing()
	if err := m.Start("up"); err != nil {
		t.Fatal(err)
	}
	if p := rsub.Expect(1)[0]; string(p.Payload) != "while stopped" {
		t.Errorf("got %q", p.Payload)
	}
	if err := m.Stop("nope"); err == nil {
		t.Error("Stop of an unknown bridge succeeded")
	}
}

// TestApply: a reload adds, changes, disables and removes bridges; a
// changed one keeps its session and counters and drops the subscriptions
// of its old rules; a removed one loses its local session, and so does
// the session of a bridge no longer configured at all.
func TestApply(t *testing.T) {
	remote := tcpBroker(t, core.Options{}, core.Config{})
	local := tcpBroker(t, core.Options{}, core.Config{})
	// What a bridge removed while the broker was down leaves behind.
	orphan := pipeClient(t, local, bridge.UserPrefix+"gone", codec.V5, persistent)
	orphan.Subscribe("o/#", 1)
	orphan.Close()

	cfg := fast(bridge.Config{Name: "up", Addresses: []string{remote.url}, Topics: []bridge.Rule{{Topic: "x/#", QoS: 1}}})
	m := local.bridges(t, nil, cfg)
	waitState(t, m, "up", bridge.StateConnected)
	if _, ok := local.srv.Client(bridge.UserPrefix + "gone"); ok {
		t.Error("the session of a bridge no longer configured is still there")
	}
	filters := func() []string {
		ci, _ := local.srv.Client(bridge.UserPrefix + "up")
		var out []string
		for _, s := range ci.Subscriptions {
			out = append(out, s.Filter)
		}
		return out
	}
	if f := filters(); !slices.Equal(f, []string{"x/#"}) {
		t.Errorf("local subscriptions %q", f)
	}
	rsub := dialClient(t, remote, "rsub", codec.V5)
	rsub.Subscribe("#", 1)
	lpub := dialClient(t, local, "lpub", codec.V5)
	lpub.Pub("x/1", "x", 1, false)
	rsub.Expect(1)

	ch, err := m.Apply([]bridge.Config{cfg})
	if err != nil || !slices.Equal(ch.Unchanged, []string{"up"}) {
		t.Errorf("same configuration: %+v %v", ch, err)
	}
	cfg.Topics = []bridge.Rule{{Topic: "y/#", QoS: 1}}
	ch, err = m.Apply([]bridge.Config{cfg, fast(bridge.Config{Name: "off", Disabled: true, Addresses: []string{remote.url},
		Topics: []bridge.Rule{{Topic: "z"}}})})
	if err != nil || !slices.Equal(ch.Changed, []string{"up"}) || !slices.Equal(ch.Added, []string{"off"}) {
		t.Fatalf("changed rules: %+v %v", ch, err)
	}
	waitState(t, m, "up", bridge.StateConnected)
	mqtttest.WaitFor(t, "the new subscriptions", func() bool { return slices.Equal(filters(), []string{"y/#"}) })
	lpub.Pub("x/2", "not any more", 1, false)
	lpub.Pub("y/1", "y", 1, false)
	if p := rsub.Expect(1)[0]; string(p.Payload) != "y" {
		t.Errorf("got %q, want only what the new rules forward", p.Payload)
	}
	if st, _ := m.Bridge("up"); st.MessagesOut != 2 {
		t.Errorf("counted %d messages out, want 2 (counters kept across the change)", st.MessagesOut)
	}
	if st, _ := m.Bridge("off"); st.State != bridge.StateStopped {
		t.Errorf("a disabled bridge is %s", st.State)
	}

	if _, err := m.Apply([]bridge.Config{{Name: "bad"}}); err == nil {
		t.Error("an invalid configuration was applied")
	}
	if _, ok := m.Bridge("up"); !ok {
		t.Error("an invalid configuration changed the bridges")
	}
	ch, err = m.Apply(nil)
	if err != nil || !slices.Equal(ch.Removed, []string{"off", "up"}) {
		t.Fatalf("removing: %+v %v", ch, err)
	}
	if _, ok := local.srv.Client(bridge.UserPrefix + "up"); ok {
		t.Error("a removed bridge's local session is still there")
	}
}

// TestSweeps: where one side's session is new and the other's is not, the
// bridge makes the old side forget its QoS 2 receipts, which would
// otherwise swallow new messages reusing their packet ids.
func TestSweeps(t *testing.T) {
	t.Run("local session older", func(t *testing.T) {
		remote := tcpBroker(t, core.Options{}, core.Config{})
		local := tcpBroker(t, core.Options{}, core.Config{})
		staleReceipt(t, local, bridge.UserPrefix+"up", bridge.UserPrefix+"up")
		m := local.bridges(t, nil, fast(bridge.Config{Name: "up", Addresses: []string{remote.url},
			Topics: []bridge.Rule{{Topic: "in/#", Direction: bridge.In, QoS: 2}}}))
		waitState(t, m, "up", bridge.StateConnected)
		lsub := dialClient(t, local, "lsub", codec.V5)
		lsub.Subscribe("in/#", 2)
		dialClient(t, remote, "rpub", codec.V5).Pub("in/new", "new", 2, false) // packet id 1 towards the bridge
		if p := lsub.Expect(1)[0]; string(p.Payload) != "new" {
			t.Errorf("got %q", p.Payload)
		}
	})
	t.Run("remote session older", func(t *testing.T) {
		remote := tcpBroker(t, core.Options{}, core.Config{})
		local := tcpBroker(t, core.Options{}, core.Config{})
		staleReceipt(t, remote, "bridge-up", "")
		m := local.bridges(t, nil, fast(bridge.Config{Name: "up", ClientID: "bridge-up", Addresses: []string{remote.url},
			Topics: []bridge.Rule{{Topic: "out/#", QoS: 2}}}))
		waitState(t, m, "up", bridge.StateConnected)
		rsub := dialClient(t, remote, "rsub", codec.V5)
		rsub.Subscribe("out/#", 2)
		dialClient(t, local, "lpub", codec.V5).Pub("out/new", "new", 2, false) // packet id 1 towards the remote
		if p := rsub.Expect(1)[0]; string(p.Payload) != "new" {
			t.Errorf("got %q", p.Payload)
		}
	})
}

// staleReceipt leaves a persistent session of clientID (owned by user) at
// b with packet id 1 received at QoS 2 and never released, as a link cut
// between PUBREC and PUBREL leaves it.
func staleReceipt(t *testing.T, b *broker, clientID, user string) {
	t.Helper()
	ours, theirs := net.Pipe()
	b.srv.ServeConn(theirs, "pipe")
	c := mqtttest.NewConn(t, ours, codec.V5)
	defer c.Close()
	cp := mqtttest.ConnectPacket(codec.V5, clientID, persistent)
	if user != "" {
		cp.UsernameFlag, cp.Username = true, []byte(user)
	}
	for _, p := range []codec.Packet{cp, &codec.Publish{Topic: []byte("stale"), QoS: 2, PacketID: 1, Payload: []byte("old")}} {
		c.Send(p)
		c.Next() // CONNACK, PUBREC
	}
}

// TestBridgeBitFallback: a 3.1.1 remote that refuses Mosquitto's bridge
// bit gets a plain CONNECT at once, and origin tracking takes over.
func TestBridgeBitFallback(t *testing.T) {
	remote := tcpBroker(t, core.Options{}, core.Config{})
	front := refuseBridgeBit(t, remote.addr)
	local := tcpBroker(t, core.Options{}, core.Config{})
	obs, logs := observer.New(zap.InfoLevel)
	m := local.bridges(t, zap.New(obs), fast(bridge.Config{Name: "up", Addresses: []string{"mqtt://" + front},
		Protocol: bridge.ProtocolV311, Topics: []bridge.Rule{{Topic: "#", Direction: bridge.Both, QoS: 1}}}))
	if st := waitState(t, m, "up", bridge.StateConnected); st.LoopPrevention != "origin_tracking" {
		t.Errorf("loop prevention %q", st.LoopPrevention)
	}
	if logs.FilterMessageSnippet("refused Mosquitto's bridge bit").Len() != 1 {
		t.Errorf("logs: %v", logs.All())
	}
	lsub := dialClient(t, local, "lsub", codec.V5)
	lsub.Subscribe("#", 1)
	dialClient(t, local, "lpub", codec.V5).Pub("t", "once", 1, false)
	lsub.Expect(1)
	lsub.Nothing()
}

// refuseBridgeBit is a TCP proxy to addr that answers a CONNECT carrying
// the bridge bit as an old broker does: CONNACK "unacceptable protocol
// version". It returns its own address.
func refuseBridgeBit(t *testing.T, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				hdr, err := br.Peek(9) // fixed header, "MQTT", level
				if err != nil {
					return
				}
				if hdr[8]&codec.BridgeBit != 0 {
					_, _ = c.Write([]byte{0x20, 2, 0, 1})
					return
				}
				up, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
				_, _ = io.Copy(up, br)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestBadRemotes: a wrong password, a CA that does not know the remote's
// certificate, a port nobody listens on and a remote that closes the
// connection after CONNACK. Each is logged with its cause, retried with a
// backoff that grows to its maximum (visible in the status), and none
// makes goroutines or memory grow.
func TestBadRemotes(t *testing.T) {
	good := certstest.NewCA(t)
	other := certstest.NewCA(t)
	withPassword := tcpBroker(t, core.Options{}, core.Config{Authenticator: passwordAuth("right")})
	tlsRemote := newBroker(t, core.Options{}, core.Config{}, listeners.Options{Transport: listeners.TransportTLS, TLS: good.ServerConfig()})
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	_ = dead.Close()
	closer := closeAfterConnack(t)
	local := tcpBroker(t, core.Options{}, core.Config{})

	rules := []bridge.Rule{{Topic: "t/#", QoS: 1}}
	cfgs := []bridge.Config{
		{Name: "password", Addresses: []string{withPassword.url}, Username: "u", Password: "wrong", Topics: rules},
		{Name: "ca", Addresses: []string{tlsRemote.url}, TLS: bridge.TLS{CAFile: other.WriteCAFile()}, Topics: rules},
		{Name: "unreachable", Addresses: []string{"mqtt://" + deadAddr}, Topics: rules},
		{Name: "closer", Addresses: []string{"mqtt://" + closer}, Topics: rules},
	}
	const lo, hi = 10 * time.Millisecond, 80 * time.Millisecond
	for i := range cfgs {
		cfgs[i].BackoffMin, cfgs[i].BackoffMax, cfgs[i].ConnectTimeout = lo, hi, time.Second
	}
	obs, logs := observer.New(zap.InfoLevel)
	m := bridge.NewManager(bridge.Options{Local: bridgelocal.Local{Server: local.srv}, Log: zap.New(obs)})
	if _, err := m.Apply(cfgs); err != nil {
		t.Fatal(err)
	}
	var heapAt [2]uint64
	peak := 0
	const run = 1500 * time.Millisecond
	start := time.Now()
	for time.Since(start) < run {
		peak = max(peak, bridgeGoroutines())
		if heapAt[0] == 0 && time.Since(start) > run/3 {
			heapAt[0] = heapInUse()
		}
		time.Sleep(10 * time.Millisecond)
	}
	heapAt[1] = heapInUse()
	status := map[string]bridge.Status{}
	for _, st := range m.Status() {
		status[st.Name] = st
	}
	m.Close()

	for name, cause := range map[string]string{"password": "auth", "ca": "tls", "unreachable": "dial"} {
		st := status[name]
		n := st.Failures[cause]
		// Backoff: after a few doublings every wait is at least hi/2.
		if n < 5 || n > int64(run/(hi/2))+8 {
			t.Errorf("%s: %d %s failures in %v, want a handful: backoff between %v and %v", name, n, cause, run, lo, hi)
		}
		if st.State != bridge.StateBackoff && st.State != bridge.StateConnecting || st.LastError == "" {
			t.Errorf("%s: state %s, last error %q", name, st.State, st.LastError)
		}
		if st.Links != 0 {
			t.Errorf("%s: %d links made", name, st.Links)
		}
	}
	if st := status["closer"]; st.Links < 5 || st.Links > int64(run/(hi/2))+8 || st.Backoff == 0 {
		t.Errorf("closer: %d links, backoff %v: want a handful, at a backoff that grows", st.Links, st.Backoff)
	}
	for _, w := range []struct {
		bridge, msg string
		n           int
	}{
		{"password", "bridge refused by the remote: check username, password and client_id", int(status["password"].Failures["auth"])},
		{"ca", "bridge cannot set up TLS with the remote", int(status["ca"].Failures["tls"])},
		{"unreachable", "bridge cannot connect", int(status["unreachable"].Failures["dial"])},
		{"closer", "bridge link down", int(status["closer"].Links)},
	} {
		// One line per attempt, give or take the one under way at the end.
		got := logs.FilterField(zap.String("bridge", w.bridge)).FilterMessageSnippet(w.msg).Len()
		if got < w.n-1 || got > w.n+1 {
			t.Errorf("%s: %d log lines %q for %d attempts", w.bridge, got, w.msg, w.n)
		}
	}
	if grown := heapAt[1] - min(heapAt[1], heapAt[0]); grown > 4<<20 {
		t.Errorf("heap grew by %d bytes over %v of failing connections", grown, run*2/3)
	}
	// A running bridge has one goroutine, a link a handful: what failed
	// attempts leave behind would pile up over the run's dozens of them.
	if peak < len(cfgs) {
		t.Fatalf("%d bridge goroutines seen while %d bridges ran: the count is broken", peak, len(cfgs))
	}
	if peak > 4*8 {
		t.Errorf("the bridges' goroutines peaked at %d: failed attempts leave some behind", peak)
	}
	mqtttest.WaitFor(t, "the bridges' goroutines to end", func() bool { return bridgeGoroutines() == 0 })
}

// bridgeGoroutines counts the goroutines running the bridge package's
// code (not the broker's, whose worker pool grows and stays).
func bridgeGoroutines() int {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/xmq-io/xmq/bridge.") {
			n++
		}
	}
	return n
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// passwordAuth accepts every client whose password is pw.
type passwordAuth string

func (p passwordAuth) Authenticate(_, _ string, password []byte, _ net.Addr, _, _ string) error {
	if string(password) != string(p) {
		return codec.BadUserNameOrPassword
	}
	return nil
}

// closeAfterConnack is a remote that accepts every CONNECT and closes the
// connection right after its CONNACK; it returns its address.
func closeAfterConnack(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				r := codec.NewReader(bufio.NewReader(c), 0)
				if _, err := r.ReadPacket(); err != nil {
					return
				}
				_, _ = c.Write((&codec.Connack{}).Append(nil, codec.V5))
			})
		}
	})
	return ln.Addr().String()
}

// TestQueueBeforeFirstLink: a bridge whose remote is unreachable from the
// start (a gateway that boots offline) already queues what goes out, and
// delivers it, in order, when the remote appears.
func TestQueueBeforeFirstLink(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := dead.Addr().String()
	_ = dead.Close()
	local := tcpBroker(t, core.Options{}, core.Config{})
	m := local.bridges(t, nil, fast(bridge.Config{Name: "up", Addresses: []string{"mqtt://" + addr},
		Topics: []bridge.Rule{{Topic: "q/#", QoS: 1}}}))
	mqtttest.WaitFor(t, "the local subscriptions", func() bool {
		ci, _ := local.srv.Client(bridge.UserPrefix + "up")
		return len(ci.Subscriptions) == 1
	})
	lpub := dialClient(t, local, "lpub", codec.V5)
	for i := range 5 {
		lpub.Pub("q/x", fmt.Sprint("m", i), 1, false)
	}
	if st, _ := m.Bridge("up"); st.Queued != 5 || st.State == bridge.StateConnected {
		t.Fatalf("%s with %d queued, want 5 queued before any link", st.State, st.Queued)
	}
	// The remote's subscriber first, its listener next: nothing the
	// bridge forwards finds no subscriber.
	remote := &broker{t: t, addr: addr, url: "mqtt://" + addr}
	if remote.srv, err = core.New(core.Options{SysInterval: -1}, core.Config{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remote.stop)
	rsub := pipeClient(t, remote, "rsub", codec.V5)
	rsub.Subscribe("q/#", 1)
	ln, err := listeners.Listen(listeners.Options{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = remote.srv.Serve(ln, "test") }()
	if got := payloads(rsub.Expect(5)); !slices.Equal(got, seq("m", 5)) {
		t.Errorf("got %q", got)
	}
}
