package core

// This file writes the store: session, message and delivery records, and
// logs what the store refuses (at most once a second: a full disk fails
// every write).

import (
	"errors"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// isNoSpace reports a store refusing a record for lack of space.
func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// warnClocks hold when each throttled warning was last logged (Unix
// nanoseconds, for rarely): a flood of one cause logs once a second.
type warnClocks struct {
	store    atomic.Int64 // a store error
	preLogin atomic.Int64 // the pre-login budget spent
	retained atomic.Int64 // a retained message refused by the budget
	cut      atomic.Int64 // a retained stream cut (stream.go)
	tooLarge atomic.Int64 // a delivery over a client's Maximum Packet Size
}

// storeError logs a store failure, at most once a second: a full disk
// fails every write.
func (s *Server) storeError(msg string, err error, fields ...zap.Field) {
	if rarely(&s.warned.store) {
		s.log.Error(msg, append(fields, zap.Error(err))...)
	}
}

// warnRarely logs a warning at most once a second per last: a flood of one
// cause must not flood the log.
func (s *Server) warnRarely(last *atomic.Int64, msg string, fields ...zap.Field) {
	if rarely(last) {
		s.log.Warn(msg, fields...)
	}
}

// rarely reports whether a second has passed since it last reported true
// for last (Unix nanoseconds), and takes the turn.
func rarely(last *atomic.Int64) bool {
	now := time.Now().UnixNano()
	l := last.Load()
	return now-l >= int64(time.Second) && last.CompareAndSwap(l, now)
}

// saveSession writes a persistent session's record and reports whether it did.
func (s *Server) saveSession(sess *session) bool {
	sess.mu.Lock()
	if !sess.persistent() {
		sess.mu.Unlock()
		return false
	}
	rec := sess.recordLocked(0)
	sess.mu.Unlock()
	s.storeSave(sess.id, rec)
	return true
}

func (s *Server) storeSave(id string, rec *sessionRecord) {
	if err := s.store.PutSession(id, rec.append(nil)); err != nil {
		s.storeError("store: saving session", err, zap.String("client_id", id))
	}
}

func (s *Server) storeDelete(id string) {
	if err := s.store.DeleteSession(id); err != nil {
		s.storeError("store: deleting session", err, zap.String("client_id", id))
	}
}

func (s *Server) storeAdd(id string, d delivery) error {
	rec := appendMessageRecord(nil, d.msg, d.qos, d.retain, d.subID)
	err := s.store.PutMessage(id, d.seq, rec)
	if err != nil {
		s.storeError("store: adding message", err, zap.String("client_id", id))
	}
	return err
}

// storeUpdate records a QoS 2 delivery's packet id and PUBREL state, so a
// restart resends it with the same id, or only its PUBREL.
func (s *Server) storeUpdate(id string, m *outMsg) {
	rec := appendDeliveryRecord(nil, m.msg, m.qos, m.retain, m.subID, m.id, m.pubrel)
	if err := s.store.UpdateMessage(id, m.seq, rec); err != nil {
		s.storeError("store: updating message", err, zap.String("client_id", id))
	}
}

func (s *Server) storeAck(id string, seq uint64) {
	if err := s.store.DeleteMessage(id, seq); err != nil {
		s.storeError("store: deleting message", err, zap.String("client_id", id))
	}
}
