package bridge_test

// The test harness: in-process brokers (core.Server behind real
// listeners on loopback), bridge managers on them, and test clients
// (internal/mqtttest).

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/bridge"
	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/bridgelocal"
	"github.com/xmq-io/xmq/internal/mqtttest"
	"github.com/xmq-io/xmq/listeners"
)

// waitTimeout bounds every wait in these tests.
const waitTimeout = 5 * time.Second

// broker is an in-process xmq with one listener on loopback.
type broker struct {
	t    *testing.T
	srv  *core.Server
	ln   listeners.Listener
	addr string // host:port
	url  string // the address a bridge dials
}

// newBroker starts a broker whose listener is described by lo (transport
// and TLS; the address defaults to a free loopback port).
func newBroker(t *testing.T, opts core.Options, cfg core.Config, lo listeners.Options) *broker {
	t.Helper()
	opts.SysInterval = -1
	srv, err := core.New(opts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if lo.Address == "" {
		lo.Address = "127.0.0.1:0"
	}
	ln, err := listeners.Listen(lo)
	if err != nil {
		t.Fatal(err)
	}
	b := &broker{t: t, srv: srv, ln: ln, addr: ln.Addr().String()}
	scheme := map[string]string{"": "mqtt", "tcp": "mqtt", "tls": "mqtts", "ws": "ws", "wss": "wss", "quic": "quic"}[lo.Transport]
	b.url = scheme + "://" + b.addr
	go func() { _ = srv.Serve(ln, "test") }()
	t.Cleanup(b.stop)
	return b
}

// tcpBroker is newBroker with a plain TCP listener.
func tcpBroker(t *testing.T, opts core.Options, cfg core.Config) *broker {
	t.Helper()
	return newBroker(t, opts, cfg, listeners.Options{})
}

// stop shuts the broker down (again: a no-op).
func (b *broker) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.srv.Shutdown(ctx); err != nil && !errors.Is(err, core.ErrServerClosed) {
		b.t.Errorf("Shutdown: %v", err)
	}
}

// bridges runs a bridge manager on b with cfgs; it is closed before the
// broker shuts down.
func (b *broker) bridges(t *testing.T, log *zap.Logger, cfgs ...bridge.Config) *bridge.Manager {
	t.Helper()
	if log == nil {
		log = zap.NewNop()
	}
	m := bridge.NewManager(bridge.Options{Local: bridgelocal.Local{Server: b.srv}, Log: log})
	t.Cleanup(m.Close)
	if _, err := m.Apply(cfgs); err != nil {
		t.Fatal(err)
	}
	return m
}

// fast makes a bridge retry quickly, as tests need.
func fast(c bridge.Config) bridge.Config {
	c.BackoffMin, c.BackoffMax = 20*time.Millisecond, 100*time.Millisecond
	c.ConnectTimeout = 2 * time.Second
	return c
}

// waitState waits until the bridge is in state s.
func waitState(t *testing.T, m *bridge.Manager, name string, s bridge.State) bridge.Status {
	t.Helper()
	var st bridge.Status
	waitFor(t, "bridge "+name+" "+string(s), func() bool {
		st, _ = m.Bridge(name)
		return st.State == s
	})
	return st
}

// waitFor polls cond until it holds or waitTimeout passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// dialClient connects a test client to b through its listener.
func dialClient(t *testing.T, b *broker, id string, v byte, mods ...func(*codec.Connect)) *mqtttest.Client {
	t.Helper()
	return mqtttest.Dial(t, b.url, id, v, mods...)
}

// pipeClient connects a test client to b in-process, without its listener.
func pipeClient(t *testing.T, b *broker, id string, v byte, mods ...func(*codec.Connect)) *mqtttest.Client {
	t.Helper()
	ours, theirs := net.Pipe()
	b.srv.ServeConn(theirs, "pipe")
	return mqtttest.Connect(t, ours, id, v, mods...)
}

var (
	persistent = mqtttest.Persistent
	rap        = mqtttest.RAP
	payloads   = mqtttest.Payloads
)
