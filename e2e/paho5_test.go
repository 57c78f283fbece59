package e2e_test

import (
	"bytes"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"

	"github.com/xmq-io/xmq/core"
)

// v5Client is an eclipse/paho.golang client over its own TCP connection.
type v5Client struct {
	*paho.Client
	conn net.Conn
	msgs chan *paho.Publish
}

// pahoConn is the conn a paho.golang client is given over conn: one whose
// Lock keeps each packet's Writes together (packets.NewThreadSafeConn, as
// paho.ClientConfig.Conn asks of a conn like tls.Conn). paho writes a
// packet with several Writes and its pinger writes PINGREQ from a goroutine
// of its own. A bare *net.TCPConn gets away without it (net.Buffers go out
// in one writev), but over TLS every Write is a record, and a PINGREQ
// landing inside a PUBLISH desynchronises the stream the broker reads.
func pahoConn(conn net.Conn) net.Conn { return packets.NewThreadSafeConn(conn) }

// connectV5 dials addr and connects with cp (KeepAlive and ClientID must be
// set by the caller); it fails the test unless the broker accepts.
func connectV5(t *testing.T, addr string, cp *paho.Connect) (*v5Client, *paho.Connack) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c := &v5Client{conn: conn, msgs: make(chan *paho.Publish, 1000)}
	c.Client = paho.NewClient(paho.ClientConfig{
		ClientID: cp.ClientID,
		Conn:     pahoConn(conn),
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(r paho.PublishReceived) (bool, error) {
			c.msgs <- r.Packet
			return true, nil
		}},
		OnClientError:      func(error) {},
		OnServerDisconnect: func(*paho.Disconnect) {},
		PacketTimeout:      timeout,
	})
	t.Cleanup(func() {
		_ = c.Disconnect(&paho.Disconnect{})
		_ = conn.Close()
		select {
		case <-c.Done():
		case <-time.After(timeout):
			t.Errorf("paho client %q did not stop", cp.ClientID)
		}
	})
	if cp.KeepAlive == 0 {
		cp.KeepAlive = 30
	}
	ack, err := c.Connect(ctx(t), cp)
	if err != nil {
		t.Fatalf("connect %q: %v (%v)", cp.ClientID, err, ack)
	}
	return c, ack
}

func v5(t *testing.T, addr, id string) *v5Client {
	t.Helper()
	c, _ := connectV5(t, addr, &paho.Connect{ClientID: id, CleanStart: true})
	return c
}

func (c *v5Client) sub(t *testing.T, qos byte, filters ...string) {
	t.Helper()
	s := &paho.Subscribe{}
	for _, f := range filters {
		s.Subscriptions = append(s.Subscriptions, paho.SubscribeOptions{Topic: f, QoS: qos})
	}
	ack, err := c.Subscribe(ctx(t), s)
	if err != nil {
		t.Fatalf("subscribe %v: %v", filters, err)
	}
	for i, rc := range ack.Reasons {
		if rc != qos {
			t.Fatalf("SUBACK %#x for %q, want QoS %d", rc, filters[i], qos)
		}
	}
}

func (c *v5Client) pub(t *testing.T, p *paho.Publish) *paho.PublishResponse {
	t.Helper()
	r, err := c.Publish(ctx(t), p)
	if err != nil {
		t.Fatalf("publish %q: %v", p.Topic, err)
	}
	return r
}

// MQTT 5 with paho.golang: wildcard subscription, QoS 0/1/2 end to end,
// the delivered QoS being the lower of publish and subscription.
func TestPaho5PubSubQoS(t *testing.T) {
	addr := startBroker(t, core.Options{})
	s := v5(t, addr, "sub")
	s.sub(t, 2, "sensors/+/temp", "alerts/#")
	p := v5(t, addr, "pub")
	for qos := byte(0); qos <= 2; qos++ {
		p.pub(t, &paho.Publish{Topic: fmt.Sprintf("sensors/%d/temp", qos), QoS: qos, Payload: []byte{qos}})
		m := receive(t, s.msgs)
		if m.QoS != qos || m.Topic != fmt.Sprintf("sensors/%d/temp", qos) || !bytes.Equal(m.Payload, []byte{qos}) {
			t.Fatalf("got %s, want QoS %d on sensors/%d/temp", m, qos, qos)
		}
	}
	p.pub(t, &paho.Publish{Topic: "sensors/1/humidity", QoS: 1, Payload: []byte("no")})
	p.pub(t, &paho.Publish{Topic: "alerts/fire/floor2", QoS: 2, Payload: []byte("yes")})
	if m := receive(t, s.msgs); m.Topic != "alerts/fire/floor2" || m.QoS != 2 {
		t.Fatalf("got %s, want alerts/fire/floor2 at QoS 2", m)
	}
	nothing(t, s.msgs)

	low := v5(t, addr, "low")
	low.sub(t, 0, "sensors/#")
	p.pub(t, &paho.Publish{Topic: "sensors/9/temp", QoS: 2, Payload: []byte("x")})
	if m := receive(t, low.msgs); m.QoS != 0 {
		t.Fatalf("QoS %d through a QoS 0 subscription, want 0", m.QoS)
	}
}

