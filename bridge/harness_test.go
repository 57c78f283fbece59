package bridge_test

// The test harness: in-process brokers (core.Server behind real
// listeners on loopback), bridge managers on them, and test clients
// (internal/mqtttest).

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
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
	mqtttest.Serve(t, srv, ln, "test", core.ErrServerClosed)
	return b
}

// tcpBroker is newBroker with a plain TCP listener.
func tcpBroker(t *testing.T, opts core.Options, cfg core.Config) *broker {
	t.Helper()
	return newBroker(t, opts, cfg, listeners.Options{})
}

// stop shuts the broker down (again: a no-op), as a crash of the remote
// would; newBroker's cleanup does it when the test ends.
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
	mqtttest.WaitFor(t, "bridge "+name+" "+string(s), func() bool {
		st, _ = m.Bridge(name)
		return st.State == s
	})
	return st
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

// faultProxy stands between a bridge and its remote broker as a faulty
// remote or network would: it passes the packets both ways, except those
// from the remote that drop holds back, records what the bridge sends, and
// cuts the bridge's connections on demand.
type faultProxy struct {
	url      string // what the bridge dials
	upstream string // the remote's host:port
	// drop holds back a packet from the remote on the conn-th connection
	// (1: the first); nil: none.
	drop    func(conn int, p codec.Packet) bool
	dropped atomic.Int32 // packets drop held back
	ln      net.Listener
	wg      sync.WaitGroup

	mu    sync.Mutex
	conns []*net.TCPConn   // the bridge's connections, in order
	sent  [][]sentByBridge // what the bridge sent on each
}

// sentByBridge is a packet the bridge sent: a PUBLISH or an acknowledgement.
type sentByBridge struct {
	kind    codec.Type
	id      uint16
	dup     bool
	payload string
}

// newFaultProxy starts a proxy to the broker b on loopback that holds
// back what drop says.
func newFaultProxy(t *testing.T, b *broker, drop func(conn int, p codec.Packet) bool) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{url: "mqtt://" + ln.Addr().String(), upstream: b.addr, drop: drop, ln: ln}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, c.(*net.TCPConn))
			p.sent = append(p.sent, nil)
			n := len(p.conns)
			p.mu.Unlock()
			p.wg.Go(func() { p.serve(n, c) })
		}
	})
	t.Cleanup(func() { p.stop(); p.wg.Wait() })
	return p
}

// serve relays the n-th connection, parsed into packets.
func (p *faultProxy) serve(n int, c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	defer up.Close()
	fromBridge := codec.NewReader(bufio.NewReader(c), 0)
	pk, err := fromBridge.ReadPacket()
	cp, ok := pk.(*codec.Connect)
	if err != nil || !ok {
		return
	}
	v := cp.ProtocolVersion
	fromBridge.Version = v
	if _, err := up.Write(cp.Append(nil, v)); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer c.Close()
		fromRemote := codec.NewReader(bufio.NewReader(up), 0)
		fromRemote.Version = v
		for {
			pk, err := fromRemote.ReadPacket()
			if err != nil {
				return
			}
			if p.drop != nil && p.drop(n, pk) {
				p.dropped.Add(1)
				continue
			}
			if _, err := c.Write(pk.Append(nil, v)); err != nil {
				return
			}
		}
	}()
	for {
		pk, err := fromBridge.ReadPacket()
		if err != nil {
			break
		}
		p.record(n, pk)
		if _, err := up.Write(pk.Append(nil, v)); err != nil {
			break
		}
	}
	_ = up.Close()
	<-done
}

func (p *faultProxy) record(n int, pk codec.Packet) {
	var s sentByBridge
	switch pk := pk.(type) {
	case *codec.Publish:
		s = sentByBridge{kind: codec.PUBLISH, id: pk.PacketID, dup: pk.Dup, payload: string(pk.Payload)}
	case *codec.Ack:
		s = sentByBridge{kind: pk.Kind, id: pk.PacketID}
	default:
		return
	}
	p.mu.Lock()
	p.sent[n-1] = append(p.sent[n-1], s)
	p.mu.Unlock()
}

// sentOn returns what the bridge sent on its n-th connection.
func (p *faultProxy) sentOn(n int) []sentByBridge {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n > len(p.sent) {
		return nil
	}
	return append([]sentByBridge(nil), p.sent[n-1]...)
}

// reset breaks the bridge's latest connection with a TCP reset, as a
// remote that crashed or a middlebox that dropped the connection does;
// the next connection is relayed as usual.
func (p *faultProxy) reset() {
	p.mu.Lock()
	c := p.conns[len(p.conns)-1]
	p.mu.Unlock()
	_ = c.SetLinger(0)
	_ = c.Close()
}

// stop is the remote going away: it closes its listening socket and then
// every connection, orderly (FIN).
func (p *faultProxy) stop() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}
