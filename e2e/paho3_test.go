package e2e_test

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/xmq-io/xmq/core"
)

// v3Client is an eclipse/paho.mqtt.golang client speaking MQTT 3.1.1.
type v3Client struct {
	mqtt.Client
	conn chan net.Conn // the TCP connection under the client, once dialled
	msgs chan mqtt.Message
}

// connectV3 connects id to addr; mod adjusts the options (will, clean
// session). It fails the test unless the broker accepts.
func connectV3(t *testing.T, addr, id string, mod func(*mqtt.ClientOptions)) (*v3Client, bool) {
	t.Helper()
	c := &v3Client{conn: make(chan net.Conn, 1), msgs: make(chan mqtt.Message, 1000)}
	o := mqtt.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).SetProtocolVersion(4).
		SetCleanSession(true).SetAutoReconnect(false).SetConnectRetry(false).SetKeepAlive(30 * time.Second).
		SetConnectTimeout(timeout).SetWriteTimeout(timeout).SetOrderMatters(true).
		SetDefaultPublishHandler(func(_ mqtt.Client, m mqtt.Message) { c.msgs <- m }).
		SetCustomOpenConnectionFn(func(u *url.URL, _ mqtt.ClientOptions) (net.Conn, error) {
			conn, err := net.DialTimeout("tcp", u.Host, timeout)
			if err == nil {
				c.conn <- conn
			}
			return conn, err
		})
	if mod != nil {
		mod(o)
	}
	c.Client = mqtt.NewClient(o)
	tok := c.Connect()
	if !tok.WaitTimeout(timeout) || tok.Error() != nil {
		t.Fatalf("connect %q: %v", id, tok.Error())
	}
	t.Cleanup(func() {
		if c.IsConnectionOpen() {
			c.Disconnect(100)
		}
	})
	return c, tok.(*mqtt.ConnectToken).SessionPresent()
}

func v3(t *testing.T, addr, id string) *v3Client {
	t.Helper()
	c, _ := connectV3(t, addr, id, nil)
	return c
}

