package core_test

import (
	"testing"
	"time"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// disconnect sends DISCONNECT (normal) and waits for the broker to close.
func (c *tconn) disconnect() {
	c.T.Helper()
	c.Send(&codec.Disconnect{})
	c.ExpectClosed()
}

// waitConnected waits until the broker has finished with every connection
// but n: their sessions are detached and their wills handled.
func waitConnected(t *testing.T, srv *core.Server, n int64) {
	t.Helper()
	waitFor(t, "connections to end", func() bool { return srv.Stats().Connected == n })
}

var persistentVersions = []struct {
	name string
	v    byte
}{{"v3.1.1", codec.V311}, {"v5", codec.V5}}

// [MQTT-3.1.4-3] (5.0 3.1.4 and 3.14.2.1): a CONNECT with a client id in use
// closes the existing connection (5.0: DISCONNECT Session taken over) and
// the new one resumes the session.
func TestSessionTakeover(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	for _, tc := range persistentVersions {
		t.Run(tc.name, func(t *testing.T) {
			id := "take-" + tc.name
			old := client(t, srv, tc.v, id, persistent)
			old.Subscribe(1, "take/"+tc.name+"/#")
			c := dial(t, srv, tc.v)
			p := connectPacket(tc.v, id)
			persistent(p)
			if ack := c.Connect(p); !ack.SessionPresent {
				t.Fatalf("CONNACK session present 0, want 1 [MQTT-3.2.2-3]")
			}
			if tc.v == codec.V5 {
				old.ExpectDisconnect(codec.SessionTakenOver)
			} else {
				old.ExpectClosed()
			}
			client(t, srv, codec.V311, "pub-"+id).Pub("take/"+tc.name+"/x", "after", 1)
			wantPayloads(t, c.Recv(1), "after")
			waitFor(t, "taken_over counted", func() bool { return srv.Stats().Disconnects["taken_over"] >= 1 })
		})
	}
}

// [MQTT-3.1.2-4] (5.0 [MQTT-3.1.2-4]): Clean Start discards the session.
func TestCleanStartDiscardsSession(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	for _, tc := range persistentVersions {
		t.Run(tc.name, func(t *testing.T) {
			id := "clean-" + tc.name
			topic := "clean/" + tc.name
			s := client(t, srv, tc.v, id, persistent)
			s.Subscribe(1, topic)
			s.disconnect()
			waitConnected(t, srv, 0)

			c := dial(t, srv, tc.v)
			p := connectPacket(tc.v, id)
			if tc.v == codec.V5 {
				p.Props.SetNum(codec.PropSessionExpiry, 60)
			}
			if ack := c.Connect(p); ack.SessionPresent {
				t.Fatalf("session present after Clean Start")
			}
			pub := client(t, srv, codec.V5, "pub-"+id)
			if rc := pub.Publish(&codec.Publish{Topic: []byte(topic), QoS: 1, Payload: []byte("x")}); rc != codec.NoMatchingSubscribers {
				t.Fatalf("PUBACK %s, want No matching subscribers: the old subscription survived", rc)
			}
			c.ExpectNothing(quiet)
		})
	}
}

// [MQTT-3.1.2-5] [MQTT-4.4.0-1] (5.0 3.1.2.11.2): a persistent session keeps
// its subscriptions and queues QoS 1 messages while offline; they are
// delivered in order on reconnect [MQTT-4.6.0-6].
func TestPersistentSessionQueuesOffline(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	for _, tc := range persistentVersions {
		t.Run(tc.name, func(t *testing.T) {
			id := "queue-" + tc.name
			topic := "queue/" + tc.name
			s := client(t, srv, tc.v, id, persistent)
			s.Subscribe(1, topic+"/#")
			s.Subscribe(0, topic+"-q0/#")
			s.disconnect()
			waitConnected(t, srv, 0)

			p := client(t, srv, tc.v, "pub-"+id)
			for _, m := range seq("m", 5) {
				p.Pub(topic+"/x", m, 1)
			}
			p.Pub(topic+"-q0/x", "qos0-offline", 0) // QoS 0 is not queued for offline sessions
			p.Send(&codec.Pingreq{})                // handled after the PUBLISH, before the reconnect
			expect[*codec.Pingresp](p)

			c := dial(t, srv, tc.v)
			cp := connectPacket(tc.v, id)
			persistent(cp)
			if ack := c.Connect(cp); !ack.SessionPresent {
				t.Fatalf("session present 0, want 1")
			}
			got := c.Recv(5)
			wantPayloads(t, got, seq("m", 5)...)
			for _, m := range got {
				if m.QoS != 1 || m.Dup || m.Retain {
					t.Errorf("delivery %q: QoS %d dup %v retain %v, want QoS 1, first delivery, not retained", m.Payload, m.QoS, m.Dup, m.Retain)
				}
			}
			c.ExpectNothing(quiet)
			// The subscriptions survived too.
			p.Pub(topic+"/y", "live", 1)
			wantPayloads(t, c.Recv(1), "live")
		})
	}
}

// [MQTT-4.4.0-1] (5.0 [MQTT-4.4.0-1] [MQTT-4.4.0-2]): on reconnect the
// broker resends unacknowledged PUBLISH packets with DUP=1 and their packet
// ids, and PUBREL for QoS 2 messages past PUBREC, in the original order.
func TestRedeliveryOnReconnect(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	for _, tc := range persistentVersions {
		t.Run(tc.name, func(t *testing.T) {
			id := "redeliver-" + tc.name
			topic := "redeliver/" + tc.name
			s := client(t, srv, tc.v, id, persistent)
			s.Subscribe(2, topic+"/#")
			p := client(t, srv, tc.v, "pub-"+id)

			p.Pub(topic+"/1", "q1", 1)
			q1 := s.ExpectPublish() // not acknowledged
			p.Pub(topic+"/2", "q2-pubrec", 2)
			q2a := s.ExpectPublish()
			s.Send(&codec.Ack{Kind: codec.PUBREC, PacketID: q2a.PacketID})
			s.ExpectAck(codec.PUBREL, q2a.PacketID) // not completed
			p.Pub(topic+"/3", "q2-none", 2)
			q2b := s.ExpectPublish() // not acknowledged
			for _, m := range []*codec.Publish{q1, q2a, q2b} {
				if m.Dup {
					t.Fatalf("first delivery of %q has DUP set [MQTT-3.3.1-1]", m.Payload)
				}
			}
			s.Close()
			waitConnected(t, srv, 1)

			c := dial(t, srv, tc.v)
			cp := connectPacket(tc.v, id)
			persistent(cp)
			if ack := c.Connect(cp); !ack.SessionPresent {
				t.Fatalf("session present 0, want 1")
			}
			r1 := c.ExpectPublish()
			if !r1.Dup || r1.PacketID != q1.PacketID || r1.QoS != 1 || string(r1.Payload) != "q1" {
				t.Fatalf("got %q id %d QoS %d dup %v, want %q again with id %d, QoS 1, DUP", r1.Payload, r1.PacketID, r1.QoS, r1.Dup, "q1", q1.PacketID)
			}
			c.ExpectAck(codec.PUBREL, q2a.PacketID)
			r3 := c.ExpectPublish()
			if !r3.Dup || r3.PacketID != q2b.PacketID || r3.QoS != 2 || string(r3.Payload) != "q2-none" {
				t.Fatalf("got %q id %d QoS %d dup %v, want %q again with id %d, QoS 2, DUP", r3.Payload, r3.PacketID, r3.QoS, r3.Dup, "q2-none", q2b.PacketID)
			}
			c.Send(&codec.Ack{Kind: codec.PUBACK, PacketID: q1.PacketID})
			c.Send(&codec.Ack{Kind: codec.PUBCOMP, PacketID: q2a.PacketID})
			c.Send(&codec.Ack{Kind: codec.PUBREC, PacketID: q2b.PacketID})
			c.ExpectAck(codec.PUBREL, q2b.PacketID)
			c.Send(&codec.Ack{Kind: codec.PUBCOMP, PacketID: q2b.PacketID})
			c.ExpectNothing(quiet)

			// Everything acknowledged: a further reconnect owes nothing.
			c.disconnect()
			again := dial(t, srv, tc.v)
			again.Connect(cp)
			again.ExpectNothing(quiet)
		})
	}
}

// 5.0 3.1.2.11.2: a session ends Session Expiry Interval seconds after its
// connection closes; reconnecting earlier resumes it.
func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	srv := newServer(t, core.Options{}, core.Config{})
	connect := func(clean bool) (*tconn, *codec.Connack) {
		c := dial(t, srv, codec.V5)
		p := connectPacket(codec.V5, "expiring")
		p.CleanStart = clean
		p.Props.SetNum(codec.PropSessionExpiry, 1)
		return c, c.Connect(p)
	}
	c, _ := connect(true)
	c.Subscribe(1, "exp/#")
	c.disconnect()
	c, ack := connect(false)
	if !ack.SessionPresent {
		t.Fatalf("session gone before its expiry")
	}
	c.disconnect()
	time.Sleep(1500 * time.Millisecond)
	if _, ack := connect(false); ack.SessionPresent {
		t.Fatalf("session present after its expiry")
	}
}

