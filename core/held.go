package core

// This file releases held messages: a persistent session's QoS 2 PUBLISH
// is routed held (Message.held) until its receipt is recorded, then let go
// to its subscribers and other nodes.

import (
	"sync/atomic"
)

// newHeld returns a held gate for a message (Message.held).
func newHeld() *atomic.Bool {
	b := new(atomic.Bool)
	b.Store(true)
	return b
}

// releaseHeld lets msg be sent and wakes the writers of the sessions that got msg once it may be
// sent (Message.held).
func (s *Server) releaseHeld(msg *Message, matches []match) {
	msg.held.Store(false)
	if s.cluster != nil {
		s.forward(msg, matches) // other nodes get it when local subscribers may
	}
	for i := range matches {
		if sess := matches[i].s; sess != nil {
			sess.mu.Lock()
			c := sess.c
			sess.mu.Unlock()
			if c != nil {
				c.wake()
			}
		}
	}
}

// releaseHeld lets r.held go to its subscribers once its PUBLISH is recorded.
func (c *client) releaseHeld(msg *Message) {
	c.srv.releaseHeld(msg, c.matches)
	clear(c.matches)
	c.matches = c.matches[:0]
}
