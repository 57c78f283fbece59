package core_test

// This file is the test client: a net.Pipe connection served by
// Server.ServeConn, written to with the codec's encoders and read by one
// goroutine that frames the server's bytes into raw packets. Tests decode
// what they take, so a packet is checked at the exact protocol level the
// connection speaks.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// waitTimeout bounds every wait for the broker.
const waitTimeout = 3 * time.Second

// quiet is how long a test waits to be sure something does not happen.
const quiet = 150 * time.Millisecond

var errTimeout = errors.New("timed out waiting for a packet")

// newServer starts a Server for one test and shuts it down when the test
// ends. $SYS publishing is off unless opts asks for it.
func newServer(t *testing.T, opts core.Options, cfg core.Config) *core.Server {
	t.Helper()
	if opts.SysInterval == 0 {
		opts.SysInterval = -1
	}
	srv, err := core.New(opts, cfg)
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	t.Cleanup(func() { shutdown(t, srv) })
	return srv
}

// shutdown stops srv; a second Shutdown (the test already did it) is fine.
func shutdown(t *testing.T, srv *core.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, core.ErrServerClosed) {
		t.Errorf("Shutdown: %v", err)
	}
}

// tconn is one test client connection.
type tconn struct {
	t      *testing.T
	conn   net.Conn
	v      byte
	nextID uint16

	mu     sync.Mutex
	cond   *sync.Cond
	queue  [][]byte // raw packets received and not yet taken
	closed bool     // the reader has stopped: EOF or error
	err    error
	paused bool
	notify chan struct{} // cap 1: the queue or closed changed
	done   chan struct{} // closed when the reader goroutine exits
}

// dial connects a new client at protocol level v to srv over net.Pipe. It
// sends nothing; see connect.
func dial(t *testing.T, srv *core.Server, v byte) *tconn {
	t.Helper()
	return dialWrapped(t, srv, v, nil)
}

// dialWrapped is dial with the broker's side of the conn wrapped by wrap
// (nil: not wrapped), to give the broker a conn with other capabilities.
func dialWrapped(t *testing.T, srv *core.Server, v byte, wrap func(net.Conn) net.Conn) *tconn {
	t.Helper()
	cli, srvSide := pipe(t)
	if wrap != nil {
		srvSide = wrap(srvSide)
	}
	return serveConn(t, srv, v, cli, srvSide, "pipe")
}

