package bridge_test

// The test harness: in-process brokers (core.Server behind real
// listeners on loopback), bridge managers on them, and a small test
// client over the codec that acknowledges what it receives and copies it
// out of its reader's buffer.

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"xmq/bridge"
	"xmq/codec"
	"xmq/core"
	"xmq/internal/bridgelocal"
	"xmq/listeners"
)

// waitTimeout bounds every wait in these tests.
const waitTimeout = 5 * time.Second

// quiet is how long a test waits to be sure that nothing more arrives.
const quiet = 200 * time.Millisecond

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

// tclient is a test MQTT client. Its reader acknowledges every message
// (and completes QoS 2 flows) and hands copies on msgs.
type tclient struct {
	t    *testing.T
	conn net.Conn
	r    *codec.Reader
	v    byte

	closed atomic.Bool // by the test: the reader's last acknowledgements may fail
	wmu    sync.Mutex
	nextID uint16
	msgs   chan *codec.Publish
	acks   chan codec.Ack
	subs   chan *codec.Suback
	done   chan struct{}
}

// dialClient connects a client to b over TCP (or TLS for a tls broker).
func dialClient(t *testing.T, b *broker, id string, v byte, mods ...func(*codec.Connect)) *tclient {
	t.Helper()
	conn, err := listeners.Dial(context.Background(), b.url, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a test's own CA
	if err != nil {
		t.Fatal(err)
	}
	return connectClient(t, conn, id, v, mods...)
}

// pipeClient connects a client to b in-process, without its listener.
func pipeClient(t *testing.T, b *broker, id string, v byte, mods ...func(*codec.Connect)) *tclient {
	t.Helper()
	ours, theirs := net.Pipe()
	b.srv.ServeConn(theirs, "pipe")
	return connectClient(t, ours, id, v, mods...)
}

func connectClient(t *testing.T, conn net.Conn, id string, v byte, mods ...func(*codec.Connect)) *tclient {
	t.Helper()
	c := &tclient{t: t, conn: conn, v: v, msgs: make(chan *codec.Publish, 10000), acks: make(chan codec.Ack, 1000),
		subs: make(chan *codec.Suback, 10), done: make(chan struct{})}
	c.r = codec.NewReader(bufio.NewReader(conn), 0)
	c.r.Version = v
	cp := &codec.Connect{ProtocolVersion: v, CleanStart: true, ClientID: []byte(id)}
	for _, m := range mods {
		m(cp)
	}
	c.send(cp)
	_ = conn.SetReadDeadline(time.Now().Add(waitTimeout))
	p, err := c.r.ReadPacket()
	if err != nil {
		t.Fatalf("client %s: CONNACK: %v", id, err)
	}
	if ack, ok := p.(*codec.Connack); !ok || ack.ReasonCode != codec.Success {
		t.Fatalf("client %s: got %+v, want CONNACK Success", id, p)
	}
	_ = conn.SetReadDeadline(time.Time{})
	go c.readLoop()
	t.Cleanup(c.close)
	return c
}

// persistent keeps the client's session: Clean Start 0, an hour's expiry.
func persistent(cp *codec.Connect) {
	cp.CleanStart = false
	if cp.ProtocolVersion == codec.V5 {
		cp.Props.SetNum(codec.PropSessionExpiry, 3600)
	}
}

// rap asks for Retain As Published.
func rap(s *codec.Subscription) { s.RetainAsPublished = true }

func (c *tclient) close() {
	c.closed.Store(true)
	_ = c.conn.Close()
	<-c.done
}

func (c *tclient) send(p codec.Packet) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.conn.SetWriteDeadline(time.Now().Add(waitTimeout))
	if _, err := c.conn.Write(p.Append(nil, c.v)); err != nil && !c.closed.Load() {
		c.t.Errorf("write: %v", err)
	}
}

