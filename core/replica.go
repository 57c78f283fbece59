package core

import (
	"encoding/binary"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// This file serves a cluster whose node died: its persistent sessions
// come back on another node from the records its store was given (which
// the cluster may replicate, being the Store's caller's wrapper), and a
// node that comes back after its clients moved on hands their stale
// sessions' messages to where the clients are now.

// RestoreSession installs clientID's persistent session, from the records
// core wrote to a store for it on another node (which died), as an
// offline session here: session is its session record, inbound its
// inbound QoS 2 record (nil for none), msgs its message records in
// delivery order, seqs their store sequences (which say, against the
// session record, which may have been sent: those go with DUP), will its
// pending will record (nil for none). With withWill the will is
// scheduled, its delay running from now when its client was connected
// when the node died, as a restart would; without, the client is back and
// the will is dropped [MQTT-3.1.3-9]. An offline session of clientID here
// is replaced; one whose client is connected here is not
// (errSessionOnline).
func (s *Server) RestoreSession(clientID string, session, inbound []byte, seqs []uint64, msgs [][]byte, will []byte, withWill bool) error {
	var sr sessionRecord
	if err := sr.decode(session); err != nil {
		return err
	}
	var in inboundRecord
	if inbound != nil {
		if err := in.decode(inbound); err != nil {
			return err
		}
	}
	var recs []byte
	n := 0
	for i, rec := range msgs {
		sm, err := decodeDeliveryRecord(rec)
		if err != nil {
			s.log.Warn("a replicated message record does not decode: skipped", zap.String("client_id", clientID), zap.Error(err))
			continue
		}
		var flags byte
		if sr.DisconnectedAt == 0 || seqs[i] <= sr.SentSeq {
			flags |= 1 // may have been sent (see restorer.message)
		}
		if sm.id != 0 && sm.qos == 2 {
			flags |= 2
		}
		recs = append(recs, flags)
		recs = appendString(recs, string(rec))
		n++
	}
	if err := s.ImportSession(clientID, restoredExport(session, &in, n, recs), true); err != nil {
		return err
	}
	if !withWill || will == nil {
		return nil
	}
	var w willRecord
	if err := w.decode(will); err != nil {
		s.log.Warn("a replicated will does not decode: not published", zap.String("client_id", clientID), zap.Error(err))
		return nil
	}
	now := time.Now()
	at := w.At
	if at.IsZero() {
		at = now.Add(w.Delay) // its client was connected when its node died
	}
	s.mu.Lock()
	sess := s.sessions[clientID]
	s.mu.Unlock()
	if sess == nil {
		return nil
	}
	sess.mu.Lock()
	free := sess.c == nil && sess.will.timer == nil
	sess.mu.Unlock()
	if !free {
		return nil // its client is back already
	}
	s.scheduleWill(sess, &w, max(at.Sub(now), 0))
	s.storePutWill(clientID, &willRecord{At: at, Expiry: w.Expiry, Msg: w.Msg, Delay: w.Delay, Owner: w.Owner, OwnerKnown: w.OwnerKnown})
	if err := s.syncStore(); err != nil {
		s.storeError("store: sync of a restored will failed", err, zap.String("client_id", clientID))
	}
	return nil
}

// restoredExport is the encoding of ExportSession (exportLocked) of a
// session built from its records: the session record, the inbound
// record, then n messages as recs holds them.
func restoredExport(session []byte, in *inboundRecord, n int, recs []byte) []byte {
	b := []byte{recordVersion}
	b = appendString(b, string(session))
	b = appendString(b, string(in.append(nil)))
	b = binary.AppendUvarint(b, uint64(n))
	return append(b, recs...)
}

// PendSession installs clientID's persistent session from its session
// record written on another node (which died) as a pending session: its
// subscriptions are in the router (and announced to the cluster), and it
// queues what comes for it until RestoreSession, with the rest of the
// records, completes it and puts them before. It returns the filters of
// its plain subscriptions: the cluster asks the other nodes for what they
// published to those while no node held the session (ReplayPending). An
// offline session of clientID here is replaced; one whose client is
// connected here is not (errSessionOnline).
func (s *Server) PendSession(clientID string, session []byte) ([]string, error) {
	var sr sessionRecord
	if err := sr.decode(session); err != nil {
		return nil, err
	}
	if err := s.ImportSession(clientID, restoredExport(session, &inboundRecord{}, 0, nil), false); err != nil {
		return nil, err
	}
	s.mu.Lock()
	sess := s.sessions[clientID]
	s.mu.Unlock()
	if sess != nil {
		sess.mu.Lock()
		// Its start on the dead node, not here: what was published for it
		// after that and before now is what the replay is for.
		sess.began = sr.InBase
		sess.mu.Unlock()
	}
	var filters []string
	for _, sub := range sr.Subs {
		if group, _, _, err := codec.ParseShared([]byte(sub.Filter)); err == nil && group == nil {
			filters = append(filters, sub.Filter)
		}
	}
	return filters, nil
}

// ReplayPending routes a message published on another node while no node
// held the sessions of clientIDs (their node had died) to those of them
// that are pending (PendSession), with the rules of a PUBLISH for their
// plain subscriptions (QoS downgrade, retain as published, No Local,
// subscription identifiers, read rights): after the messages replayed
// before, before those they queued meanwhile, and with DUP, since the dead
// node may have sent it. QoS 0 deliveries are not kept (the sessions are
// offline), nor those to a session that began on the dead node after
// published (see replay). m becomes the message. It returns the number of
// deliveries made.
func (s *Server) ReplayPending(clientIDs map[string]bool, m codec.Message, published time.Time) int {
	return s.replay(m, published, func(sess *session, d delivery) bool {
		if !clientIDs[sess.id] || d.qos == 0 {
			return false
		}
		sess.mu.Lock()
		defer sess.mu.Unlock()
		if !sess.pending || sess.c != nil {
			return false
		}
		// Not stored yet: RestoreSession writes the whole queue again.
		sess.queue = slices.Insert(sess.queue, sess.qhead+int(sess.replayed), d)
		sess.replayed++
		return true
	})
}

// DeliverReplayed routes a message published on another node while this
// node was down, which a node that comes back fetches for its persistent
// sessions (cluster replay), to this node's plain subscribers, with the
// rules of a PUBLISH and with DUP: this node may have had it before it
// went down; a session that began here after published takes none (see
// replay). m becomes the message. It returns the number of deliveries
// made.
func (s *Server) DeliverReplayed(m codec.Message, published time.Time) int {
	return s.replay(m, published, func(sess *session, d delivery) bool {
		sess.enqueue(d)
		return true
	})
}

// replay routes a replayed message (m becomes it) to this
// node's plain subscriptions with the rules of a PUBLISH, each delivery
// with DUP for QoS 1/2, through put, which reports whether it took it;
// a group's messages went to its members elsewhere. A session that began
// after published (zero: not known) is skipped: the message was not for
// it (it did not exist, or was started clean since), or went to the node
// it was on then, from which it moved with what it held. The cluster's
// bounds of a replay (the dead node's marks, the ring's window) hold for
// all the sessions at once and may reach back further than one session.
// It returns the number of deliveries taken.
func (s *Server) replay(m codec.Message, published time.Time, put func(*session, delivery) bool) int {
	msg := &Message{Message: m}
	msg.QoS = min(msg.QoS, 2)
	if msg.expired(time.Now()) {
		return 0
	}
	var at uint64 // 0: not known
	if !published.IsZero() {
		at = uint64(published.UnixNano())
	}
	matches := s.router.match(m.Topic, m.From, nil)
	gen := s.aclGeneration()
	n := 0
	for i := range matches {
		if matches[i].s == nil || matches[i].group != nil {
			continue
		}
		sess := matches[i].s
		if at != 0 {
			sess.mu.Lock()
			began := sess.beganLocked()
			sess.mu.Unlock()
			if at < began {
				continue
			}
		}
		d, ok := s.deliveryFor(msg, matches, i, gen)
		if !ok {
			continue
		}
		d.dup = d.qos > 0
		if put(sess, d) {
			n++
		}
	}
	s.stats.deliveries.Add(int64(n))
	return n
}

// StaleSessions returns the client ids of the persistent sessions here
// whose client is not connected, for a node that comes back to ask the
// cluster which of them moved on meanwhile.
func (s *Server) StaleSessions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, sess := range s.sessions {
		sess.mu.Lock()
		if sess.persistent() && sess.c == nil && !sess.pending {
			ids = append(ids, id)
		}
		sess.mu.Unlock()
	}
	return ids
}

