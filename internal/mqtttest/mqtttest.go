// Package mqtttest is the project's MQTT test client, over the codec and
// any transport listeners.Dial knows, or over a conn the test provides
// (net.Pipe to a core.Server), with the helpers tests around a broker
// share. Like net/http/httptest, it is for tests only. It imports no
// broker package: Serve takes a *core.Server as its Server interface.
//
//   - Conn speaks packet by packet: the test sends what it wants and takes
//     each packet the server sent (Next, Expect, ExpectAck, ExpectClosed,
//     ExpectNothing), with flows for CONNECT, SUBSCRIBE and QoS 1/2
//     PUBLISH in both directions (Connect, Subscribe, Publish, Recv). For
//     conformance and protocol-error tests.
//   - Client acknowledges every message it receives (completing QoS 2
//     flows) and hands copies, out of its read buffer, to the test on
//     Msgs. For tests about what arrives, not how.
//   - WaitFor, FreePort/FreeAddr, Listen and Serve (a broker on a listener,
//     shut down and checked when the test ends).
package mqtttest

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/listeners"
)

// Timeout bounds every wait of a Client.
const Timeout = 5 * time.Second

// Quiet is how long Nothing waits to be sure that nothing arrives.
const Quiet = 200 * time.Millisecond

// Client is one connection. Its methods are for the test's goroutine;
// the reader runs on its own.
type Client struct {
	t    testing.TB
	conn net.Conn
	r    *codec.Reader
	v    byte

	closed atomic.Bool // by the test: the reader's last acknowledgements may fail
	wmu    sync.Mutex
	nextID uint16
	// Msgs receives a copy of every PUBLISH, already acknowledged.
	Msgs chan *codec.Publish
	acks chan codec.Ack
	subs chan *codec.Suback
	done chan struct{}
}

// Dial connects to url (listeners.Dial; TLS certificates are not checked)
// as client id at protocol level v; mods adjust the CONNECT. It fails the
// test unless the server accepts.
func Dial(t testing.TB, url, id string, v byte, mods ...func(*codec.Connect)) *Client {
	t.Helper()
	conn, err := listeners.Dial(context.Background(), url, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // test servers' own CAs
	if err != nil {
		t.Fatal(err)
	}
	return Connect(t, conn, id, v, mods...)
}

// Connect is Dial over a conn the test made (one end of net.Pipe whose
// other end a core.Server serves, for example).
func Connect(t testing.TB, conn net.Conn, id string, v byte, mods ...func(*codec.Connect)) *Client {
	t.Helper()
	c := &Client{t: t, conn: conn, v: v, Msgs: make(chan *codec.Publish, 10000), acks: make(chan codec.Ack, 1000),
		subs: make(chan *codec.Suback, 10), done: make(chan struct{})}
	c.r = codec.NewReader(bufio.NewReader(conn), 0)
	c.r.Version = v
	cp := &codec.Connect{ProtocolVersion: v, CleanStart: true, ClientID: []byte(id)}
	for _, m := range mods {
		m(cp)
	}
	c.Send(cp)
	_ = conn.SetReadDeadline(time.Now().Add(Timeout))
	p, err := c.r.ReadPacket()
	if err != nil {
		_ = conn.Close()
		t.Fatalf("client %s: CONNACK: %v", id, err)
	}
	if ack, ok := p.(*codec.Connack); !ok || ack.ReasonCode != codec.Success {
		_ = conn.Close()
		t.Fatalf("client %s: got %+v, want CONNACK Success", id, p)
	}
	_ = conn.SetReadDeadline(time.Time{})
	go c.readLoop()
	t.Cleanup(c.Close)
	return c
}

// Persistent keeps the client's session: Clean Start 0, and in MQTT 5 an
// hour's Session Expiry.
func Persistent(cp *codec.Connect) {
	cp.CleanStart = false
	if cp.ProtocolVersion == codec.V5 {
		cp.Props.SetNum(codec.PropSessionExpiry, 3600)
	}
}

// RAP asks for Retain As Published on a subscription.
func RAP(s *codec.Subscription) { s.RetainAsPublished = true }

// Close closes the connection and waits for the reader.
func (c *Client) Close() {
	c.closed.Store(true)
	_ = c.conn.Close()
	<-c.done
}

// Send writes one packet.
func (c *Client) Send(p codec.Packet) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.conn.SetWriteDeadline(time.Now().Add(Timeout))
	if _, err := c.conn.Write(p.Append(nil, c.v)); err != nil && !c.closed.Load() {
		c.t.Errorf("write: %v", err)
	}
}

