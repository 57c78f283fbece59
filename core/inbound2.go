package core

// This file keeps the inbound QoS 2 state: the packet ids awaiting PUBREL,
// and for a persistent session their numbering in the store
// (inboundRecord), so that a crash neither loses nor repeats a QoS 2
// PUBLISH [MQTT-4.3.3-10].

import (
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// inbound2 is a session's inbound QoS 2 state; session.mu guards it.
type inbound2 struct {
	ids  map[uint16]struct{} // packet ids received, awaiting PUBREL
	seq  uint64              // last inbound QoS 2 sequence (inboundRecord); starts at base
	base uint64              // where this session's numbering began (Server.newInBase)
	high uint64              // High of the stored inboundRecord
}

// inboundSeq numbers a QoS 2 PUBLISH from a persistent session (see
// inboundRecord); 0 when its state is not kept in the store.
func (s *session) inboundSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.persistent() {
		return 0
	}
	s.qos2in.seq++
	return s.qos2in.seq
}

// commitInbound records that the QoS 2 PUBLISH numbered seq has been
// routed, and its packet id as awaiting PUBREL when accepted, in memory
// and, for a persistent session (seq != 0), in the store.
func (s *session) commitInbound(id uint16, seq uint64, accepted bool) error {
	s.mu.Lock()
	if accepted {
		if s.qos2in.ids == nil {
			s.qos2in.ids = map[uint16]struct{}{}
		}
		s.qos2in.ids[id] = struct{}{}
	}
	if seq == 0 {
		s.mu.Unlock()
		return nil
	}
	rec := s.inboundLocked(seq)
	s.mu.Unlock()
	return s.srv.store.PutInbound(s.id, rec)
}

// releaseInbound handles PUBREL: it forgets id and reports whether id was
// awaiting it and whether the store was written (so PUBCOMP waits for a Sync).
func (s *session) releaseInbound(id uint16) (found, stored bool) {
	s.mu.Lock()
	_, found = s.qos2in.ids[id]
	if !found {
		s.mu.Unlock()
		return false, false
	}
	delete(s.qos2in.ids, id)
	if !s.persistent() {
		s.mu.Unlock()
		return true, false
	}
	rec := s.inboundLocked(0)
	s.mu.Unlock()
	if err := s.srv.store.PutInbound(s.id, rec); err != nil {
		s.srv.storeError("store: recording PUBREL", err, zap.String("client_id", s.id))
	}
	return true, true
}

// forgetInbound drops id from the inbound state in memory only: its flow
// was refused before the store promised anything.
func (s *session) forgetInbound(id uint16) {
	s.mu.Lock()
	delete(s.qos2in.ids, id)
	s.mu.Unlock()
}

// inboundLocked encodes the inbound state; high is the new High, or 0 to
// keep it. s.mu is held.
func (s *session) inboundLocked(high uint64) []byte {
	if high > s.qos2in.high {
		s.qos2in.high = high
	}
	r := inboundRecord{High: s.qos2in.high, IDs: make([]uint16, 0, len(s.qos2in.ids))}
	for id := range s.qos2in.ids {
		r.IDs = append(r.IDs, id)
	}
	slices.Sort(r.IDs)
	return r.append(nil)
}

// newInBase starts the inbound numbering of a new session above anything a
// former session with the same id can have left in the store. s.mu is held.
func (s *Server) newInBase() uint64 {
	return max(uint64(time.Now().UnixNano()), s.inBaseMax+1)
}

// commitInbound records a QoS 2 PUBLISH as received (commitInbound on the
// session) and turns a store failure into a refusal; false means the
// connection is closing.
func (c *client) commitInbound(id uint16, inSeq uint64, rc *codec.ReasonCode) bool {
	accepted := !rc.IsError()
	err := c.sess.commitInbound(id, inSeq, accepted)
	if inSeq != 0 {
		c.needSync = true
	}
	if err == nil {
		return true
	}
	c.srv.storeError("store: recording a QoS 2 PUBLISH", err, zap.String("client_id", c.id))
	if !accepted {
		return true
	}
	c.sess.forgetInbound(id)
	if c.version != codec.V5 {
		c.close(CloseStoreError, 0)
		return false
	}
	*rc = codec.UnspecifiedError
	if isNoSpace(err) {
		*rc = codec.QuotaExceeded
	}
	return true
}
