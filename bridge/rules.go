package bridge

import (
	"strings"

	"github.com/xmq-io/xmq/codec"
)

// rule is a Rule with its two filters worked out.
type rule struct {
	Rule
	local, remote []byte // LocalPrefix+Topic, RemotePrefix+Topic
	// subID identifies the rule's subscriptions (its position in the
	// configuration, from 1), so a message that two overlapping rules
	// both deliver is forwarded once.
	subID uint32
}

// rules are a bridge's topic rules by direction, each in configuration order.
type rules struct {
	out, in []*rule
	byID    []*rule // index subID-1
}

func newRules(rs []Rule) *rules {
	t := &rules{}
	for i, r := range rs {
		x := &rule{Rule: r, local: []byte(r.LocalPrefix + r.Topic), remote: []byte(r.RemotePrefix + r.Topic), subID: uint32(i + 1)}
		t.byID = append(t.byID, x)
		if r.Direction == Out || r.Direction == Both {
			t.out = append(t.out, x)
		}
		if r.Direction == In || r.Direction == Both {
			t.in = append(t.in, x)
		}
	}
	return t
}

// outFilters are the local filters the bridge subscribes to; inFilters the
// remote ones.
func (t *rules) outFilters() []string { return filters(t.out, func(r *rule) []byte { return r.local }) }
func (t *rules) inFilters() []string  { return filters(t.in, func(r *rule) []byte { return r.remote }) }

func filters(rs []*rule, f func(*rule) []byte) []string {
	var out []string
	for _, r := range rs {
		out = append(out, string(f(r)))
	}
	return out
}

// pick chooses the rule that forwards a message on topic which arrived
// through the subscriptions subIDs (none when unknown): the first rule in
// configuration order whose filter (local for out, remote for in) matches.
// ok is false when the message is not to be forwarded: no rule matches
// (a subscription left from an older configuration), or this copy came
// through another matching rule's subscription, and the first rule's
// copy forwards it.
func pick(rs []*rule, byID []*rule, topic []byte, subIDs []uint32, filter func(*rule) []byte) (*rule, bool) {
	var first *rule
	for _, r := range rs {
		if codec.Match(filter(r), topic) {
			first = r
			break
		}
	}
	if first == nil || len(subIDs) == 0 {
		return first, first != nil
	}
	for _, id := range subIDs {
		if id == first.subID {
			return first, true
		}
	}
	for _, id := range subIDs {
		if id >= 1 && int(id) <= len(byID) {
			if r := byID[id-1]; codec.Match(filter(r), topic) {
				return nil, false // an overlapping rule's copy
			}
		}
	}
	return first, true // a subscription of an older configuration
}

// pickOut is pick for a message from the local broker.
func (t *rules) pickOut(topic []byte, subIDs []uint32) (*rule, bool) {
	return pick(t.out, t.byID, topic, subIDs, func(r *rule) []byte { return r.local })
}

// pickIn is pick for a message from the remote.
func (t *rules) pickIn(topic []byte, subIDs []uint32) (*rule, bool) {
	return pick(t.in, t.byID, topic, subIDs, func(r *rule) []byte { return r.remote })
}

// remoteTopic appends the remote topic of local topic to dst: the local
// prefix (which the rule's filter matched) replaced by the remote one.
func (r *rule) remoteTopic(dst, topic []byte) []byte {
	return append(append(dst, r.RemotePrefix...), topic[len(r.LocalPrefix):]...)
}

// localTopic appends the local topic of remote topic to dst.
func (r *rule) localTopic(dst, topic []byte) []byte {
	return append(append(dst, r.LocalPrefix...), topic[len(r.RemotePrefix):]...)
}

// sameMapping reports whether remote topics map straight to local ones, so
// no copy of the topic is needed.
func (r *rule) sameMapping() bool { return r.LocalPrefix == r.RemotePrefix }

// echoes reports whether some in rule would bring back a message sent out
// on remote topic: only then does origin tracking need to remember it.
func (t *rules) echoes(remoteTopic []byte) bool {
	for _, r := range t.in {
		if codec.Match(r.remote, remoteTopic) {
			return true
		}
	}
	return false
}

// loopable reports whether some out rule's remote filter overlaps some in
// rule's: a topic both sends out and subscribes to, so a remote without
// No Local or the bridge bit would send the bridge's messages back.
func (t *rules) loopable() bool {
	for _, o := range t.out {
		for _, i := range t.in {
			if overlap(string(o.remote), string(i.remote)) {
				return true
			}
		}
	}
	return false
}

// overlap reports whether some topic matches both filters.
func overlap(a, b string) bool {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; ; i++ {
		switch {
		case i < len(as) && as[i] == "#", i < len(bs) && bs[i] == "#":
			// '#' matches the parent level too [MQTT-4.7.1-2]: "a/#" and "a" overlap.
			return true
		case i == len(as) || i == len(bs):
			return len(as) == len(bs)
		case as[i] != "+" && bs[i] != "+" && as[i] != bs[i]:
			return false
		}
	}
}
