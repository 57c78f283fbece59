package core

// This file handles wills that wait: delayed wills scheduled, recorded in
// the store so a restart keeps them, and published.

import (
	"time"

	"go.uber.org/zap"
)

// delayedWill is a session's will waiting for its delay; session.mu
// guards it.
type delayedWill struct {
	timer   *time.Timer // nil when no will waits
	publish func()      // publishes the will timer waits for; set with it
}

func (s *Server) storePutWill(id string, r *willRecord) {
	if err := s.store.PutWill(id, r.append(nil)); err != nil {
		s.storeError("store: saving a delayed will", err, zap.String("client_id", id))
	}
}

func (s *Server) storeDeleteWill(id string) {
	if err := s.store.DeleteWill(id); err != nil {
		s.storeError("store: deleting a will", err, zap.String("client_id", id))
	}
}

// scheduleWill makes w sess's will waiting for its delay, published
// after wait unless its client comes back first.
func (s *Server) scheduleWill(sess *session, w *willRecord, wait time.Duration) {
	var owner *string
	if w.OwnerKnown {
		owner = &w.Owner
	}
	sess.mu.Lock() // the timer may fire at once and clear will.timer
	sess.will.publish = func() { s.publishWill(w.Msg, w.Expiry, sess, owner) }
	sess.will.timer = time.AfterFunc(wait, sess.will.publish)
	sess.mu.Unlock()
}

// publishWill publishes a will; its Message Expiry Interval (expiry, 0 for
// none) starts now. owner is the user name whose rights it needs (nil:
// unknown, from an older store): the rules may have changed since CONNECT,
// so they are asked again.
func (s *Server) publishWill(m *Message, expiry time.Duration, sess *session, owner *string) {
	if sess != nil {
		sess.mu.Lock()
		online := sess.c != nil
		sess.will.timer = nil
		sess.mu.Unlock()
		s.storeDeleteWill(sess.id)
		if online {
			return // the client came back before the delay [MQTT-3.1.3-9]
		}
	}
	if owner != nil && s.authz != nil && !s.authz.CanWill(m.From, *owner, m.Topic) {
		s.stats.willRefused.Add(1)
		s.log.Info("will not published: the rules no longer allow it", zap.String("client_id", m.From),
			zap.String("username", *owner), zap.String("topic", m.Topic))
		return
	}
	if expiry > 0 {
		w := m.clone()
		w.Expires = time.Now().Add(expiry)
		m = w
	}
	s.publish(m)
}
