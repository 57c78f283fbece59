package core

import (
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/xmq-io/xmq/codec"
)

// Message is an application message as the broker keeps it: immutable once
// built, shared by every subscriber it is delivered to. Its codec.Message
// is what crosses to the cluster and comes back from other nodes.
type Message struct {
	codec.Message

	// inSeq numbers a persistent session's QoS 2 PUBLISH (inboundRecord);
	// 0 for every other message.
	inSeq uint64
	// held is set while the publisher has not yet recorded the QoS 2
	// PUBLISH as received: no writer sends the message before, so no
	// subscriber sees what a crash could still undo. nil when not needed.
	held *atomic.Bool
	// enc holds the message encoded once as an MQTT 3.1/3.1.1 QoS 0
	// PUBLISH, [0] without and [1] with the retain flag: every subscriber
	// of that variant gets the same bytes (client.encode).
	enc [2]atomic.Pointer[[]byte]
}

// clone returns a copy of m without its encoded bytes (enc), for a change
// to one of its fields.
func (m *Message) clone() *Message {
	return &Message{Message: m.Message, inSeq: m.inSeq, held: m.held}
}

// isHeld reports whether m may not be sent yet.
func (m *Message) isHeld() bool { return m.held != nil && m.held.Load() }

// newMessage copies a decoded PUBLISH (whose slices alias the read buffer)
// into a Message: topic and payload share one allocation.
func newMessage(p *codec.Publish, topic []byte, from string) *Message {
	buf := make([]byte, len(topic)+len(p.Payload))
	copy(buf, topic)
	copy(buf[len(topic):], p.Payload)
	m := &Message{Message: codec.Message{
		Topic:   unsafe.String(unsafe.SliceData(buf), len(topic)), // buf is never written again
		Payload: buf[len(topic):],
		QoS:     p.QoS,
		Retain:  p.Retain,
		From:    from,
	}}
	if len(p.Payload) == 0 {
		m.Payload = nil
	}
	if p.Props.Has(codec.PropMessageExpiry) {
		m.Expires = time.Now().Add(time.Duration(p.Props.MessageExpiry) * time.Second)
	}
	m.Props = forwardProps(&p.Props)
	return m
}

// forwardProps copies the properties a subscriber must receive unchanged
// [MQTT-3.3.2-16..20]; nil when there are none, the common case.
func forwardProps(in *codec.Properties) *codec.Properties {
	if !in.Has(codec.PropPayloadFormat) && len(in.ContentType) == 0 && len(in.ResponseTopic) == 0 &&
		len(in.CorrelationData) == 0 && len(in.User) == 0 {
		return nil
	}
	out := &codec.Properties{
		ContentType:     clone(in.ContentType),
		ResponseTopic:   clone(in.ResponseTopic),
		CorrelationData: clone(in.CorrelationData),
	}
	if in.Has(codec.PropPayloadFormat) {
		out.SetNum(codec.PropPayloadFormat, uint32(in.PayloadFormat))
	}
	if len(in.User) > 0 {
		out.User = make([]codec.UserProperty, len(in.User))
		for i, u := range in.User {
			out.User[i] = codec.UserProperty{Key: clone(u.Key), Value: clone(u.Value)}
		}
	}
	return out
}

func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// expired reports whether m may no longer be delivered.
func (m *Message) expired(now time.Time) bool {
	return !m.Expires.IsZero() && !now.Before(m.Expires)
}

// remainingExpiry is the Message Expiry Interval to forward, in whole
// seconds, rounded up so a message never expires early [MQTT-3.3.2-6]. A
// message resent after its expiry (its delivery had started) gets 0, not a
// negative value wrapped around to about 136 years.
func (m *Message) remainingExpiry(now time.Time) uint32 {
	d := max(m.Expires.Sub(now), 0)
	return uint32((d + time.Second - 1) / time.Second)
}