// serveConn has srv serve srvSide and returns the test client on cli, the
// other end of srvSide.
func serveConn(t *testing.T, srv *core.Server, v byte, cli, srvSide net.Conn, listener string) *tconn {
	t.Helper()
	c := &tconn{t: t, conn: cli, v: v, notify: make(chan struct{}, 1), done: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	srv.ServeConn(srvSide, listener)
	go c.readLoop()
	t.Cleanup(c.close)
	return c
}

// overTCP makes dial connect over loopback TCP instead of net.Pipe, so the
// broker runs its socket paths: waiting for readability without a buffer
// and writing inline from a publisher's reader (TestSpecOverTCP).
var overTCP = os.Getenv("XMQ_CORE_TCP") != ""

// tcpClient connects a client over loopback TCP, whatever XMQ_CORE_TCP
// says: for what needs a real socket (parking, a socket's flow control).
func tcpClient(t *testing.T, srv *core.Server, v byte, id string, mods ...func(*codec.Connect)) *tconn {
	t.Helper()
	was := overTCP
	overTCP = true
	defer func() { overTCP = was }()
	return client(t, srv, v, id, mods...)
}

func pipe(t *testing.T) (cli, srv net.Conn) {
	if !overTCP {
		return net.Pipe()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cli, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if srv, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	// Small kernel buffers, so a paused client pushes back on the broker
	// after tens of kilobytes (net.Pipe: at once), not after megabytes.
	_ = cli.(*net.TCPConn).SetReadBuffer(32 << 10)
	_ = srv.(*net.TCPConn).SetWriteBuffer(32 << 10)
	return cli, srv
}

// close closes the client side (an abrupt disconnect, as far as the broker
// knows) and waits for the reader goroutine.
func (c *tconn) close() {
	_ = c.conn.Close()
	c.mu.Lock()
	c.paused = false
	c.cond.Broadcast()
	c.mu.Unlock()
	<-c.done
}

func (c *tconn) signal() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func (c *tconn) readLoop() {
	defer close(c.done)
	br := bufio.NewReader(c.conn)
	for {
		c.mu.Lock()
		for c.paused {
			c.cond.Wait()
		}
		c.mu.Unlock()
		raw, err := readFrame(br)
		c.mu.Lock()
		if err != nil {
			c.closed, c.err = true, err
			c.mu.Unlock()
			c.signal()
			return
		}
		c.queue = append(c.queue, raw)
		c.mu.Unlock()
		c.signal()
	}
}

// pause stops reading: the broker's writes to this client block, as they
// would for a client that never reads its socket.
func (c *tconn) pause() {
	c.mu.Lock()
	c.paused = true
	c.mu.Unlock()
}

func (c *tconn) resume() {
	c.mu.Lock()
	c.paused = false
	c.cond.Broadcast()
	c.mu.Unlock()
}

// readFrame reads one MQTT packet (fixed header, remaining length, body).
func readFrame(br *bufio.Reader) ([]byte, error) {
	first, err := br.ReadByte()
	if err != nil {
		return nil, err
	}
	hdr := []byte{first}
	n, mul := 0, 1
	for i := 0; ; i++ {
		b, err := br.ReadByte()
		if err != nil {
			return nil, io.ErrUnexpectedEOF
		}
		hdr = append(hdr, b)
		n += int(b&0x7f) * mul
		mul *= 128
		if b&0x80 == 0 {
			break
		}
		if i == 3 {
			return nil, errors.New("remaining length longer than four bytes")
		}
	}
	raw := make([]byte, len(hdr)+n)
	copy(raw, hdr)
	if _, err := io.ReadFull(br, raw[len(hdr):]); err != nil {
		return nil, io.ErrUnexpectedEOF
	}
	return raw, nil
}

// nextRaw returns the next packet the broker sent, errTimeout after d, or
// the reader's error (io.EOF …) once the connection is closed and drained.
func (c *tconn) nextRaw(d time.Duration) ([]byte, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		c.mu.Lock()
		if len(c.queue) > 0 {
			raw := c.queue[0]
			c.queue = c.queue[1:]
			c.mu.Unlock()
			return raw, nil
		}
		if c.closed {
			err := c.err
			c.mu.Unlock()
			return nil, fmt.Errorf("connection closed: %w", err)
		}
		c.mu.Unlock()
		select {
		case <-c.notify:
		case <-timer.C:
			return nil, errTimeout
		}
	}
}

// write sends raw bytes; net.Pipe blocks until the broker reads them.
func (c *tconn) write(b []byte) error {
	_ = c.conn.SetWriteDeadline(time.Now().Add(waitTimeout))
	_, err := c.conn.Write(b)
	return err
}

func (c *tconn) sendRaw(b []byte) {
	c.t.Helper()
	if err := c.write(b); err != nil {
		c.t.Fatalf("writing %d bytes: %v", len(b), err)
	}
}

func (c *tconn) send(p codec.Packet) {
	c.t.Helper()
	c.sendRaw(p.Append(nil, c.v))
}

func (c *tconn) id() uint16 {
	c.nextID++
	if c.nextID == 0 {
		c.nextID = 1
	}
	return c.nextID
}

// next returns the next packet decoded at the connection's protocol level.
func (c *tconn) next() codec.Packet {
	c.t.Helper()
	raw, err := c.nextRaw(waitTimeout)
	if err != nil {
		c.t.Fatalf("want a packet: %v", err)
	}
	p, n, err := codec.Decode(raw, c.v)
	if err != nil || n != len(raw) {
		c.t.Fatalf("decoding % x: %v (%d of %d bytes)", raw, err, n, len(raw))
	}
	return p
}

// expect returns the next packet, which must be a T.
func expect[T codec.Packet](c *tconn) T {
	c.t.Helper()
	p := c.next()
	q, ok := p.(T)
	if !ok {
		var want T
		c.t.Fatalf("got %s %+v, want %T", p.Type(), p, want)
	}
	return q
}

func (c *tconn) expectPublish() *codec.Publish {
	c.t.Helper()
	return expect[*codec.Publish](c)
}

// expectAck takes the next packet, which must be an ack of kind for id.
func (c *tconn) expectAck(kind codec.Type, id uint16) *codec.Ack {
	c.t.Helper()
	a := expect[*codec.Ack](c)
	if a.Kind != kind || a.PacketID != id {
		c.t.Fatalf("got %s id %d (%s), want %s id %d", a.Kind, a.PacketID, a.ReasonCode, kind, id)
	}
	return a
}

// expectDisconnect takes a DISCONNECT with reason rc and then the close.
func (c *tconn) expectDisconnect(rc codec.ReasonCode) {
	c.t.Helper()
	d := expect[*codec.Disconnect](c)
	if d.ReasonCode != rc {
		c.t.Fatalf("DISCONNECT reason %s, want %s", d.ReasonCode, rc)
	}
	c.expectClosed()
}

// expectClosed waits for the broker to close the connection without
// sending anything more.
func (c *tconn) expectClosed() {
	c.t.Helper()
	raw, err := c.nextRaw(waitTimeout)
	switch {
	case errors.Is(err, errTimeout):
		c.t.Fatalf("connection still open after %v", waitTimeout)
	case err == nil:
		p, _, _ := codec.Decode(raw, c.v)
		c.t.Fatalf("got packet % x (%v), want the connection closed", raw, p)
	}
}

// drainUntilClosed returns the packets the broker sends before closing.
func (c *tconn) drainUntilClosed() [][]byte {
	c.t.Helper()
	var out [][]byte
	for {
		raw, err := c.nextRaw(waitTimeout)
		if errors.Is(err, errTimeout) {
			c.t.Fatalf("connection still open after %v", waitTimeout)
		}
		if err != nil {
			return out
		}
		out = append(out, raw)
	}
}

// expectNothing asserts the broker sends nothing for d and stays connected.
func (c *tconn) expectNothing(d time.Duration) {
	c.t.Helper()
	raw, err := c.nextRaw(d)
	switch {
	case err == nil:
		p, _, _ := codec.Decode(raw, c.v)
		c.t.Fatalf("got packet % x (%+v), want nothing", raw, p)
	case !errors.Is(err, errTimeout):
		c.t.Fatalf("want the connection open: %v", err)
	}
}

// connectPacket is a clean-start CONNECT with keepalive off.
func connectPacket(v byte, id string) *codec.Connect {
	return &codec.Connect{ProtocolVersion: v, CleanStart: true, ClientID: []byte(id)}
}

// connect sends p and returns the CONNACK, which must accept.
func (c *tconn) connect(p *codec.Connect) *codec.Connack {
	c.t.Helper()
	ack := c.connectRC(p)
	if ack.ReasonCode != codec.Success {
		c.t.Fatalf("CONNACK %s, want Success", ack.ReasonCode)
	}
	return ack
}

// connectRC sends p and returns the CONNACK, whatever its code.
func (c *tconn) connectRC(p *codec.Connect) *codec.Connack {
	c.t.Helper()
	c.send(p)
	return expect[*codec.Connack](c)
}

// client dials and connects a clean client; mods adjust the CONNECT.
func client(t *testing.T, srv *core.Server, v byte, id string, mods ...func(*codec.Connect)) *tconn {
	t.Helper()
	p := connectPacket(v, id)
	for _, m := range mods {
		m(p)
	}
	c := dial(t, srv, v)
	c.connect(p)
	return c
}

// persistent makes a CONNECT resume or keep its session: Clean Session 0
// in 3.1.1, Clean Start 0 and a Session Expiry of a minute in 5.0.
func persistent(p *codec.Connect) {
	p.CleanStart = false
	if p.ProtocolVersion == codec.V5 {
		p.Props.SetNum(codec.PropSessionExpiry, 60)
	}
}

// sub is one subscription at qos with default options.
func sub(filter string, qos byte) codec.Subscription {
	return codec.Subscription{Filter: []byte(filter), QoS: qos}
}

// subscribePacket sends s (its packet id filled in) and returns the SUBACK.
func (c *tconn) subscribePacket(s *codec.Subscribe) *codec.Suback {
	c.t.Helper()
	s.PacketID = c.id()
	c.send(s)
	// The server may send PUBLISH packets matching the subscription before
	// its SUBACK (3.8.4 in 3.1.1 and 5.0): one published concurrently (a
	// $SYS round) can come first. Those are kept for next, in order.
	var early [][]byte
	var ack *codec.Suback
	for ack == nil {
		raw, err := c.nextRaw(waitTimeout)
		if err != nil {
			c.t.Fatalf("want SUBACK: %v", err)
		}
		p, _, err := codec.Decode(raw, c.v)
		if err != nil {
			c.t.Fatalf("decoding % x: %v", raw, err)
		}
		switch p := p.(type) {
		case *codec.Suback:
			ack = p
		case *codec.Publish:
			early = append(early, raw)
		default:
			c.t.Fatalf("got %s %+v, want SUBACK", p.Type(), p)
		}
	}
	if len(early) > 0 {
		c.mu.Lock()
		c.queue = append(early, c.queue...)
		c.mu.Unlock()
	}
	if ack.PacketID != s.PacketID || len(ack.ReasonCodes) != len(s.Subscriptions) {
		c.t.Fatalf("SUBACK id %d with %d codes, want id %d with %d", ack.PacketID, len(ack.ReasonCodes),
			s.PacketID, len(s.Subscriptions))
	}
	return ack
}

// subscribe subscribes to each filter at qos and requires every grant.
func (c *tconn) subscribe(qos byte, filters ...string) {
	c.t.Helper()
	s := &codec.Subscribe{}
	for _, f := range filters {
		s.Subscriptions = append(s.Subscriptions, sub(f, qos))
	}
	ack := c.subscribePacket(s)
	for i, rc := range ack.ReasonCodes {
		if rc != codec.ReasonCode(qos) {
			c.t.Fatalf("SUBACK code %s for %q, want QoS %d granted", rc, filters[i], qos)
		}
	}
}

// publish sends p (packet id filled in for QoS 1/2) and completes its flow:
// PUBACK, or PUBREC → PUBREL → PUBCOMP. It returns the PUBACK or PUBREC
// reason code. The client must have no subscription that matches p, since
// deliveries would arrive among the acks.
func (c *tconn) publish(p *codec.Publish) codec.ReasonCode {
	c.t.Helper()
	if p.QoS > 0 && p.PacketID == 0 {
		p.PacketID = c.id()
	}
	c.send(p)
	switch p.QoS {
	case 1:
		return c.expectAck(codec.PUBACK, p.PacketID).ReasonCode
	case 2:
		rc := c.expectAck(codec.PUBREC, p.PacketID).ReasonCode
		if rc.IsError() {
			return rc
		}
		c.send(&codec.Ack{Kind: codec.PUBREL, PacketID: p.PacketID})
		c.expectAck(codec.PUBCOMP, p.PacketID)
		return rc
	}
	return codec.Success
}

// pub publishes payload to topic at qos.
func (c *tconn) pub(topic, payload string, qos byte) {
	c.t.Helper()
	c.publish(&codec.Publish{Topic: []byte(topic), Payload: []byte(payload), QoS: qos})
}

// pubRetained publishes a retained message.
func (c *tconn) pubRetained(topic, payload string, qos byte) {
	c.t.Helper()
	c.publish(&codec.Publish{Topic: []byte(topic), Payload: []byte(payload), QoS: qos, Retain: true})
}

// ack acknowledges a received PUBLISH: PUBACK for QoS 1, PUBREC for QoS 2
// (the PUBREL that follows is answered by recv, or by the test).
func (c *tconn) ack(p *codec.Publish) {
	c.t.Helper()
	switch p.QoS {
	case 1:
		c.send(&codec.Ack{Kind: codec.PUBACK, PacketID: p.PacketID})
	case 2:
		c.send(&codec.Ack{Kind: codec.PUBREC, PacketID: p.PacketID})
	}
}

// recv takes n PUBLISH packets, acknowledging each and completing QoS 2
// flows, and fails on any other packet.
func (c *tconn) recv(n int) []*codec.Publish {
	c.t.Helper()
	var out []*codec.Publish
	pending := map[uint16]bool{}
	for len(out) < n || len(pending) > 0 {
		switch p := c.next().(type) {
		case *codec.Publish:
			if len(out) == n {
				c.t.Fatalf("got an extra PUBLISH %q %q, want %d", p.Topic, p.Payload, n)
			}
			out = append(out, p)
			c.ack(p)
			if p.QoS == 2 {
				pending[p.PacketID] = true
			}
		case *codec.Ack:
			if p.Kind != codec.PUBREL || !pending[p.PacketID] {
				c.t.Fatalf("got %s id %d, want PUBLISH or PUBREL", p.Kind, p.PacketID)
			}
			delete(pending, p.PacketID)
			c.send(&codec.Ack{Kind: codec.PUBCOMP, PacketID: p.PacketID})
		default:
			c.t.Fatalf("got %s, want PUBLISH", p.Type())
		}
	}
	return out
}

// payloads lists the payloads of ps as strings.
func payloads(ps []*codec.Publish) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p.Payload)
	}
	return out
}

// wantPayloads checks the payloads of ps, in order.
func wantPayloads(t *testing.T, ps []*codec.Publish, want ...string) {
	t.Helper()
	if got := payloads(ps); !slices.Equal(got, want) {
		t.Fatalf("payloads %q, want %q", got, want)
	}
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

// seq makes n payloads "prefix0" … "prefix{n-1}".
func seq(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i)
	}
	return out
}
