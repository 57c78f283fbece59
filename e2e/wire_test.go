package e2e_test

import (
	"testing"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// Byte-level cases over real TCP, written and read with the codec.

// A malformed packet gets DISCONNECT Malformed Packet and the connection
// closes; other clients carry on (4.13).
func TestWireMalformedPacket(t *testing.T) {
	addr := startBroker(t, core.Options{})
	watch := dialRaw(t, addr, codec.V5)
	watch.connect("watch", true)
	watch.subscribe(1, 0, "ok/#")

	bad := dialRaw(t, addr, codec.V5)
	bad.connect("bad", true)
	bad.sendRaw([]byte{0x36, 0x06, 0x00, 0x01, 'a', 0x00, 0x01, 0x00}) // PUBLISH with QoS 3
	if d := expect[*codec.Disconnect](bad); d.ReasonCode != codec.MalformedPacket {
		t.Fatalf("DISCONNECT %s, want Malformed Packet", d.ReasonCode)
	}
	bad.expectClosed()

	good := dialRaw(t, addr, codec.V311)
	good.connect("good", true)
	good.send(&codec.Publish{Topic: []byte("ok/1"), Payload: []byte("fine")})
	if m := expect[*codec.Publish](watch); string(m.Payload) != "fine" {
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
			ack := c.connect("big-"+tc.name, true)
			if tc.v == codec.V5 {
				if mps, ok := ack.Props.Num(codec.PropMaximumPacketSize); !ok || mps != 1024 {
					t.Fatalf("CONNACK Maximum Packet Size %d (present %v), want 1024", mps, ok)
				}
			}
			// Announce 1 MiB and send only the header: the broker must not wait for the body.
			c.sendRaw([]byte{0x30, 0x80, 0x80, 0x40})
			if tc.v == codec.V5 {
				if d := expect[*codec.Disconnect](c); d.ReasonCode != codec.PacketTooLarge {
					t.Fatalf("DISCONNECT %s, want Packet too large", d.ReasonCode)
				}
			}
			c.expectClosed()
		})
	}
}

// QoS 2 end to end: PUBLISH → PUBREC → PUBREL → PUBCOMP on both sides, a
// retransmitted PUBLISH delivered once.
func TestWireQoS2Flow(t *testing.T) {
	addr := startBroker(t, core.Options{})
	s := dialRaw(t, addr, codec.V5)
	s.connect("s", true)
	s.subscribe(1, 2, "q2")
	p := dialRaw(t, addr, codec.V5)
	p.connect("p", true)

	pub := &codec.Publish{Topic: []byte("q2"), QoS: 2, PacketID: 42, Payload: []byte("exactly once")}
	p.send(pub)
	p.expectAck(codec.PUBREC, 42)
	pub.Dup = true
	p.send(pub) // the PUBREC was "lost": send again
	p.expectAck(codec.PUBREC, 42)
	p.send(&codec.Ack{Kind: codec.PUBREL, PacketID: 42})
	p.expectAck(codec.PUBCOMP, 42)

	m := expect[*codec.Publish](s)
	if m.QoS != 2 || string(m.Payload) != "exactly once" || m.Dup {
		t.Fatalf("got %+v", m)
	}
	s.send(&codec.Ack{Kind: codec.PUBREC, PacketID: m.PacketID})
	s.expectAck(codec.PUBREL, m.PacketID)
	s.send(&codec.Ack{Kind: codec.PUBCOMP, PacketID: m.PacketID})
	s.send(&codec.Pingreq{})
	expect[*codec.Pingresp](s) // and no second copy before it
}

// Unacknowledged QoS 1 messages are sent again with DUP=1 and the same
// packet id when a persistent session reconnects [MQTT-4.4.0-1].
func TestWireRedeliveryWithDup(t *testing.T) {
	addr := startBroker(t, core.Options{})
	s := dialRaw(t, addr, codec.V311)
	s.connect("redo", false)
	s.subscribe(1, 1, "redo")
	p := dialRaw(t, addr, codec.V311)
	p.connect("p", true)
	p.send(&codec.Publish{Topic: []byte("redo"), QoS: 1, PacketID: 1, Payload: []byte("again")})
	p.expectAck(codec.PUBACK, 1)
	first := expect[*codec.Publish](s)
	if first.Dup {
		t.Fatalf("first delivery has DUP")
	}
	_ = s.conn.Close() // no PUBACK

	again := dialRaw(t, addr, codec.V311)
	if ack := again.connect("redo", false); !ack.SessionPresent {
		t.Fatalf("session present false")
	}
	m := expect[*codec.Publish](again)
	if !m.Dup || m.PacketID != first.PacketID || string(m.Payload) != "again" {
		t.Fatalf("redelivery %+v, want DUP with id %d", m, first.PacketID)
	}
	again.send(&codec.Ack{Kind: codec.PUBACK, PacketID: m.PacketID})
	again.send(&codec.Pingreq{})
	expect[*codec.Pingresp](again)
}