func (c *tclient) readLoop() {
	defer close(c.done)
	for {
		p, err := c.r.ReadPacket()
		if err != nil {
			return
		}
		switch p := p.(type) {
		case *codec.Publish:
			q := *p
			q.Topic = append([]byte(nil), p.Topic...)
			q.Payload = append([]byte(nil), p.Payload...)
			q.Props = codec.Properties{}
			copyProps(&q.Props, &p.Props)
			c.msgs <- &q
			switch p.QoS {
			case 1:
				c.send(&codec.Ack{Kind: codec.PUBACK, PacketID: p.PacketID})
			case 2:
				c.send(&codec.Ack{Kind: codec.PUBREC, PacketID: p.PacketID})
			}
		case *codec.Ack:
			switch p.Kind {
			case codec.PUBREL:
				c.send(&codec.Ack{Kind: codec.PUBCOMP, PacketID: p.PacketID})
			case codec.PUBREC:
				c.send(&codec.Ack{Kind: codec.PUBREL, PacketID: p.PacketID})
				c.acks <- codec.Ack{Kind: p.Kind, PacketID: p.PacketID, ReasonCode: p.ReasonCode}
			default:
				c.acks <- codec.Ack{Kind: p.Kind, PacketID: p.PacketID, ReasonCode: p.ReasonCode}
			}
		case *codec.Suback:
			s := *p
			s.ReasonCodes = append([]codec.ReasonCode(nil), p.ReasonCodes...)
			c.subs <- &s
		}
	}
}

// copyProps copies the forwarded properties of a PUBLISH.
func copyProps(dst, src *codec.Properties) {
	cp := func(b []byte) []byte { return append([]byte(nil), b...) }
	if src.Has(codec.PropPayloadFormat) {
		dst.SetNum(codec.PropPayloadFormat, uint32(src.PayloadFormat))
	}
	if src.Has(codec.PropMessageExpiry) {
		dst.SetNum(codec.PropMessageExpiry, src.MessageExpiry)
	}
	dst.ContentType, dst.ResponseTopic, dst.CorrelationData = cp(src.ContentType), cp(src.ResponseTopic), cp(src.CorrelationData)
	for _, u := range src.User {
		dst.User = append(dst.User, codec.UserProperty{Key: cp(u.Key), Value: cp(u.Value)})
	}
	dst.SubscriptionIDs = append([]uint32(nil), src.SubscriptionIDs...)
}

func (c *tclient) id() uint16 {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nextID++
	if c.nextID == 0 {
		c.nextID = 1
	}
	return c.nextID
}

// subscribe subscribes to filter at qos and waits for the grant; mods
// set the subscription's options.
func (c *tclient) subscribe(filter string, qos byte, mods ...func(*codec.Subscription)) {
	c.t.Helper()
	sub := codec.Subscription{Filter: []byte(filter), QoS: qos}
	for _, m := range mods {
		m(&sub)
	}
	c.send(&codec.Subscribe{PacketID: c.id(), Subscriptions: []codec.Subscription{sub}})
	select {
	case s := <-c.subs:
		if s.ReasonCodes[0] != codec.ReasonCode(qos) {
			c.t.Fatalf("SUBACK %s for %s", s.ReasonCodes[0], filter)
		}
	case <-time.After(waitTimeout):
		c.t.Fatalf("no SUBACK for %s", filter)
	}
}

// publish publishes p and waits for the end of its flow: PUBACK or
// PUBCOMP (a refusing PUBREC ends it too). It returns the reason code.
func (c *tclient) publish(p *codec.Publish) codec.ReasonCode {
	c.t.Helper()
	if p.QoS > 0 {
		p.PacketID = c.id()
	}
	c.send(p)
	if p.QoS == 0 {
		return codec.Success
	}
	for {
		select {
		case a := <-c.acks:
			if a.PacketID != p.PacketID {
				continue
			}
			if a.Kind == codec.PUBACK || a.Kind == codec.PUBCOMP || a.ReasonCode.IsError() {
				return a.ReasonCode
			}
		case <-time.After(waitTimeout):
			c.t.Fatalf("no acknowledgement for %q", p.Topic)
			return 0
		}
	}
}

// pub publishes payload on topic.
func (c *tclient) pub(topic, payload string, qos byte, retain bool) {
	c.t.Helper()
	c.publish(&codec.Publish{Topic: []byte(topic), Payload: []byte(payload), QoS: qos, Retain: retain})
}

// expect takes n messages.
func (c *tclient) expect(n int) []*codec.Publish {
	c.t.Helper()
	var out []*codec.Publish
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for len(out) < n {
		select {
		case p := <-c.msgs:
			out = append(out, p)
		case <-timer.C:
			c.t.Fatalf("got %d messages, want %d: %q", len(out), n, payloads(out))
		}
	}
	return out
}

// nothing checks that no message arrives for a while.
func (c *tclient) nothing() {
	c.t.Helper()
	select {
	case p := <-c.msgs:
		c.t.Fatalf("got %q on %q, want nothing", p.Payload, p.Topic)
	case <-time.After(quiet):
	}
}

func payloads(ps []*codec.Publish) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p.Payload)
	}
	return out
}