// [MQTT-3.14.2-2]: a client that connected with Session Expiry 0 must not
// set a non-zero one on DISCONNECT; doing so is a Protocol Error.
func TestDisconnectSessionExpiryAfterZero(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	c := client(t, srv, codec.V5, "zero")
	d := &codec.Disconnect{}
	d.Props.SetNum(codec.PropSessionExpiry, 30)
	c.Send(d)
	c.ExpectDisconnect(codec.ProtocolError)
}

// 5.0 3.14.2.2.2: a Session Expiry on DISCONNECT replaces the one from
// CONNECT; setting it to 0 ends the session with the connection.
func TestDisconnectSessionExpiryToZero(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	c := client(t, srv, codec.V5, "to-zero", persistent)
	c.Subscribe(1, "tz")
	d := &codec.Disconnect{}
	d.Props.SetNum(codec.PropSessionExpiry, 0)
	c.Send(d)
	c.ExpectClosed()
	waitConnected(t, srv, 0)
	c = dial(t, srv, codec.V5)
	p := connectPacket(codec.V5, "to-zero")
	persistent(p)
	if ack := c.Connect(p); ack.SessionPresent {
		t.Fatalf("session kept after DISCONNECT set its expiry to 0")
	}
}

// A Server restarted on the same Store restores persistent sessions, their
// subscriptions and queued QoS 1 messages in order, and retained messages.
func TestRestartRestoresState(t *testing.T) {
	for _, tc := range persistentVersions {
		t.Run(tc.name, func(t *testing.T) {
			store := core.NewMemStore()
			opts := core.Options{SysInterval: -1}
			srv1, err := core.New(opts, core.Config{Store: store})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { shutdown(t, srv1) })
			s := client(t, srv1, tc.v, "restart", persistent)
			s.Subscribe(1, "rs/#")
			s.disconnect()
			waitConnected(t, srv1, 0)
			p := client(t, srv1, tc.v, "pub")
			p.PubRetained("rs/ret", "kept", 1)
			for _, m := range seq("m", 3) {
				p.Pub("rs/x", m, 1)
			}
			p.PubRetained("other/ret", "other", 0)
			p.PubRetained("other/ret", "", 0) // cleared: must stay cleared
			p.Send(&codec.Pingreq{})          // the clear is read before the shutdown
			expect[*codec.Pingresp](p)
			shutdown(t, srv1)

			srv2 := newServer(t, opts, core.Config{Store: store})
			c := dial(t, srv2, tc.v)
			cp := connectPacket(tc.v, "restart")
			persistent(cp)
			if ack := c.Connect(cp); !ack.SessionPresent {
				t.Fatalf("session lost in the restart")
			}
			wantPayloads(t, c.Recv(4), "kept", "m0", "m1", "m2")
			c.ExpectNothing(quiet)
			// The subscription was restored.
			client(t, srv2, tc.v, "pub2").Pub("rs/y", "after", 1)
			wantPayloads(t, c.Recv(1), "after")
			// And the retained messages.
			n := client(t, srv2, tc.v, "new")
			n.Subscribe(1, "rs/ret", "other/ret")
			got := n.Recv(1)
			wantPayloads(t, got, "kept")
			if !got[0].Retain {
				t.Errorf("restored retained message sent without RETAIN")
			}
			n.ExpectNothing(quiet)
		})
	}
}