// Retained messages are delivered with RETAIN on subscribe.
func TestPaho5Retained(t *testing.T) {
	addr := startBroker(t, core.Options{})
	p := v5(t, addr, "pub")
	p.pub(t, &paho.Publish{Topic: "status/dev1", QoS: 1, Retain: true, Payload: []byte("online")})
	s := v5(t, addr, "sub")
	s.sub(t, 1, "status/+")
	m := receive(t, s.msgs)
	if !m.Retain || string(m.Payload) != "online" {
		t.Fatalf("got %s, want retained \"online\"", m)
	}
}

// The will is published when the client's TCP connection drops.
func TestPaho5WillOnAbruptClose(t *testing.T) {
	addr := startBroker(t, core.Options{})
	w := v5(t, addr, "watch")
	w.sub(t, 1, "will/#")
	c, _ := connectV5(t, addr, &paho.Connect{ClientID: "dying", CleanStart: true,
		WillMessage: &paho.WillMessage{Topic: "will/dying", QoS: 1, Payload: []byte("lost")},
		// paho.golang v0.23 packs will properties with the CONNECT table,
		// which drops Content Type and the other PUBLISH-only ones; user
		// properties survive.
		WillProperties: &paho.WillProperties{User: paho.UserProperties{{Key: "why", Value: "crash"}}}})
	_ = c.conn.Close() // under the client: no DISCONNECT
	m := receive(t, w.msgs)
	if m.Topic != "will/dying" || string(m.Payload) != "lost" || m.QoS != 1 {
		t.Fatalf("got %s, want the will", m)
	}
	if m.Properties == nil || !slices.Equal(m.Properties.User, paho.UserProperties{{Key: "why", Value: "crash"}}) {
		t.Fatalf("will properties %+v, want the user property", m.Properties)
	}
}