// MergeSession adds the messages of an exported session (ExportSession
// with take, on a node that held clientID's session while its client
// started another here) to clientID's session here, after what it holds,
// with DUP (they may have been sent before), and reports how many it
// took. A session here that is not persistent takes none: its client
// chose not to keep messages. Subscriptions are not merged: the client's
// session here has the ones it made since.
func (s *Server) MergeSession(clientID string, data []byte) (int, error) {
	_, _, msgs, err := decodeExport(data)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	sess := s.sessions[clientID]
	s.mu.Unlock()
	if sess == nil {
		return 0, nil
	}
	sess.mu.Lock()
	keeps := sess.persistent()
	sess.mu.Unlock()
	if !keeps {
		return 0, nil
	}
	now := time.Now()
	n := 0
	for _, em := range msgs {
		sm := em.storedMsg
		if sm.qos == 0 || sm.msg.expired(now) {
			continue
		}
		sm.msg.inSeq = 0
		switch sess.enqueue(delivery{msg: sm.msg, qos: sm.qos, retain: sm.retain, subID: sm.subID, dup: true}) &^ enqLagging {
		case enqQueued, enqStored:
			n++
		}
	}
	if n > 0 {
		if err := s.syncStore(); err != nil {
			s.storeError("store: sync of merged messages failed", err, zap.String("client_id", clientID))
		}
	}
	s.log.Info("messages of a stale session on another node merged", zap.String("client_id", clientID),
		zap.Int("messages", len(msgs)), zap.Int("taken", n))
	return n, nil
}
