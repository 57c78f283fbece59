package core

import (
	"strings"
	"sync"
	"sync/atomic"
)

// Authorization at every use: a subscription is checked when it is made,
// and each delivery through it is checked again unless the Authorizer said
// that every topic its filter reaches is readable (ReadsAll). That answer
// is kept per subscription with the rules generation and the session owner
// it was given for, so the steady state costs two pointer loads and a
// compare; after a reload of the rules, or when a session changes hands,
// the first delivery asks again.

// subACL is a subscription's standing with the Authorizer. It is made when
// the subscription is (or restored) on a server with an Authorizer, and
// shared by the router's copies of the subscription.
type subACL struct {
	filter  string // as subscribed, $share/GROUP/ prefix included
	verdict atomic.Pointer[aclVerdict]
}

// aclVerdict is one ReadsAll answer and what it was given for.
type aclVerdict struct {
	gen   uint64
	owner *string // the session's owner pointer at the time (session.owner)
	all   bool
}

func newSubACL(srv *Server, filter string) *subACL {
	if srv.authz == nil {
		return nil
	}
	return &subACL{filter: filter}
}

// mayRead reports whether sess may receive a message on topic through the
// subscription a (nil: no Authorizer). gen is the Authorizer's Generation,
// loaded once per message by the caller.
func (s *Server) mayRead(sess *session, a *subACL, topic string, gen uint64) bool {
	if s.canRead(sess, a, topic, gen) {
		return true
	}
	sess.dropped(dropNotReadable)
	return false
}

// canRead is mayRead without counting a refusal: a shared group's
// strategy asks it of the members it passes over (router.pick).
func (s *Server) canRead(sess *session, a *subACL, topic string, gen uint64) bool {
	if a == nil {
		return true
	}
	owner := sess.owner.Load()
	if v := a.verdict.Load(); v != nil && v.gen == gen && v.owner == owner {
		if v.all {
			return true
		}
	} else {
		// Publishers racing here ask twice and store the same answer.
		all := s.authz.ReadsAll(sess.id, ownerName(owner), a.filter)
		a.verdict.Store(&aclVerdict{gen: gen, owner: owner, all: all})
		if all {
			return true
		}
	}
	return s.authz.CanRead(sess.id, ownerName(owner), topic)
}

// aclGeneration is the Authorizer's rules generation, 0 without one.
func (s *Server) aclGeneration() uint64 {
	if s.authz == nil {
		return 0
	}
	return s.authz.Generation()
}

// ownerName is the user name an owner pointer stands for ("" when unknown).
func ownerName(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// brokerTopic reports a topic that only the broker publishes to: $SYS, and
// $share, which names subscriptions, never messages. No client may
// publish, will or retain there, whatever the Authorizer says.
func brokerTopic(topic string) bool {
	return topic == "$SYS" || strings.HasPrefix(topic, "$SYS/") ||
		topic == "$share" || strings.HasPrefix(topic, "$share/")
}

// byteBudget is memory shared by the connections that have not logged in
// yet (Options.PreLoginMemory): their readers take what a large CONNECT or
// AUTH body needs from it (codec.Budget). Over it, a handshake is refused
// rather than waiting: a flood of slow, huge CONNECTs must not hold the
// memory, and a well-behaved client's CONNECT fits in its read buffer.
type byteBudget struct {
	mu   sync.Mutex
	used int64
	max  int64
}

// Take implements codec.Budget.
func (b *byteBudget) Take(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+int64(n) > b.max {
		return false
	}
	b.used += int64(n)
	return true
}

// Give implements codec.Budget.
func (b *byteBudget) Give(n int) {
	b.mu.Lock()
	b.used -= int64(n)
	b.mu.Unlock()
}

func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
