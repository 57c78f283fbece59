package codec_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/xmq-io/xmq/codec"
)

// numProps is every numeric property with the packet that may carry it (a
// CONNECT's will properties stand for the will), its width in bytes and
// whether it is a 0/1 flag.
var numProps = []struct {
	id    codec.PropID
	field func(*codec.Properties) uint32
	on    string // "connect", "will", "connack", "publish"
	max   uint32
}{
	{codec.PropPayloadFormat, func(p *codec.Properties) uint32 { return uint32(p.PayloadFormat) }, "publish", 1},
	{codec.PropMessageExpiry, func(p *codec.Properties) uint32 { return p.MessageExpiry }, "publish", math.MaxUint32},
	{codec.PropSessionExpiry, func(p *codec.Properties) uint32 { return p.SessionExpiry }, "connect", math.MaxUint32},
	{codec.PropServerKeepAlive, func(p *codec.Properties) uint32 { return uint32(p.ServerKeepAlive) }, "connack", math.MaxUint16},
	{codec.PropRequestProblemInfo, func(p *codec.Properties) uint32 { return uint32(p.RequestProblemInfo) }, "connect", 1},
	{codec.PropWillDelay, func(p *codec.Properties) uint32 { return p.WillDelay }, "will", math.MaxUint32},
	{codec.PropRequestResponseInfo, func(p *codec.Properties) uint32 { return uint32(p.RequestResponseInfo) }, "connect", 1},
	{codec.PropReceiveMaximum, func(p *codec.Properties) uint32 { return uint32(p.ReceiveMaximum) }, "connect", math.MaxUint16},
	{codec.PropTopicAliasMaximum, func(p *codec.Properties) uint32 { return uint32(p.TopicAliasMaximum) }, "connack", math.MaxUint16},
	{codec.PropTopicAlias, func(p *codec.Properties) uint32 { return uint32(p.TopicAlias) }, "publish", math.MaxUint16},
	{codec.PropMaximumQoS, func(p *codec.Properties) uint32 { return uint32(p.MaximumQoS) }, "connack", 1},
	{codec.PropRetainAvailable, func(p *codec.Properties) uint32 { return uint32(p.RetainAvailable) }, "connack", 1},
	{codec.PropMaximumPacketSize, func(p *codec.Properties) uint32 { return p.MaximumPacketSize }, "connect", math.MaxUint32},
	{codec.PropWildcardSubAvailable, func(p *codec.Properties) uint32 { return uint32(p.WildcardSubAvailable) }, "connack", 1},
	{codec.PropSubIDAvailable, func(p *codec.Properties) uint32 { return uint32(p.SubIDAvailable) }, "connack", 1},
	{codec.PropSharedSubAvailable, func(p *codec.Properties) uint32 { return uint32(p.SharedSubAvailable) }, "connack", 1},
}

func TestPropertiesNum(t *testing.T) {
	for _, np := range numProps {
		t.Run(fmt.Sprintf("0x%02x", byte(np.id)), func(t *testing.T) {
			var p codec.Properties
			if p.Has(np.id) {
				t.Errorf("Has on empty Properties: got true, want false")
			}
			if v, ok := p.Num(np.id); ok || v != 0 {
				t.Errorf("Num on empty Properties: got %d %v, want 0 false", v, ok)
			}
			for _, v := range []uint32{0, 1, np.max} {
				p.SetNum(np.id, v)
				if !p.Has(np.id) {
					t.Errorf("Has after SetNum(%d): got false, want true", v)
				}
				if got, ok := p.Num(np.id); !ok || got != v {
					t.Errorf("Num after SetNum(%d): got %d %v, want %d true", v, got, ok, v)
				}
				if got := np.field(&p); got != v {
					t.Errorf("field after SetNum(%d): got %d, want %d", v, got, v)
				}
				if p.IsZero() {
					t.Errorf("IsZero after SetNum(%d): got true, want false (presence is what is sent)", v)
				}
			}
			for _, other := range numProps {
				if other.id != np.id && p.Has(other.id) {
					t.Errorf("SetNum(0x%02x) also set 0x%02x", byte(np.id), byte(other.id))
				}
			}
			p.Clear(np.id)
			if p.Has(np.id) || !p.IsZero() {
				t.Errorf("after Clear: Has %v IsZero %v, want false true", p.Has(np.id), p.IsZero())
			}
			if _, ok := p.Num(np.id); ok {
				t.Errorf("Num after Clear: got ok, want not present")
			}
		})
	}
}