// [MQTT-3.3.2-6]: a message resent after its expiry passed (delivery had
// started, so it is not dropped [MQTT-3.3.2-5]) carries what is left of its
// interval, never a wrapped-around huge value.
func TestRedeliveredExpiredMessageExpiry(t *testing.T) {
	t.Parallel()
	srv := newServer(t, core.Options{}, core.Config{})
	s := client(t, srv, codec.V5, "slowpoke", persistent)
	s.Subscribe(1, "rexp")
	m := &codec.Publish{Topic: []byte("rexp"), QoS: 1, Payload: []byte("x")}
	m.Props.SetNum(codec.PropMessageExpiry, 1)
	client(t, srv, codec.V5, "rexp-pub").Publish(m)
	s.ExpectPublish() // not acknowledged
	s.Close()
	time.Sleep(3200 * time.Millisecond) // more than a whole second past the expiry
	c := dial(t, srv, codec.V5)
	p := connectPacket(codec.V5, "slowpoke")
	persistent(p)
	c.Connect(p)
	r := c.ExpectPublish()
	if !r.Dup {
		t.Fatalf("resent message without DUP")
	}
	if e, ok := r.Props.Num(codec.PropMessageExpiry); !ok || e > 1 {
		t.Fatalf("resent expiry %d (present %v), want at most 1", e, ok)
	}
}