// A session with an expiry interval keeps its subscription and receives the
// QoS 1 messages published while it was away, in order.
func TestPaho5PersistentSession(t *testing.T) {
	addr := startBroker(t, core.Options{})
	connect := func() (*v5Client, *paho.Connack) {
		return connectV5(t, addr, &paho.Connect{ClientID: "keeper", CleanStart: false,
			Properties: &paho.ConnectProperties{SessionExpiryInterval: paho.Uint32(300)}})
	}
	s, _ := connect()
	s.sub(t, 1, "inbox/keeper")
	if err := s.Disconnect(&paho.Disconnect{}); err != nil {
		t.Fatalf("disconnect: %v", err)
	}
	<-s.Done()
	p := v5(t, addr, "pub")
	want := []string{"a", "b", "c"}
	for _, m := range want {
		p.pub(t, &paho.Publish{Topic: "inbox/keeper", QoS: 1, Payload: []byte(m)})
	}
	s, ack := connect()
	if !ack.SessionPresent {
		t.Fatalf("CONNACK session present false, want true")
	}
	var got []string
	for range want {
		got = append(got, string(receive(t, s.msgs).Payload))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// Two members of a shared subscription share the messages: each once.
func TestPaho5SharedSubscription(t *testing.T) {
	addr := startBroker(t, core.Options{})
	a, b := v5(t, addr, "worker-a"), v5(t, addr, "worker-b")
	a.sub(t, 1, "$share/workers/jobs/#")
	b.sub(t, 1, "$share/workers/jobs/#")
	p := v5(t, addr, "boss")
	for i := range 20 {
		p.pub(t, &paho.Publish{Topic: "jobs/build", QoS: 1, Payload: []byte(fmt.Sprint(i))})
	}
	seen := map[string]int{}
	per := map[string]int{}
	for range 20 {
		select {
		case m := <-a.msgs:
			seen[string(m.Payload)]++
			per["a"]++
		case m := <-b.msgs:
			seen[string(m.Payload)]++
			per["b"]++
		case <-time.After(timeout):
			t.Fatalf("got %d of 20 jobs", len(seen))
		}
	}
	nothing(t, a.msgs)
	nothing(t, b.msgs)
	if len(seen) != 20 || per["a"] == 0 || per["b"] == 0 {
		t.Fatalf("jobs %v split %v, want 20 distinct shared by both", seen, per)
	}
}

// Request/response: Response Topic, Correlation Data, Content Type and
// User Properties reach the responder unchanged, and the answer gets back.
func TestPaho5RequestResponse(t *testing.T) {
	addr := startBroker(t, core.Options{})
	responder := v5(t, addr, "responder")
	responder.sub(t, 1, "svc/echo")
	requester := v5(t, addr, "requester")
	requester.sub(t, 1, "reply/requester")
	users := paho.UserProperties{{Key: "trace", Value: "1"}, {Key: "tenant", Value: "acme"}, {Key: "trace", Value: "2"}}
	requester.pub(t, &paho.Publish{Topic: "svc/echo", QoS: 1, Payload: []byte("hello"), Properties: &paho.PublishProperties{
		ResponseTopic: "reply/requester", CorrelationData: []byte{1, 2, 3}, ContentType: "text/plain",
		PayloadFormat: paho.Byte(1), User: users}})
	req := receive(t, responder.msgs)
	if req.Properties.ResponseTopic != "reply/requester" || !bytes.Equal(req.Properties.CorrelationData, []byte{1, 2, 3}) ||
		req.Properties.ContentType != "text/plain" || req.Properties.PayloadFormat == nil || *req.Properties.PayloadFormat != 1 {
		t.Fatalf("request properties %+v", req.Properties)
	}
	if !slices.Equal(req.Properties.User, users) {
		t.Fatalf("user properties %v, want %v in order", req.Properties.User, users)
	}
	responder.pub(t, &paho.Publish{Topic: req.Properties.ResponseTopic, QoS: 1, Payload: []byte("HELLO"),
		Properties: &paho.PublishProperties{CorrelationData: req.Properties.CorrelationData}})
	resp := receive(t, requester.msgs)
	if string(resp.Payload) != "HELLO" || !bytes.Equal(resp.Properties.CorrelationData, []byte{1, 2, 3}) {
		t.Fatalf("response %s", resp)
	}
}

// Topic aliases both ways: the client sets an alias and then publishes with
// it alone; a subscriber announcing Topic Alias Maximum gets the alias.
func TestPaho5TopicAlias(t *testing.T) {
	addr := startBroker(t, core.Options{})
	s, _ := connectV5(t, addr, &paho.Connect{ClientID: "alias-sub", CleanStart: true,
		Properties: &paho.ConnectProperties{TopicAliasMaximum: paho.Uint16(5)}})
	s.sub(t, 1, "long/topic/name/#")
	plain := v5(t, addr, "plain-sub")
	plain.sub(t, 1, "long/topic/name/#")
	p, ack := connectV5(t, addr, &paho.Connect{ClientID: "alias-pub", CleanStart: true})
	if ack.Properties == nil || ack.Properties.TopicAliasMaximum == nil || *ack.Properties.TopicAliasMaximum == 0 {
		t.Fatalf("CONNACK without a Topic Alias Maximum")
	}
	p.pub(t, &paho.Publish{Topic: "long/topic/name/1", QoS: 1, Payload: []byte("set"),
		Properties: &paho.PublishProperties{TopicAlias: paho.Uint16(1)}})
	p.pub(t, &paho.Publish{Topic: "", QoS: 1, Payload: []byte("used"),
		Properties: &paho.PublishProperties{TopicAlias: paho.Uint16(1)}})

	for _, m := range []*paho.Publish{receive(t, plain.msgs), receive(t, plain.msgs)} {
		if m.Topic != "long/topic/name/1" {
			t.Fatalf("plain subscriber got topic %q, want the aliased topic resolved", m.Topic)
		}
	}
	aliases := map[uint16]string{}
	for i := range 2 {
		m := receive(t, s.msgs)
		if m.Properties == nil || m.Properties.TopicAlias == nil {
			t.Fatalf("message %d without a topic alias", i)
		}
		a := *m.Properties.TopicAlias
		if m.Topic != "" {
			aliases[a] = m.Topic
		}
		if aliases[a] != "long/topic/name/1" {
			t.Fatalf("message %d: alias %d resolves to %q", i, a, aliases[a])
		}
		if i == 1 && m.Topic != "" {
			t.Errorf("second message repeats the topic %q, want the alias alone", m.Topic)
		}
	}
}

// Message expiry: a message that expires while its subscriber is offline is
// not delivered; one that does not arrives with the remaining interval.
func TestPaho5MessageExpiry(t *testing.T) {
	addr := startBroker(t, core.Options{})
	connect := func() (*v5Client, *paho.Connack) {
		return connectV5(t, addr, &paho.Connect{ClientID: "late", CleanStart: false,
			Properties: &paho.ConnectProperties{SessionExpiryInterval: paho.Uint32(60)}})
	}
	s, _ := connect()
	s.sub(t, 1, "news")
	_ = s.Disconnect(&paho.Disconnect{})
	<-s.Done()
	p := v5(t, addr, "pub")
	p.pub(t, &paho.Publish{Topic: "news", QoS: 1, Payload: []byte("stale"), Properties: &paho.PublishProperties{MessageExpiry: paho.Uint32(1)}})
	p.pub(t, &paho.Publish{Topic: "news", QoS: 1, Payload: []byte("fresh"), Properties: &paho.PublishProperties{MessageExpiry: paho.Uint32(30)}})
	time.Sleep(1200 * time.Millisecond)
	s, _ = connect()
	m := receive(t, s.msgs)
	if string(m.Payload) != "fresh" {
		t.Fatalf("got %q, want only \"fresh\"", m.Payload)
	}
	if m.Properties.MessageExpiry == nil || *m.Properties.MessageExpiry >= 30 {
		t.Fatalf("forwarded expiry %v, want less than 30", m.Properties.MessageExpiry)
	}
	nothing(t, s.msgs)
}