func TestPropertiesSetNumIgnoresOthers(t *testing.T) {
	for _, id := range []codec.PropID{codec.PropContentType, codec.PropResponseTopic, codec.PropCorrelationData,
		codec.PropSubscriptionID, codec.PropAuthMethod, codec.PropUserProperty, codec.PropReasonString, 0, 0x2B} {
		var p codec.Properties
		p.SetNum(id, 1)
		if p.Has(id) || !p.IsZero() {
			t.Errorf("SetNum(0x%02x) on a non-numeric property: Has %v IsZero %v, want false true", byte(id), p.Has(id), p.IsZero())
		}
		if _, ok := p.Num(id); ok {
			t.Errorf("Num(0x%02x): got ok for a non-numeric property", byte(id))
		}
	}
}

// TestPropertiesNumOnTheWire sends each numeric property, at zero, one and
// its maximum, in a packet that may carry it and reads it back: zero must
// survive, because presence rather than value decides what is sent.
func TestPropertiesNumOnTheWire(t *testing.T) {
	for _, np := range numProps {
		for _, v := range []uint32{0, 1, np.max} {
			if v == 0 && (np.id == codec.PropReceiveMaximum || np.id == codec.PropTopicAlias || np.id == codec.PropMaximumPacketSize) {
				continue // 0 is forbidden for these; see the fixtures
			}
			t.Run(fmt.Sprintf("0x%02x=%d", byte(np.id), v), func(t *testing.T) {
				var pkt codec.Packet
				var got func(codec.Packet) *codec.Properties
				switch np.on {
				case "connect", "will":
					c := &codec.Connect{ProtocolVersion: codec.V5, ClientID: []byte("c")}
					props := &c.Props
					if np.on == "will" {
						c.WillFlag, c.WillTopic = true, []byte("w")
						props = &c.WillProps
					}
					props.SetNum(np.id, v)
					pkt = c
					got = func(p codec.Packet) *codec.Properties {
						if np.on == "will" {
							return &p.(*codec.Connect).WillProps
						}
						return &p.(*codec.Connect).Props
					}
				case "connack":
					c := &codec.Connack{}
					c.Props.SetNum(np.id, v)
					pkt, got = c, func(p codec.Packet) *codec.Properties { return &p.(*codec.Connack).Props }
				case "publish":
					c := &codec.Publish{Topic: []byte("t")}
					c.Props.SetNum(np.id, v)
					pkt, got = c, func(p codec.Packet) *codec.Properties { return &p.(*codec.Publish).Props }
				}
				b := pkt.Append(nil, codec.V5)
				if n := pkt.Len(codec.V5); n != len(b) {
					t.Errorf("Len: got %d, want %d", n, len(b))
				}
				p, _, err := codec.Decode(b, codec.V5)
				checkErr(t, "Decode", err, nil)
				if err != nil {
					return
				}
				if val, ok := got(p).Num(np.id); !ok || val != v {
					t.Errorf("Num after the round trip: got %d %v, want %d true", val, ok, v)
				}
				checkPacket(t, "Decode", p, pkt)
			})
		}
	}
}

func TestPropertiesReset(t *testing.T) {
	p := codec.Properties{ContentType: []byte("x"), User: make([]codec.UserProperty, 3, 8), SubscriptionIDs: make([]uint32, 2, 4)}
	p.SetNum(codec.PropMaximumQoS, 0)
	p.Reset()
	if !p.IsZero() || p.Has(codec.PropMaximumQoS) || p.ContentType != nil || len(p.User) != 0 || len(p.SubscriptionIDs) != 0 {
		t.Errorf("Reset: got %+v, want empty", p)
	}
	if cap(p.User) != 8 || cap(p.SubscriptionIDs) != 4 {
		t.Errorf("Reset: got capacities %d %d, want 8 4 kept for reuse", cap(p.User), cap(p.SubscriptionIDs))
	}
}