func wait(t *testing.T, what string, tok mqtt.Token) {
	t.Helper()
	if !tok.WaitTimeout(timeout) {
		t.Fatalf("%s: no answer in %v", what, timeout)
	}
	if err := tok.Error(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func (c *v3Client) sub(t *testing.T, qos byte, filters ...string) {
	t.Helper()
	for _, f := range filters {
		tok := c.Subscribe(f, qos, nil)
		wait(t, "subscribe "+f, tok)
		key := f
		if strings.HasPrefix(f, "$share/") { // paho keys shared results by the bare filter
			key = strings.Join(strings.Split(f, "/")[2:], "/")
		}
		if got, ok := tok.(*mqtt.SubscribeToken).Result()[key]; !ok || got != qos {
			t.Fatalf("SUBACK %#x for %q, want QoS %d", got, f, qos)
		}
	}
}

func (c *v3Client) pub(t *testing.T, topic string, qos byte, retain bool, payload string) {
	t.Helper()
	wait(t, "publish "+topic, c.Publish(topic, qos, retain, payload))
}

// MQTT 3.1.1 with paho.mqtt.golang: wildcards and QoS 0/1/2 end to end.
func TestPaho3PubSubQoS(t *testing.T) {
	addr := startBroker(t, core.Options{})
	s := v3(t, addr, "sub")
	s.sub(t, 2, "home/+/temp", "alarm/#")
	p := v3(t, addr, "pub")
	for qos := byte(0); qos <= 2; qos++ {
		topic := fmt.Sprintf("home/room%d/temp", qos)
		p.pub(t, topic, qos, false, fmt.Sprint(qos))
		m := receive(t, s.msgs)
		if m.Topic() != topic || m.Qos() != qos || string(m.Payload()) != fmt.Sprint(qos) || m.Duplicate() {
			t.Fatalf("got %q %q QoS %d dup %v, want %q at QoS %d", m.Topic(), m.Payload(), m.Qos(), m.Duplicate(), topic, qos)
		}
	}
	p.pub(t, "home/room1/humidity", 1, false, "no")
	p.pub(t, "alarm", 1, false, "parent level") // "alarm/#" matches "alarm"
	if m := receive(t, s.msgs); m.Topic() != "alarm" {
		t.Fatalf("got %q, want alarm", m.Topic())
	}
	nothing(t, s.msgs)
}

// Retained messages are delivered with RETAIN on subscribe, and cleared by
// an empty retained message.
func TestPaho3Retained(t *testing.T) {
	addr := startBroker(t, core.Options{})
	p := v3(t, addr, "pub")
	p.pub(t, "config/a", 1, true, "v1")
	p.pub(t, "config/a", 1, true, "v2")
	p.pub(t, "config/b", 1, true, "gone")
	p.pub(t, "config/b", 1, true, "")
	s := v3(t, addr, "sub")
	s.sub(t, 1, "config/#")
	m := receive(t, s.msgs)
	if !m.Retained() || string(m.Payload()) != "v2" || m.Topic() != "config/a" {
		t.Fatalf("got %q %q retained %v, want retained v2 on config/a", m.Topic(), m.Payload(), m.Retained())
	}
	nothing(t, s.msgs)
}

// The will is published when the TCP connection drops under the client.
func TestPaho3WillOnAbruptClose(t *testing.T) {
	addr := startBroker(t, core.Options{})
	w := v3(t, addr, "watch")
	w.sub(t, 1, "clients/+/state")
	c, _ := connectV3(t, addr, "fragile", func(o *mqtt.ClientOptions) {
		o.SetWill("clients/fragile/state", "offline", 1, false)
	})
	conn := receive(t, c.conn)
	_ = conn.Close()
	m := receive(t, w.msgs)
	if m.Topic() != "clients/fragile/state" || string(m.Payload()) != "offline" {
		t.Fatalf("got %q %q, want the will", m.Topic(), m.Payload())
	}
	// A client that disconnects properly leaves no will.
	ok, _ := connectV3(t, addr, "polite", func(o *mqtt.ClientOptions) {
		o.SetWill("clients/polite/state", "offline", 1, false)
	})
	ok.Disconnect(100)
	nothing(t, w.msgs)
}

// CleanSession=false keeps the subscription and queues QoS 1 messages for
// the client while it is away, delivered in order when it returns.
func TestPaho3PersistentSession(t *testing.T) {
	addr := startBroker(t, core.Options{})
	persistent := func(o *mqtt.ClientOptions) { o.SetCleanSession(false) }
	s, _ := connectV3(t, addr, "durable", persistent)
	s.sub(t, 1, "orders/#")
	s.Disconnect(100)
	p := v3(t, addr, "pub")
	want := []string{"o1", "o2", "o3", "o4"}
	for _, m := range want {
		p.pub(t, "orders/new", 1, false, m)
	}
	s, present := connectV3(t, addr, "durable", persistent)
	if !present {
		t.Fatalf("session present false, want true")
	}
	var got []string
	for range want {
		got = append(got, string(receive(t, s.msgs).Payload()))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	nothing(t, s.msgs)
}

// 3.1.1 clients can share a subscription with $share.
func TestPaho3SharedSubscription(t *testing.T) {
	addr := startBroker(t, core.Options{})
	a, b := v3(t, addr, "a"), v3(t, addr, "b")
	a.sub(t, 1, "$share/pool/tasks")
	b.sub(t, 1, "$share/pool/tasks")
	p := v3(t, addr, "pub")
	for i := range 10 {
		p.pub(t, "tasks", 1, false, fmt.Sprint(i))
	}
	seen := map[string]bool{}
	for range 10 {
		var m mqtt.Message
		select {
		case m = <-a.msgs:
		case m = <-b.msgs:
		case <-time.After(timeout):
			t.Fatalf("got %d of 10 tasks", len(seen))
		}
		if seen[string(m.Payload())] {
			t.Fatalf("task %q delivered twice", m.Payload())
		}
		seen[string(m.Payload())] = true
	}
	nothing(t, a.msgs)
	nothing(t, b.msgs)
}

// A 3.1.1 publisher and an MQTT 5 subscriber talk through the broker.
func TestPaho3ToPaho5(t *testing.T) {
	addr := startBroker(t, core.Options{})
	s := v5(t, addr, "new")
	s.sub(t, 1, "mixed/#")
	v3(t, addr, "old").pub(t, "mixed/x", 1, false, "hello")
	if m := receive(t, s.msgs); string(m.Payload) != "hello" || m.QoS != 1 {
		t.Fatalf("got %s", m)
	}
}
