package core

import (
	"github.com/xmq-io/xmq/codec"
)

func (c *client) handleSubscribe(p *codec.Subscribe) bool {
	srv := c.srv
	s := c.sess
	var subID uint32
	if len(p.Props.SubscriptionIDs) > 0 {
		subID = p.Props.SubscriptionIDs[0]
	}
	var scratch [8]error // most SUBSCRIBEs have a filter or two
	errs := p.Validate(scratch[:0])
	ack := &codec.Suback{PacketID: p.PacketID, ReasonCodes: make([]codec.ReasonCode, len(p.Subscriptions))}
	var streams []streamReq
	var announce uint64 // the latest cluster change announcing one of the filters
	for i := range p.Subscriptions {
		sub := &p.Subscriptions[i]
		if err := errs[i]; err != nil {
			if err == codec.ErrSharedNoLocal {
				return c.protocolError(err.Error(), codec.ProtocolError)
			}
			ack.ReasonCodes[i] = codec.TopicFilterInvalid
			continue
		}
		full := string(sub.Filter)
		group, filter, _, _ := codec.ParseShared(sub.Filter)
		if topicLevels(string(filter)) > srv.opts.MaxTopicLevels {
			ack.ReasonCodes[i] = codec.TopicFilterInvalid
			continue
		}
		if max := int(srv.live.maxSubs.Load()); max > 0 && c.subscriptionCount(full) >= max {
			ack.ReasonCodes[i] = codec.QuotaExceeded // 0x80 in 3.1.1
			continue
		}
		if srv.authz != nil && !srv.authz.CanSubscribe(c.id, c.username, full) {
			ack.ReasonCodes[i] = codec.NotAuthorized // [MQTT-3.9.3] 0x80 in 3.1.1
			continue
		}
		o := subOpts{qos: sub.QoS, noLocal: sub.NoLocal, rap: sub.RetainAsPublished, rh: sub.RetainHandling, subID: subID, v5: true}
		if c.version != codec.V5 {
			// A Mosquitto bridge (codec.BridgeBit) is not sent back what it
			// published and gets the retain flag as published, like Mosquitto
			// does for it.
			o = subOpts{qos: sub.QoS, noLocal: c.bridge, rap: c.bridge}
		}
		o.acl = newSubACL(srv, full)
		existed, a := srv.router.subscribe(s, string(filter), string(group), o)
		announce = max(announce, a)
		s.mu.Lock()
		if s.subs == nil {
			s.subs = map[string]storedSub{}
		}
		s.subs[full] = storedSub{Filter: full, QoS: o.qos, NoLocal: o.noLocal,
			RetainAsPublished: o.rap, RetainHandling: o.rh, SubscriptionID: o.subID, V5: o.v5}
		s.mu.Unlock()
		ack.ReasonCodes[i] = codec.ReasonCode(sub.QoS) // every QoS is granted as asked
		// Retained messages go to new non-shared subscriptions per Retain
		// Handling [MQTT-3.3.1-9] [MQTT-3.3.1-10] [MQTT-3.3.1-11]; shared
		// subscriptions get none (4.8.2).
		if group == nil {
			streams = append(streams, streamReq{filter: full, opts: o, send: o.rh == 0 || o.rh == 1 && !existed})
		}
	}
	// SUBACK goes once the subscriptions are on disk, after the held
	// acknowledgements, and before the retained messages it enables.
	c.needSync = srv.saveSession(s) || c.needSync
	if announce > 0 {
		// SUBACK once the other nodes know the filters (at once for
		// those announced long ago), so that what is published on them
		// after SUBACK comes here.
		srv.cluster.AwaitInterest(announce)
	}
	c.releaseAcksWait()
	c.reply(ack)
	if len(streams) > 0 {
		s.setStreams(c, streams) // after SUBACK, which the writer sends first
	}
	return true
}

func (c *client) handleUnsubscribe(p *codec.Unsubscribe) bool {
	s := c.sess
	ack := &codec.Unsuback{PacketID: p.PacketID, ReasonCodes: make([]codec.ReasonCode, len(p.Filters))}
	for i, f := range p.Filters {
		if codec.ValidFilter(f) != nil {
			ack.ReasonCodes[i] = codec.TopicFilterInvalid
			continue
		}
		group, filter, _, _ := codec.ParseShared(f)
		if !c.srv.router.unsubscribe(s, string(filter), string(group)) {
			ack.ReasonCodes[i] = codec.NoSubscriptionExisted
		}
		s.mu.Lock()
		delete(s.subs, string(f))
		if group == nil {
			s.stopStreamLocked(string(f))
		}
		s.mu.Unlock()
	}
	c.needSync = c.srv.saveSession(s) || c.needSync
	c.releaseAcksWait()
	c.reply(ack)
	return true
}

// subscriptionCount is how many subscriptions the session holds, not
// counting filter, which a new SUBSCRIBE would only replace.
func (c *client) subscriptionCount(filter string) int {
	s := c.sess
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.subs)
	if _, ok := s.subs[filter]; ok {
		n--
	}
	return n
}
