package core

import (
	"strings"
	"time"
	"unsafe"

	"go.uber.org/zap"

	"xmq/codec"
)

// unsafeBytes views an immutable string as bytes for encoding.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// unsafeString views bytes as a string for a lookup that does not keep it.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func topicLevels(t string) int { return strings.Count(t, "/") + 1 }

func (c *client) handlePublish(p *codec.Publish) bool {
	srv := c.srv
	srv.stats.msgsIn.Add(1)
	srv.stats.msgsInQoS[p.QoS].Add(1)
	if c.limiter.limited() {
		ok, wait := c.limiter.admit(len(p.Payload), p.QoS == 0, time.Now())
		if !ok {
			srv.stats.dropped(dropRateLimited)
			return true
		}
		if wait > 0 {
			time.Sleep(wait) // p still aliases the read buffer: nothing is read meanwhile
		}
	}
	topic := p.Topic
	if len(p.Props.SubscriptionIDs) > 0 {
		return c.protocolError("Subscription Identifier in a client's PUBLISH [MQTT-3.3.4-6]", codec.ProtocolError)
	}
	if c.version == codec.V5 && p.Props.Has(codec.PropTopicAlias) {
		a := p.Props.TopicAlias
		if int(a) >= len(c.inAliases) {
			return c.protocolError("topic alias above the maximum [MQTT-3.3.2-9]", codec.TopicAliasInvalid)
		}
		if len(topic) > 0 {
			if c.inAliases[a] != unsafeString(topic) {
				c.inAliases[a] = string(topic)
			}
		} else if c.inAliases[a] == "" {
			return c.protocolError("unknown topic alias [MQTT-3.3.4-4]", codec.ProtocolError)
		} else {
			topic = unsafeBytes(c.inAliases[a])
		}
	}
	if p.QoS == 2 {
		c.sess.mu.Lock()
		_, dup := c.sess.qos2in[p.PacketID]
		n := len(c.sess.qos2in)
		c.sess.mu.Unlock()
		if dup {
			// Received before and not yet released: acknowledge again but
			// deliver only once [MQTT-4.3.3-10].
			c.send(&codec.Ack{Kind: codec.PUBREC, PacketID: p.PacketID})
			return true
		}
		if c.version == codec.V5 && n >= int(srv.opts.ReceiveMaximum) {
			return c.protocolError("more unacknowledged QoS 2 messages than Receive Maximum [MQTT-3.3.4-7]", codec.ReceiveMaximumExceeded)
		}
	}
	if p.Retain && srv.opts.RetainDisabled {
		return c.protocolError("retain is not available", codec.RetainNotSupported)
	}
	rc := codec.Success
	switch {
	case topicLevels(unsafeString(topic)) > srv.opts.MaxTopicLevels:
		rc = codec.TopicNameInvalid
	case strings.HasPrefix(unsafeString(topic), "$SYS"):
		rc = codec.NotAuthorized // only the broker publishes $SYS
	case srv.authz != nil && !srv.authz.CanPublish(c.id, c.username, unsafeString(topic)):
		rc = codec.NotAuthorized
	}
	if rc != codec.Success {
		srv.stats.dropped(dropNotAuthorized)
		if c.version == codec.V5 && p.QoS == 0 && rc == codec.TopicNameInvalid {
			return c.protocolError("too many topic levels", rc)
		}
		if c.version != codec.V5 {
			rc = codec.Success // 3.1.1 acknowledges and discards [MQTT-3.3.5-2]
		}
	} else {
		if n := srv.publishPacket(p, topic, c); n == 0 && c.version == codec.V5 {
			rc = codec.NoMatchingSubscribers
		}
	}
	switch p.QoS {
	case 1:
		c.send(&codec.Ack{Kind: codec.PUBACK, PacketID: p.PacketID, ReasonCode: rc})
	case 2:
		if rc.IsError() {
			// A refused QoS 2 message ends its flow at PUBREC (4.3.3).
			c.send(&codec.Ack{Kind: codec.PUBREC, PacketID: p.PacketID, ReasonCode: rc})
			return true
		}
		c.sess.mu.Lock()
		c.sess.qos2in[p.PacketID] = struct{}{} // until PUBREL
		c.sess.mu.Unlock()
		c.send(&codec.Ack{Kind: codec.PUBREC, PacketID: p.PacketID, ReasonCode: rc})
	}
	return true
}

// publishPacket routes a client's PUBLISH. The topic is matched while it
// still aliases the read buffer; the message is copied (once) only when
// someone will receive it or it is retained.
func (s *Server) publishPacket(p *codec.Publish, topic []byte, from *client) int {
	matches := s.router.match(unsafeString(topic), from.id, from.matches[:0])
	if len(matches) == 0 && !p.Retain {
		return 0
	}
	msg := newMessage(p, topic, from.id)
	if msg.Retain {
		s.retain(msg)
	}
	n := s.deliver(msg, matches)
	clear(matches)
	from.matches = matches[:0]
	return n
}

// publish routes a message from the broker itself ($SYS, wills, the admin
// API) and returns how many deliveries it made.
func (s *Server) publish(msg *Message) int {
	if msg.Retain {
		s.retain(msg)
	}
	return s.deliver(msg, s.router.match(msg.Topic, msg.From, nil))
}

// retain keeps msg as its topic's retained message (or clears it).
func (s *Server) retain(msg *Message) {
	s.retained.set(msg)
	var err error
	if len(msg.Payload) == 0 {
		err = s.store.DeleteRetained(msg.Topic)
	} else {
		err = s.store.PutRetained(msg.Topic, appendMessageRecord(nil, msg, msg.QoS, true, 0))
	}
	if err != nil {
		s.log.Error("store: saving retained message", zap.String("topic", msg.Topic), zap.Error(err))
	}
}

// deliver enqueues msg for each match. MQTT 3.1.1 subscribers with
// overlapping subscriptions get one copy at the highest granted QoS
// [MQTT-3.3.5-1]; MQTT 5 subscribers get one copy per subscription, each
// with its subscription identifier.
func (s *Server) deliver(msg *Message, matches []match) int {
	n := 0
	for i := range matches {
		m := &matches[i]
		if m.s == nil {
			continue
		}
		if m.opts.noLocal && m.group == nil && msg.From == m.s.id {
			continue // [MQTT-3.8.3-3]
		}
		qos := min(msg.QoS, m.opts.qos)
		if !m.opts.v5 && m.group == nil && m.s.routes.Load() > 1 {
			for j := i + 1; j < len(matches); j++ {
				o := &matches[j]
				if o.s == m.s && o.group == nil {
					qos = max(qos, min(msg.QoS, o.opts.qos))
					o.s = nil
				}
			}
		}
		retain := msg.Retain && m.opts.rap // [MQTT-3.3.1-12] [MQTT-3.3.1-13]
		m.s.enqueue(delivery{msg: msg, qos: qos, retain: retain, subID: m.opts.subID, group: m.group})
		n++
	}
	s.stats.deliveries.Add(int64(n))
	return n
}
