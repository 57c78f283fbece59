package core_test

import (
	"slices"
	"testing"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
)

// A 3.1/3.1.1 client with Mosquitto's bridge bit (codec.BridgeBit) gets
// what an MQTT 5 bridge asks for with No Local and Retain As Published:
// its own messages do not come back, and a live retained message keeps
// its retain flag. Without the bit a 3.1.1 client gets both back as usual.
func TestBridgeBit(t *testing.T) {
	for _, v := range []byte{codec.V31, codec.V311} {
		for _, bridge := range []bool{true, false} {
			srv := newServer(t, core.Options{}, core.Config{})
			b := client(t, srv, v, "bridge", func(p *codec.Connect) { p.Bridge = bridge })
			b.Subscribe(1, "x/#")
			other := client(t, srv, codec.V5, "other")
			b.Send(&codec.Publish{Topic: []byte("x/mine"), QoS: 1, PacketID: 7, Payload: []byte("mine")})
			if bridge {
				b.ExpectAck(codec.PUBACK, 7)
				b.ExpectNothing(quiet)
			} else {
				// Delivery and PUBACK race: take both, in either order.
				var got []string
				for range 2 {
					switch p := b.Next().(type) {
					case *codec.Publish:
						got = append(got, string(p.Payload))
						b.Ack(p)
					case *codec.Ack:
					}
				}
				if len(got) != 1 || got[0] != "mine" {
					t.Fatalf("v%d without the bridge bit: got %q, want its own message back", v, got)
				}
			}
			other.PubRetained("x/r", "kept", 1)
			p := b.Recv(1)[0]
			if p.Retain != bridge {
				t.Errorf("v%d bridge=%v: live retained message has retain %v, want %v", v, bridge, p.Retain, bridge)
			}
			if info, _ := srv.Client("bridge"); len(info.Subscriptions) != 1 || info.Subscriptions[0].NoLocal != bridge ||
				info.Subscriptions[0].RetainAsPublished != bridge {
				t.Errorf("v%d bridge=%v: subscription %+v", v, bridge, info.Subscriptions)
			}
		}
	}
}

// ClientInfo.Dropped counts what one session did not get: here the QoS 0
// messages published while its persistent session was offline.
func TestClientDropped(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	s := client(t, srv, codec.V5, "s", persistent)
	s.Subscribe(1, "d")
	s.Close()
	waitFor(t, "the session to go offline", func() bool { info, _ := srv.Client("s"); return !info.Connected })
	p := client(t, srv, codec.V5, "p")
	for range 3 {
		p.Pub("d", "lost", 0)
	}
	p.Pub("d", "kept", 1)
	info, _ := srv.Client("s")
	if info.Dropped != 3 || info.Queued != 1 {
		t.Errorf("offline session: dropped %d, queued %d; want 3 and 1", info.Dropped, info.Queued)
	}
	if info, _ := srv.Client("p"); info.Dropped != 0 {
		t.Errorf("publisher: dropped %d, want 0", info.Dropped)
	}
}

// ClientInfo.AwaitingRelease lists the QoS 2 messages received from the
// client and not yet released: a bridge releases them when the session
// upstream that would have released them is gone.
func TestClientAwaitingRelease(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	c := client(t, srv, codec.V5, "c", persistent)
	for _, id := range []uint16{9, 3} {
		c.Send(&codec.Publish{Topic: []byte("t"), QoS: 2, PacketID: id})
		c.ExpectAck(codec.PUBREC, id)
	}
	if info, _ := srv.Client("c"); !slices.Equal(info.AwaitingRelease, []uint16{3, 9}) {
		t.Fatalf("awaiting release %v, want [3 9]", info.AwaitingRelease)
	}
	c.Send(&codec.Ack{Kind: codec.PUBREL, PacketID: 3})
	c.ExpectAck(codec.PUBCOMP, 3)
	if info, _ := srv.Client("c"); !slices.Equal(info.AwaitingRelease, []uint16{9}) {
		t.Fatalf("awaiting release %v after PUBREL 3, want [9]", info.AwaitingRelease)
	}
}

// A Mosquitto bridge's will on $SYS/broker/connection/… (its
// notifications): the bridge connects without it; any other client with a
// will on a broker topic is still refused.
func TestBridgeBitSysWill(t *testing.T) {
	srv := newServer(t, core.Options{}, core.Config{})
	watch := client(t, srv, codec.V5, "watch")
	watch.Subscribe(1, "$SYS/broker/connection/#")
	sysWill := func(bridge bool) func(*codec.Connect) {
		return func(p *codec.Connect) {
			p.Bridge = bridge
			p.WillFlag, p.WillQoS, p.WillRetain = true, 1, true
			p.WillTopic, p.WillPayload = []byte("$SYS/broker/connection/gw.cloud/state"), []byte("0")
		}
	}
	b := client(t, srv, codec.V311, "gw.cloud", sysWill(true))
	b.Close()
	watch.ExpectNothing(quiet)
	c := dial(t, srv, codec.V311)
	p := connectPacket(codec.V311, "plain")
	sysWill(false)(p)
	if ack := c.ConnectRC(p); ack.ReasonCode != codec.NotAuthorized {
		t.Errorf("CONNACK %s for a plain client's will on $SYS, want Not authorized", ack.ReasonCode)
	}
	if st := srv.Stats(); st.WillsRefused != 2 {
		t.Errorf("wills refused %d, want 2", st.WillsRefused)
	}
}
