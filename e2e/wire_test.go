package e2e_test

import (
	"testing"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// Byte-level cases over real TCP, written and read with the codec.

// A malformed packet gets DISCONNECT Malformed Packet and the connection
// closes; other clients carry on (4.13).
func TestWireMalformedPacket(t *testing.T) {
	addr := startBroker(t, core.Options{})
	watch := dialRaw(t, addr, codec.V5)
	connect(watch, "watch", true)
	watch.Subscribe(0, "ok/#")

	bad := dialRaw(t, addr, codec.V5)
	connect(bad, "bad", true)
	bad.SendRaw([]byte{0x36, 0x06, 0x00, 0x01, 'a', 0x00, 0x01, 0x00}) // PUBLISH with QoS 3
	if d := mqtttest.Expect[*codec.Disconnect](bad); d.ReasonCode != codec.MalformedPacket {
		t.Fatalf("DISCONNECT %s, want Malformed Packet", d.ReasonCode)
	}
	bad.ExpectClosed()

	good := dialRaw(t, addr, codec.V311)
	connect(good, "good", true)
	good.Send(&codec.Publish{Topic: []byte("ok/1"), Payload: []byte("fine")})
	if m := mqtttest.Expect[*codec.Publish](watch); string(m.Payload) != "fine" {
		t.Fatalf("got %q", m.Payload)
	}
}

// A packet over MaxPacketSize gets DISCONNECT Packet too large (5.0) or a
// plain close (3.1.1), read no further than its fixed header.
func TestWireOversizePacket(t *testing.T) {
	addr := startBroker(t, core.Options{MaxPacketSize: 1024})
	for _, tc := range []struct {
		name string
		v    byte
	}{{"v5", codec.V5}, {"v3.1.1", codec.V311}} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, addr, tc.v)
			ack := connect(c, "big-"+tc.name, true)
			if tc.v == codec.V5 {
				if mps, ok := ack.Props.Num(codec.PropMaximumPacketSize); !ok || mps != 1024 {
					t.Fatalf("CONNACK Maximum Packet Size %d (present %v), want 1024", mps, ok)
				}
			}
			// Announce 1 MiB and send only the header: the broker must not wait for the body.
			c.SendRaw([]byte{0x30, 0x80, 0x80, 0x40})
			if tc.v == codec.V5 {
				if d := mqtttest.Expect[*codec.Disconnect](c); d.ReasonCode != codec.PacketTooLarge {
					t.Fatalf("DISCONNECT %s, want Packet too large", d.ReasonCode)
				}
			}
			c.ExpectClosed()
		})
	}
}

// QoS 2 end to end: PUBLISH → PUBREC → PUBREL → PUBCOMP on both sides, a
// retransmitted PUBLISH delivered once.
func TestWireQoS2Flow(t *testing.T) {
	addr := startBroker(t, core.Options{})
	s := dialRaw(t, addr, codec.V5)
	connect(s, "s", true)
	s.Subscribe(2, "q2")
	p := dialRaw(t, addr, codec.V5)
	connect(p, "p", true)

	pub := &codec.Publish{Topic: []byte("q2"), QoS: 2, PacketID: 42, Payload: []byte("exactly once")}
	p.Send(pub)
	p.ExpectAck(codec.PUBREC, 42)
	pub.Dup = true
	p.Send(pub) // the PUBREC was "lost": send again
	p.ExpectAck(codec.PUBREC, 42)
	p.Send(&codec.Ack{Kind: codec.PUBREL, PacketID: 42})
	p.ExpectAck(codec.PUBCOMP, 42)

	m := mqtttest.Expect[*codec.Publish](s)
	if m.QoS != 2 || string(m.Payload) != "exactly once" || m.Dup {
		t.Fatalf("got %+v", m)
	}
	s.Send(&codec.Ack{Kind: codec.PUBREC, PacketID: m.PacketID})
	s.ExpectAck(codec.PUBREL, m.PacketID)
	s.Send(&codec.Ack{Kind: codec.PUBCOMP, PacketID: m.PacketID})
	s.Send(&codec.Pingreq{})
	mqtttest.Expect[*codec.Pingresp](s) // and no second copy before it
}

// Unacknowledged QoS 1 messages are sent again with DUP=1 and the same
// packet id when a persistent session reconnects [MQTT-4.4.0-1].
func TestWireRedeliveryWithDup(t *testing.T) {
	addr := startBroker(t, core.Options{})
	s := dialRaw(t, addr, codec.V311)
	connect(s, "redo", false)
	s.Subscribe(1, "redo")
	p := dialRaw(t, addr, codec.V311)
	connect(p, "p", true)
	p.Send(&codec.Publish{Topic: []byte("redo"), QoS: 1, PacketID: 1, Payload: []byte("again")})
	p.ExpectAck(codec.PUBACK, 1)
	first := mqtttest.Expect[*codec.Publish](s)
	if first.Dup {
		t.Fatalf("first delivery has DUP")
	}
	_ = s.NetConn.Close() // no PUBACK

	again := dialRaw(t, addr, codec.V311)
	if ack := connect(again, "redo", false); !ack.SessionPresent {
		t.Fatalf("session present false")
	}
	m := mqtttest.Expect[*codec.Publish](again)
	if !m.Dup || m.PacketID != first.PacketID || string(m.Payload) != "again" {
		t.Fatalf("redelivery %+v, want DUP with id %d", m, first.PacketID)
	}
	again.Send(&codec.Ack{Kind: codec.PUBACK, PacketID: m.PacketID})
	again.Send(&codec.Pingreq{})
	mqtttest.Expect[*codec.Pingresp](again)
}