func (c *Client) readLoop() {
	defer close(c.done)
	for {
		p, err := c.r.ReadPacket()
		if err != nil {
			return
		}
		switch p := p.(type) {
		case *codec.Publish:
			c.Msgs <- copyPublish(p)
			switch p.QoS {
			case 1:
				c.Send(&codec.Ack{Kind: codec.PUBACK, PacketID: p.PacketID})
			case 2:
				c.Send(&codec.Ack{Kind: codec.PUBREC, PacketID: p.PacketID})
			}
		case *codec.Ack:
			switch p.Kind {
			case codec.PUBREL:
				c.Send(&codec.Ack{Kind: codec.PUBCOMP, PacketID: p.PacketID})
				continue
			case codec.PUBREC:
				if !p.ReasonCode.IsError() {
					c.Send(&codec.Ack{Kind: codec.PUBREL, PacketID: p.PacketID})
				}
			}
			c.acks <- codec.Ack{Kind: p.Kind, PacketID: p.PacketID, ReasonCode: p.ReasonCode}
		case *codec.Suback:
			s := *p
			s.ReasonCodes = append([]codec.ReasonCode(nil), p.ReasonCodes...)
			c.subs <- &s
		}
	}
}

// copyPublish copies a PUBLISH and the properties a message carries out
// of the reader's buffer.
func copyPublish(p *codec.Publish) *codec.Publish {
	cp := func(b []byte) []byte { return append([]byte(nil), b...) }
	q := *p
	q.Topic, q.Payload = cp(p.Topic), cp(p.Payload)
	q.Props = codec.Properties{}
	if p.Props.Has(codec.PropPayloadFormat) {
		q.Props.SetNum(codec.PropPayloadFormat, uint32(p.Props.PayloadFormat))
	}
	if p.Props.Has(codec.PropMessageExpiry) {
		q.Props.SetNum(codec.PropMessageExpiry, p.Props.MessageExpiry)
	}
	q.Props.ContentType, q.Props.ResponseTopic, q.Props.CorrelationData = cp(p.Props.ContentType), cp(p.Props.ResponseTopic), cp(p.Props.CorrelationData)
	for _, u := range p.Props.User {
		q.Props.User = append(q.Props.User, codec.UserProperty{Key: cp(u.Key), Value: cp(u.Value)})
	}
	q.Props.SubscriptionIDs = append([]uint32(nil), p.Props.SubscriptionIDs...)
	return &q
}

func (c *Client) id() uint16 {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nextID++
	if c.nextID == 0 {
		c.nextID = 1
	}
	return c.nextID
}

// Subscribe subscribes to filter at qos and waits for the grant; mods set
// the subscription's options.
func (c *Client) Subscribe(filter string, qos byte, mods ...func(*codec.Subscription)) {
	c.t.Helper()
	sub := codec.Subscription{Filter: []byte(filter), QoS: qos}
	for _, m := range mods {
		m(&sub)
	}
	c.SubscribePacket(&codec.Subscribe{Subscriptions: []codec.Subscription{sub}})
}

// SubscribePacket sends p (its packet id filled in), for what Subscribe
// cannot say (several subscriptions, a subscription identifier), and
// waits until each subscription is granted its QoS.
func (c *Client) SubscribePacket(p *codec.Subscribe) {
	c.t.Helper()
	p.PacketID = c.id()
	c.Send(p)
	select {
	case s := <-c.subs:
		for i, sub := range p.Subscriptions {
			if i >= len(s.ReasonCodes) || s.ReasonCodes[i] != codec.ReasonCode(sub.QoS) {
				c.t.Fatalf("SUBACK %v for %s", s.ReasonCodes, sub.Filter)
			}
		}
	case <-time.After(Timeout):
		c.t.Fatalf("no SUBACK for %s", p.Subscriptions[0].Filter)
	}
}

// Publish publishes p (its packet id filled in) and waits for the end of
// its flow: PUBACK or PUBCOMP, or a PUBREC that refuses. It returns the
// reason code.
func (c *Client) Publish(p *codec.Publish) codec.ReasonCode {
	c.t.Helper()
	if p.QoS > 0 {
		p.PacketID = c.id()
	}
	c.Send(p)
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
		case <-time.After(Timeout):
			c.t.Fatalf("no acknowledgement for %q", p.Topic)
			return 0
		}
	}
}

// Pub publishes payload on topic.
func (c *Client) Pub(topic, payload string, qos byte, retain bool) {
	c.t.Helper()
	c.Publish(&codec.Publish{Topic: []byte(topic), Payload: []byte(payload), QoS: qos, Retain: retain})
}

// Expect takes n messages.
func (c *Client) Expect(n int) []*codec.Publish {
	c.t.Helper()
	var out []*codec.Publish
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	for len(out) < n {
		select {
		case p := <-c.Msgs:
			out = append(out, p)
		case <-timer.C:
			c.t.Fatalf("got %d messages, want %d: %q", len(out), n, Payloads(out))
		}
	}
	return out
}

// Nothing checks that no message arrives for Quiet.
func (c *Client) Nothing() {
	c.t.Helper()
	select {
	case p := <-c.Msgs:
		c.t.Fatalf("got %q on %q, want nothing", p.Payload, p.Topic)
	case <-time.After(Quiet):
	}
}

// Payloads lists the payloads of ps as strings.
func Payloads(ps []*codec.Publish) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p.Payload)
	}
	return out
}
