package core

import (
	"errors"
	"runtime"
	"strings"
	"time"
	"unsafe"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// unsafeBytes views an immutable string as bytes for encoding.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// unsafeString views bytes as a string for a lookup that does not keep it.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func topicLevels(t string) int { return strings.Count(t, "/") + 1 }

// handlePublish takes a client's PUBLISH through its stages, each a step
// that may end it: admit (count, rate limit), the topic (alias), the
// inbound QoS 2 check (duplicate, Receive Maximum), retain, authorize,
// route (with the store, the QoS 2 receipt and the held message's
// release) or refuse, and acknowledge. False ends the connection.
//
// It is the hot path: what every PUBLISH does (counting, the checks that
// find nothing to do) stays inline here, and a stage is called only when
// it has work, so a plain QoS 0 PUBLISH makes three calls more than one
// function would (authorizePublish, route, routedCode).
func (c *client) handlePublish(p *codec.Publish) bool {
	srv := c.srv
	c.msgsIn.Add(1)
	srv.stats.msgsInQoS[p.QoS].Add(1)
	srv.stats.pubBytesIn.Add(int64(len(p.Payload)))
	if c.limiter.limited() && !c.rateLimit(p) {
		return true // dropped: over the rate limit
	}
	topic, ok := p.Topic, true
	if len(p.Props.SubscriptionIDs) > 0 || p.Props.Has(codec.PropTopicAlias) {
		if topic, ok = c.publishTopic(p); !ok {
			return false
		}
	}
	if p.QoS == 2 {
		if again, ok := c.checkInbound2(p); again || !ok {
			return ok
		}
	}
	if p.Retain && srv.opts.RetainDisabled {
		return c.protocolError("retain is not available", codec.RetainNotSupported)
	}
	rc := c.authorizePublish(topic)
	routed := rc == codec.Success
	if routed {
		var lagging bool
		rc, lagging, ok = c.route(p, topic)
		if lagging {
			// Subscribers are not keeping up: let their writers run before
			// this reader takes more from its publisher. On a busy core
			// the reader would otherwise keep its time slice and spend it
			// queueing messages that only push older ones out.
			defer runtime.Gosched()
		}
	} else {
		rc, ok = c.refusedCode(p, rc)
	}
	if !ok {
		return false
	}
	if p.QoS == 0 {
		return true
	}
	return c.ackPublish(p, rc, routed)
}

// route routes an authorized PUBLISH (publishPacket) and returns the code
// that acknowledges it, and whether a subscriber lagged; false means the
// connection is closing. A QoS 2 PUBLISH is recorded as received before
// its message is released to its subscribers, and both before PUBREC.
func (c *client) route(p *codec.Publish, topic []byte) (rc codec.ReasonCode, lagging, ok bool) {
	var inSeq uint64 // numbers a persistent session's QoS 2 PUBLISH (inboundRecord)
	if p.QoS == 2 {
		inSeq = c.sess.inboundSeq()
	}
	r := c.srv.publishPacket(p, topic, c, inSeq)
	c.needSync = c.needSync || r.stored
	if rc, ok = c.routedCode(p, &r); !ok {
		return rc, r.lagging, false
	}
	if p.QoS == 2 && !c.commitInbound(p.PacketID, inSeq, &rc) {
		return rc, r.lagging, false
	}
	if r.held != nil {
		c.releaseHeld(r.held)
	}
	return rc, r.lagging, true
}

// rateLimit admits a PUBLISH under the connection's rate limit, after
// the wait it imposes; false drops it.
func (c *client) rateLimit(p *codec.Publish) bool {
	ok, wait := c.limiter.admit(len(p.Payload), p.QoS == 0, time.Now())
	if !ok {
		c.srv.stats.dropped(dropRateLimited)
		return false
	}
	if wait > 0 {
		if len(c.dirty) > 0 {
			c.flushDirty() // the wait must not hold this burst's deliveries back
		}
		time.Sleep(wait) // p still aliases the read buffer: nothing is read meanwhile
	}
	return true
}

// publishTopic is the topic of a PUBLISH with a Topic Alias (resolved
// or recorded) or a Subscription Identifier (refused); false means the
// connection is closing.
func (c *client) publishTopic(p *codec.Publish) ([]byte, bool) {
	topic := p.Topic
	if len(p.Props.SubscriptionIDs) > 0 {
		return nil, c.protocolError("Subscription Identifier in a client's PUBLISH [MQTT-3.3.4-6]", codec.ProtocolError)
	}
	if c.version == codec.V5 && p.Props.Has(codec.PropTopicAlias) {
		a, aliases := p.Props.TopicAlias, c.rare().inAliases
		if int(a) >= len(aliases) {
			return nil, c.protocolError("topic alias above the maximum [MQTT-3.3.2-9]", codec.TopicAliasInvalid)
		}
		if len(topic) > 0 {
			if aliases[a] != unsafeString(topic) {
				aliases[a] = string(topic)
			}
		} else if aliases[a] == "" {
			return nil, c.protocolError("unknown topic alias [MQTT-3.3.4-4]", codec.ProtocolError)
		} else {
			topic = unsafeBytes(aliases[a])
		}
	}
	return topic, true
}

// checkInbound2 checks a QoS 2 PUBLISH against the packet ids awaiting
// PUBREL: again reports one received before (acknowledged again, not
// routed); false means the connection is closing (Receive Maximum).
func (c *client) checkInbound2(p *codec.Publish) (again, ok bool) {
	c.sess.mu.Lock()
	_, dup := c.sess.qos2in.ids[p.PacketID]
	n := len(c.sess.qos2in.ids)
	c.sess.mu.Unlock()
	if dup {
		// Received before and not yet released: acknowledge again but
		// deliver only once [MQTT-4.3.3-10].
		c.ackAfterSync(codec.PUBREC, p.PacketID, codec.Success)
		return true, true
	}
	if c.version == codec.V5 && n >= int(c.srv.opts.ReceiveMaximum) {
		return false, c.protocolError("more unacknowledged QoS 2 messages than Receive Maximum [MQTT-3.3.4-7]", codec.ReceiveMaximumExceeded)
	}
	return false, true
}

// authorizePublish is Success when the client may publish to topic, else
// the reason it may not.
func (c *client) authorizePublish(topic []byte) codec.ReasonCode {
	srv := c.srv
	switch {
	case len(topic) >= srv.opts.MaxTopicLevels && topicLevels(unsafeString(topic)) > srv.opts.MaxTopicLevels:
		// A topic of n bytes has at most n+1 levels: short ones (nearly
		// all, with the default of 128) are not counted.
		return codec.TopicNameInvalid
	case brokerTopic(unsafeString(topic)):
		return codec.NotAuthorized // only the broker publishes $SYS
	case srv.authz != nil && !srv.authz.CanPublish(c.id, c.username, unsafeString(topic)):
		return codec.NotAuthorized
	}
	return codec.Success
}

// refusedCode counts a PUBLISH refused by authorizePublish (rc) and
// returns the code its acknowledgement carries; false means the
// connection is closing.
func (c *client) refusedCode(p *codec.Publish, rc codec.ReasonCode) (codec.ReasonCode, bool) {
	c.srv.stats.dropped(dropNotAuthorized)
	if c.version == codec.V5 && p.QoS == 0 && rc == codec.TopicNameInvalid {
		return rc, c.protocolError("too many topic levels", rc)
	}
	if c.version != codec.V5 {
		rc = codec.Success // 3.1.1 acknowledges and discards [MQTT-3.3.5-2]
	}
	return rc, true
}

// routedCode is the code acknowledging a PUBLISH that routing did r for;
// false means the connection is closing: an MQTT 3 publisher whose
// message the store could not keep.
func (c *client) routedCode(p *codec.Publish, r *routed) (codec.ReasonCode, bool) {
	switch {
	case (r.failed || r.noSpace) && p.QoS > 0 && c.version != codec.V5:
		// The store could not keep the message. 3.1.1 has no code to
		// refuse with: no acknowledgement, so the publisher sends the
		// message again.
		if r.held != nil {
			c.releaseHeld(r.held)
		}
		c.log(zap.WarnLevel, "closing connection: the store failed to record a message", zap.String("client_id", c.id))
		c.close(CloseStoreError, 0)
		return 0, false
	case r.failed:
		return codec.UnspecifiedError, true
	case (r.refused || r.noSpace || r.notRetained) && c.version == codec.V5:
		return codec.QuotaExceeded, true // a full session queue, a full store, or the retained budget spent
	case r.n == 0 && c.version == codec.V5 && c.srv.cluster == nil:
		// In a cluster, other nodes' subscribers are not known here.
		return codec.NoMatchingSubscribers, true
	}
	return codec.Success, true
}

// ackPublish acknowledges a QoS 1 or 2 PUBLISH with rc once the store
// holds what it promises (ackAfterSync). A QoS 2 PUBLISH that was not
// routed (refused before) is recorded first; a routed one was by route.
// False means the connection is closing.
func (c *client) ackPublish(p *codec.Publish, rc codec.ReasonCode, routed bool) bool {
	switch p.QoS {
	case 1:
		c.ackAfterSync(codec.PUBACK, p.PacketID, rc)
	case 2:
		if !routed && !c.commitInbound(p.PacketID, 0, &rc) { // refused before routing
			return false
		}
		// A refused QoS 2 message ends its flow at PUBREC (4.3.3);
		// an accepted one is awaited by PUBREL.
		c.ackAfterSync(codec.PUBREC, p.PacketID, rc)
	}
	return true
}

// routed is what routing a PUBLISH did.
type routed struct {
	n           int      // deliveries made
	stored      bool     // a delivery or the retained message was written to the store
	refused     bool     // a QoS 1/2 delivery was refused: full session queue
	noSpace     bool     // a QoS 1/2 delivery or the retained message was refused: full store
	notRetained bool     // the retained budget is spent: not retained, delivered all the same
	failed      bool     // the store failed to record a delivery
	held        *Message // the message, while held for commitInbound (Message.held)
	dropped     int      // deliveries dropped or refused when queued (topic metrics)
	lagging     bool     // a subscriber's queue was full (enqLagging)
}

func (r *routed) add(res enqueueResult) {
	if res&enqLagging != 0 {
		r.lagging = true
		res &^= enqLagging
	}
	switch res {
	case enqStored:
		r.stored = true
	case enqDropped:
		r.dropped++
	case enqRefused:
		r.refused = true
		r.dropped++
	case enqNoSpace:
		r.noSpace = true
		r.dropped++
	case enqStoreErr:
		r.failed = true
		r.dropped++
	}
}

// publishPacket routes a client's PUBLISH. The topic is matched while it
// still aliases the read buffer; the message is copied (once) only when
// someone will receive it or it is retained. With inSeq set the message is
// held (Message.held) and the matches kept in from.matches until the
// caller has recorded the PUBLISH and calls releaseHeld.
func (s *Server) publishPacket(p *codec.Publish, topic []byte, from *client, inSeq uint64) routed {
	matches := s.router.match(unsafeString(topic), from.id, from.matches[:0])
	from.matches = matches[:0]
	if len(matches) == 0 && !p.Retain && s.cluster == nil {
		s.topicMetrics.count(unsafeString(topic), p.QoS, 0, 1) // no subscriber: dropped
		return routed{}
	}
	msg := newMessage(p, topic, from.id)
	if inSeq != 0 {
		msg.inSeq, msg.held = inSeq, newHeld()
	}
	var r routed
	if msg.Retain {
		switch err := s.retain(msg, from); {
		case errors.Is(err, errRetainedBudget):
			r.notRetained = true
		case err != nil:
			r.noSpace = isNoSpace(err)
			r.failed = !r.noSpace
		case s.persistRetained(msg.Topic):
			r.stored = true
		}
	}
	s.deliver(msg, matches, &r, from)
	s.countTopic(msg, &r)
	if msg.held != nil {
		r.held = msg
		from.matches = matches
		return r // forwarded when released (Server.releaseHeld)
	}
	if s.cluster != nil {
		s.forward(msg, matches)
	}
	clear(matches)
	return r
}

// countTopic counts msg, routed as r, in the topic metrics it matches.
// A message no subscriber here received is dropped, unless other nodes
// may have subscribers (they count their own deliveries).
func (s *Server) countTopic(msg *Message, r *routed) {
	dropped := r.dropped
	if r.n == 0 && s.cluster == nil {
		dropped = 1
	}
	s.topicMetrics.count(msg.Topic, msg.QoS, r.n-r.dropped, dropped)
}

// publish routes a message from the broker itself ($SYS, wills, the admin
// API) and returns how many deliveries it made.
func (s *Server) publish(msg *Message) int {
	if msg.Retain {
		_ = s.retain(msg, nil) // logged there
	}
	var r routed
	matches := s.router.match(msg.Topic, msg.From, nil)
	s.deliver(msg, matches, &r, nil)
	s.countTopic(msg, &r)
	if s.cluster != nil {
		s.forward(msg, matches)
	}
	return r.n
}

// persistRetained reports whether a topic's retained message goes to the
// store: $SYS topics are the broker's own and republished at start.
func (s *Server) persistRetained(topic string) bool { return !strings.HasPrefix(topic, "$SYS/") }

// errRetainedBudget is a retained message not kept: the retained budget
// (Options.MaxRetainedMessages, MaxRetainedBytes) is spent.
var errRetainedBudget = errors.New("core: the retained messages budget is spent")

// retain keeps msg as its topic's retained message (or clears it), here
// and cluster-wide. A message from a client (or its will) that does not
// fit the retained budget is not kept: errRetainedBudget, logged and
// counted. from is the publishing connection, nil for the broker or a
// will. The broker's own $SYS topics are always kept.
func (s *Server) retain(msg *Message, from *client) error {
	var b retainedBudget
	if !ownTopic(msg.Topic) {
		b = retainedBudget{msgs: int(s.live.maxRetained.Load()), bytes: s.live.maxRetainedBytes.Load()}
	}
	err := s.retainHere(msg, b)
	if errors.Is(err, errRetainedBudget) {
		s.stats.retainedRefused.Add(1)
		if rarely(&s.warned.retained) {
			n, bytes := s.retained.clientCounts()
			fields := []zap.Field{zap.String("client_id", msg.From), zap.String("topic", msg.Topic),
				zap.Int64("size", msg.size()), zap.Int("retained", n), zap.Int64("retained_bytes", bytes),
				zap.Int("max_retained_messages", b.msgs), zap.Int64("max_retained_bytes", b.bytes)}
			if from != nil {
				fields = append(fields, zap.String("remote", from.remoteAddr()))
			}
			s.log.Warn("retained message not kept (delivered all the same): the retained budget is spent", fields...)
		}
		return err
	}
	if s.cluster != nil && s.persistRetained(msg.Topic) {
		s.cluster.Retain(msg.Message)
	}
	return err
}

// retainHere keeps msg as its topic's retained message on this node only,
// within b (no bound: always).
func (s *Server) retainHere(msg *Message, b retainedBudget) error {
	stored := time.Now().UnixMilli()
	if !s.retained.setWithin(msg, stored, b) {
		return errRetainedBudget
	}
	if !s.persistRetained(msg.Topic) {
		return nil
	}
	var err error
	if len(msg.Payload) == 0 {
		err = s.store.DeleteRetained(msg.Topic)
	} else {
		err = s.store.PutRetained(msg.Topic, appendRetainedRecord(nil, msg, stored))
	}
	if err != nil {
		s.storeError("store: saving retained message", err, zap.String("topic", msg.Topic))
	}
	return err
}

// deliver enqueues msg for each match. MQTT 3.1.1 subscribers with
// overlapping subscriptions get one copy at the highest granted QoS
// [MQTT-3.3.5-1]; MQTT 5 subscribers get one copy per subscription, each
// with its subscription identifier.
func (s *Server) deliver(msg *Message, matches []match, r *routed, from *client) {
	n := 0
	gen := s.aclGeneration()
	for i := range matches {
		d, ok := s.deliveryFor(msg, matches, i, gen)
		if !ok {
			continue
		}
		r.add(matches[i].s.enqueueFrom(d, from))
		n++
	}
	s.stats.deliveries.Add(int64(n))
	r.n += n
}

// deliveryFor is the delivery of msg that matches[i] makes, false for
// none: No Local, no read right now, or an MQTT 3 subscriber's other
// matching subscription, which takes this one's place (the highest QoS of
// them, once: the other entries' sessions are cleared). gen is the ACL
// generation the rights are checked against.
func (s *Server) deliveryFor(msg *Message, matches []match, i int, gen uint64) (delivery, bool) {
	m := &matches[i]
	if m.s == nil {
		return delivery{}, false
	}
	if m.opts.noLocal && m.group == nil && msg.From == m.s.id {
		return delivery{}, false // [MQTT-3.8.3-3]
	}
	if !s.mayRead(m.s, m.opts.acl, msg.Topic, gen) {
		return delivery{}, false // the subscriber may not read it now
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
	return delivery{msg: msg, qos: qos, retain: retain, subID: m.opts.subID, group: m.group}, true
}
