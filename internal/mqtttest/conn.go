package mqtttest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/listeners"
)

// ErrTimeout is NextRaw's error when no packet came in time.
var ErrTimeout = errors.New("mqtttest: timed out waiting for a packet")

// Conn is one MQTT connection spoken packet by packet: the test writes
// with the codec's encoders (or raw bytes) and takes, one at a time, the
// packets the server sent, which a reader goroutine frames into a queue.
// Nothing is acknowledged unless the test does it (Ack, Recv, Publish), so
// a test sees every packet at the exact protocol level V. Unlike Client it
// sends nothing by itself, not even CONNECT: see Connect.
//
// The reader keeps draining the conn while the test writes, so a net.Pipe
// server never blocks on a client that is busy writing; Pause stops it, to
// play a client that never reads its socket. Methods are for one goroutine
// (the test's: they fail it with T), except that TrySend and Write, one
// Write per packet, may run beside them as net.Conn's Write may, and
// NextWithin may read in a goroutine of its own while the test writes. T
// may be swapped for a subtest's before it starts.
type Conn struct {
	T       testing.TB
	NetConn net.Conn
	V       byte          // the protocol level packets are encoded and decoded at
	Timeout time.Duration // bounds each wait: Next, writes, Connect, Subscribe, Publish…

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

// NewConn starts reading conn, whose other end is an MQTT server (one end
// of net.Pipe a server serves, a dialled socket), at protocol level v. It
// sends nothing. The conn is closed when the test ends.
func NewConn(t testing.TB, conn net.Conn, v byte) *Conn {
	c := &Conn{T: t, NetConn: conn, V: v, Timeout: Timeout, notify: make(chan struct{}, 1), done: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	go c.readLoop()
	t.Cleanup(c.Close)
	return c
}

// DialConn connects to url (listeners.Dial, any transport; conf nil: a TLS
// server's certificate is not checked) and returns the Conn, unconnected.
func DialConn(t testing.TB, url string, conf *tls.Config, v byte) *Conn {
	t.Helper()
	conn, err := dial(url, conf)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	return NewConn(t, conn, v)
}

// dial is listeners.Dial within Timeout; conf nil trusts any certificate.
func dial(url string, conf *tls.Config) (net.Conn, error) {
	if conf == nil {
		conf = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // test servers' own CAs
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	return listeners.Dial(ctx, url, conf)
}

// TryDial is DialConn and ConnectRC for a server that may be down,
// crashing or restarting: a dial, write or read error, or a CONNACK that
// refuses, is returned instead of failing the test. url and conf are as
// DialConn's.
func TryDial(t testing.TB, url string, conf *tls.Config, p *codec.Connect) (*Conn, *codec.Connack, error) {
	t.Helper()
	conn, err := dial(url, conf)
	if err != nil {
		return nil, nil, err
	}
	c := NewConn(t, conn, p.ProtocolVersion)
	if err := c.TrySend(p); err != nil {
		c.Close()
		return nil, nil, err
	}
	pk, _, err := c.NextWithin(c.Timeout)
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("CONNECT %s: %w", p.ClientID, err)
	}
	ack, ok := pk.(*codec.Connack)
	if !ok || ack.ReasonCode != codec.Success {
		c.Close()
		return nil, ack, fmt.Errorf("CONNECT %s: got %s %+v, want CONNACK Success", p.ClientID, pk.Type(), pk)
	}
	return c, ack, nil
}

// Close closes the conn (an abrupt disconnect, as far as the server
// knows) and waits for the reader goroutine.
func (c *Conn) Close() {
	_ = c.NetConn.Close()
	c.mu.Lock()
	c.paused = false
	c.cond.Broadcast()
	c.mu.Unlock()
	<-c.done
}

func (c *Conn) signal() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

func (c *Conn) readLoop() {
	defer close(c.done)
	br := bufio.NewReader(c.NetConn)
	for {
		c.mu.Lock()
		for c.paused {
			c.cond.Wait()
		}
		c.mu.Unlock()
		raw, err := ReadFrame(br)
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

// Pause stops reading: the server's writes to this client block, as they
// would for a client that never reads its socket.
func (c *Conn) Pause() {
	c.mu.Lock()
	c.paused = true
	c.mu.Unlock()
}

// Resume reads again after Pause.
func (c *Conn) Resume() {
	c.mu.Lock()
	c.paused = false
	c.cond.Broadcast()
	c.mu.Unlock()
}

// ReadFrame reads one MQTT packet (fixed header, remaining length, body)
// without decoding it.
func ReadFrame(br *bufio.Reader) ([]byte, error) {
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

// NextRaw returns the next packet the server sent, ErrTimeout after d, or
// the reader's error (io.EOF …) once the connection is closed and drained.
func (c *Conn) NextRaw(d time.Duration) ([]byte, error) {
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
			return nil, ErrTimeout
		}
	}
}

// Unread puts raw packets back at the head of the queue, in order, for the
// next NextRaw or Next.
func (c *Conn) Unread(raws ...[]byte) {
	if len(raws) == 0 {
		return
	}
	c.mu.Lock()
	c.queue = append(slices.Clone(raws), c.queue...)
	c.mu.Unlock()
	c.signal()
}

// Write sends raw bytes; over net.Pipe it blocks until the server reads
// them, at most Timeout.
func (c *Conn) Write(b []byte) error {
	_ = c.NetConn.SetWriteDeadline(time.Now().Add(c.Timeout))
	_, err := c.NetConn.Write(b)
	return err
}

// TrySend writes one packet and returns the error, for a server that may
// be gone.
func (c *Conn) TrySend(p codec.Packet) error {
	return c.Write(p.Append(nil, c.V))
}

// SendRaw writes raw bytes and fails the test if it cannot.
func (c *Conn) SendRaw(b []byte) {
	c.T.Helper()
	if err := c.Write(b); err != nil {
		c.T.Fatalf("writing %d bytes: %v", len(b), err)
	}
}

// Send writes one packet encoded at the conn's protocol level.
func (c *Conn) Send(p codec.Packet) {
	c.T.Helper()
	c.SendRaw(p.Append(nil, c.V))
}

// NextID returns the next packet identifier (1, 2, … skipping 0).
func (c *Conn) NextID() uint16 {
	c.nextID++
	if c.nextID == 0 {
		c.nextID = 1
	}
	return c.nextID
}

// Next returns the next packet decoded at the conn's protocol level; it
// fails the test after Timeout or when the server closed the connection.
func (c *Conn) Next() codec.Packet {
	c.T.Helper()
	p, _, err := c.NextWithin(c.Timeout)
	if err != nil {
		c.T.Fatalf("want a packet: %v", err)
	}
	return p
}

// NextWithin returns the next packet, decoded (the test fails if it does
// not decode whole), and its bytes; ErrTimeout after d, or the reader's
// error once the connection is closed and drained.
func (c *Conn) NextWithin(d time.Duration) (codec.Packet, []byte, error) {
	c.T.Helper()
	raw, err := c.NextRaw(d)
	if err != nil {
		return nil, nil, err
	}
	p, n, err := codec.Decode(raw, c.V)
	if err != nil || n != len(raw) {
		c.T.Fatalf("decoding % x: %v (%d of %d bytes)", raw, err, n, len(raw))
	}
	return p, raw, nil
}

// Expect returns the next packet, which must be a T.
func Expect[T codec.Packet](c *Conn) T {
	c.T.Helper()
	p := c.Next()
	q, ok := p.(T)
	if !ok {
		var want T
		c.T.Fatalf("got %s %+v, want %T", p.Type(), p, want)
	}
	return q
}

// ExpectPublish takes the next packet, which must be a PUBLISH.
func (c *Conn) ExpectPublish() *codec.Publish {
	c.T.Helper()
	return Expect[*codec.Publish](c)
}

// ExpectAck takes the next packet, which must be an ack of kind for id.
func (c *Conn) ExpectAck(kind codec.Type, id uint16) *codec.Ack {
	c.T.Helper()
	a := Expect[*codec.Ack](c)
	if a.Kind != kind || a.PacketID != id {
		c.T.Fatalf("got %s id %d (%s), want %s id %d", a.Kind, a.PacketID, a.ReasonCode, kind, id)
	}
	return a
}

// ExpectDisconnect takes a DISCONNECT with reason rc and then the close.
func (c *Conn) ExpectDisconnect(rc codec.ReasonCode) {
	c.T.Helper()
	d := Expect[*codec.Disconnect](c)
	if d.ReasonCode != rc {
		c.T.Fatalf("DISCONNECT reason %s, want %s", d.ReasonCode, rc)
	}
	c.ExpectClosed()
}

// ExpectClosed waits for the server to close the connection without
// sending anything more.
func (c *Conn) ExpectClosed() {
	c.T.Helper()
	raw, err := c.NextRaw(c.Timeout)
	switch {
	case errors.Is(err, ErrTimeout):
		c.T.Fatalf("connection still open after %v", c.Timeout)
	case err == nil:
		p, _, _ := codec.Decode(raw, c.V)
		c.T.Fatalf("got packet % x (%v), want the connection closed", raw, p)
	}
}

// DrainUntilClosed returns the packets the server sends before closing.
func (c *Conn) DrainUntilClosed() [][]byte {
	c.T.Helper()
	var out [][]byte
	for {
		raw, err := c.NextRaw(c.Timeout)
		if errors.Is(err, ErrTimeout) {
			c.T.Fatalf("connection still open after %v", c.Timeout)
		}
		if err != nil {
			return out
		}
		out = append(out, raw)
	}
}

// ExpectNothing asserts the server sends nothing for d and stays connected.
func (c *Conn) ExpectNothing(d time.Duration) {
	c.T.Helper()
	raw, err := c.NextRaw(d)
	switch {
	case err == nil:
		p, _, _ := codec.Decode(raw, c.V)
		c.T.Fatalf("got packet % x (%+v), want nothing", raw, p)
	case !errors.Is(err, ErrTimeout):
		c.T.Fatalf("want the connection open: %v", err)
	}
}

// ConnectPacket is a clean-start CONNECT for id at level v with keepalive
// off; mods adjust it.
func ConnectPacket(v byte, id string, mods ...func(*codec.Connect)) *codec.Connect {
	p := &codec.Connect{ProtocolVersion: v, CleanStart: true, ClientID: []byte(id)}
	for _, m := range mods {
		m(p)
	}
	return p
}

// Connect sends p and returns the CONNACK, which must accept.
func (c *Conn) Connect(p *codec.Connect) *codec.Connack {
	c.T.Helper()
	ack := c.ConnectRC(p)
	if ack.ReasonCode != codec.Success {
		c.T.Fatalf("CONNACK %s, want Success", ack.ReasonCode)
	}
	return ack
}

// ConnectRC sends p and returns the CONNACK, whatever its code.
func (c *Conn) ConnectRC(p *codec.Connect) *codec.Connack {
	c.T.Helper()
	c.Send(p)
	return Expect[*codec.Connack](c)
}

// Sub is one subscription at qos with default options.
func Sub(filter string, qos byte) codec.Subscription {
	return codec.Subscription{Filter: []byte(filter), QoS: qos}
}

// SubscribePacket sends s (its packet id filled in) and returns the
// SUBACK, which must answer s with one code per subscription.
func (c *Conn) SubscribePacket(s *codec.Subscribe) *codec.Suback {
	c.T.Helper()
	s.PacketID = c.NextID()
	c.Send(s)
	// The server may send PUBLISH packets matching the subscription before
	// its SUBACK (3.8.4 in 3.1.1 and 5.0): one published concurrently (a
	// $SYS round) can come first. Those are kept for Next, in order.
	var early [][]byte
	var ack *codec.Suback
	for ack == nil {
		p, raw, err := c.NextWithin(c.Timeout)
		if err != nil {
			c.T.Fatalf("want SUBACK: %v", err)
		}
		switch p := p.(type) {
		case *codec.Suback:
			ack = p
		case *codec.Publish:
			early = append(early, raw)
		default:
			c.T.Fatalf("got %s %+v, want SUBACK", p.Type(), p)
		}
	}
	c.Unread(early...)
	if ack.PacketID != s.PacketID || len(ack.ReasonCodes) != len(s.Subscriptions) {
		c.T.Fatalf("SUBACK id %d with %d codes, want id %d with %d", ack.PacketID, len(ack.ReasonCodes),
			s.PacketID, len(s.Subscriptions))
	}
	return ack
}

// Subscribe subscribes to each filter at qos and requires every grant.
func (c *Conn) Subscribe(qos byte, filters ...string) {
	c.T.Helper()
	s := &codec.Subscribe{}
	for _, f := range filters {
		s.Subscriptions = append(s.Subscriptions, Sub(f, qos))
	}
	ack := c.SubscribePacket(s)
	for i, rc := range ack.ReasonCodes {
		if rc != codec.ReasonCode(qos) {
			c.T.Fatalf("SUBACK code %s for %q, want QoS %d granted", rc, filters[i], qos)
		}
	}
}

// Publish sends p (packet id filled in for QoS 1/2 unless set) and
// completes its flow: PUBACK, or PUBREC → PUBREL → PUBCOMP. It returns the
// PUBACK or PUBREC reason code. The conn must have no subscription that
// matches p, since deliveries would arrive among the acks.
func (c *Conn) Publish(p *codec.Publish) codec.ReasonCode {
	c.T.Helper()
	if p.QoS > 0 && p.PacketID == 0 {
		p.PacketID = c.NextID()
	}
	c.Send(p)
	switch p.QoS {
	case 1:
		return c.ExpectAck(codec.PUBACK, p.PacketID).ReasonCode
	case 2:
		rc := c.ExpectAck(codec.PUBREC, p.PacketID).ReasonCode
		if rc.IsError() {
			return rc
		}
		c.Send(&codec.Ack{Kind: codec.PUBREL, PacketID: p.PacketID})
		c.ExpectAck(codec.PUBCOMP, p.PacketID)
		return rc
	}
	return codec.Success
}

// Pub publishes payload to topic at qos.
func (c *Conn) Pub(topic, payload string, qos byte) {
	c.T.Helper()
	c.Publish(&codec.Publish{Topic: []byte(topic), Payload: []byte(payload), QoS: qos})
}

// PubRetained publishes a retained message.
func (c *Conn) PubRetained(topic, payload string, qos byte) {
	c.T.Helper()
	c.Publish(&codec.Publish{Topic: []byte(topic), Payload: []byte(payload), QoS: qos, Retain: true})
}

// Ack acknowledges a received PUBLISH: PUBACK for QoS 1, PUBREC for QoS 2
// (the PUBREL that follows is answered by Recv, or by the test).
func (c *Conn) Ack(p *codec.Publish) {
	c.T.Helper()
	switch p.QoS {
	case 1:
		c.Send(&codec.Ack{Kind: codec.PUBACK, PacketID: p.PacketID})
	case 2:
		c.Send(&codec.Ack{Kind: codec.PUBREC, PacketID: p.PacketID})
	}
}

// Recv takes n PUBLISH packets, acknowledging each and completing QoS 2
// flows, and fails on any other packet.
func (c *Conn) Recv(n int) []*codec.Publish {
	c.T.Helper()
	var out []*codec.Publish
	pending := map[uint16]bool{}
	for len(out) < n || len(pending) > 0 {
		switch p := c.Next().(type) {
		case *codec.Publish:
			if len(out) == n {
				c.T.Fatalf("got an extra PUBLISH %q %q, want %d", p.Topic, p.Payload, n)
			}
			out = append(out, p)
			c.Ack(p)
			if p.QoS == 2 {
				pending[p.PacketID] = true
			}
		case *codec.Ack:
			if p.Kind != codec.PUBREL || !pending[p.PacketID] {
				c.T.Fatalf("got %s id %d, want PUBLISH or PUBREL", p.Kind, p.PacketID)
			}
			delete(pending, p.PacketID)
			c.Send(&codec.Ack{Kind: codec.PUBCOMP, PacketID: p.PacketID})
		default:
			c.T.Fatalf("got %s, want PUBLISH", p.Type())
		}
	}
	return out
}

// WantPayloads checks the payloads of ps, in order.
func WantPayloads(t testing.TB, ps []*codec.Publish, want ...string) {
	t.Helper()
	if got := Payloads(ps); !slices.Equal(got, want) {
		t.Fatalf("payloads %q, want %q", got, want)
	}
}
