package core

// This file rebuilds the server's state from its store at start: sessions
// with their queues, inflight messages and inbound QoS 2 state, retained
// messages and pending wills; then sweeps what expired or a crash left
// half-written.

import (
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// restore loads persistent sessions, their queues and inflight messages,
// their inbound QoS 2 state, pending wills and retained messages, and
// sweeps what has expired or was left half-written by a crash.
func (s *Server) restore() (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("core: restoring state: %w: %v", errRecord, v)
		}
	}()
	r := restorer{srv: s, now: time.Now(), inbound: map[string]inboundRecord{}, info: map[string]sessionRecord{}}
	if err := r.load(); err != nil {
		return fmt.Errorf("core: restoring state: %w", err)
	}
	r.sweep()
	for _, start := range r.timers {
		start()
	}
	if len(s.sessions) > 0 || r.nret > 0 || r.nwills > 0 {
		s.log.Info("restored state", zap.Int("sessions", len(s.sessions)), zap.Int("messages", r.nmsgs),
			zap.Int("retained", r.nret), zap.Int("wills", r.nwills), zap.Int("swept", r.swept()))
	}
	// Restored messages are all kept; they count, so new topics wait
	// until clients clear enough of them.
	if n, bytes := s.retained.clientCounts(); s.opts.MaxRetainedMessages > 0 && n > s.opts.MaxRetainedMessages ||
		s.opts.MaxRetainedBytes > 0 && bytes > s.opts.MaxRetainedBytes {
		s.log.Warn("the retained messages restored exceed the retained budget: new topics and larger messages are not retained until clients clear some",
			zap.Int("retained", n), zap.Int64("retained_bytes", bytes),
			zap.Int("max_retained_messages", s.opts.MaxRetainedMessages), zap.Int64("max_retained_bytes", s.opts.MaxRetainedBytes))
	}
	return nil
}

// restorer rebuilds the server's state from its store.
type restorer struct {
	srv     *Server
	now     time.Time
	inbound map[string]inboundRecord
	info    map[string]sessionRecord // per restored session: its record, subscriptions aside
	tagged  []taggedMsg

	delSessions []string
	delMessages []msgKey
	delRetained []string

	nmsgs, nret, nwills int

	// timers start the restored sessions' expiry and wills once
	// everything is loaded: restore writes the server's and the
	// sessions' state without their locks, which a timer firing meanwhile
	// (a session or a will due during a long load) would take and change.
	timers []func()
}

type msgKey struct {
	id  string
	seq uint64
}

// taggedMsg is a restored delivery of a persistent session's QoS 2 PUBLISH.
type taggedMsg struct {
	sess  *session
	seq   uint64
	from  string
	inSeq uint64
}

func (r *restorer) swept() int {
	return len(r.delSessions) + len(r.delMessages) + len(r.delRetained)
}

func (r *restorer) load() error {
	s := r.srv
	err := s.store.LoadInbound(func(id string, rec []byte) error {
		var ir inboundRecord
		if err := ir.decode(rec); err != nil {
			return fmt.Errorf("inbound state of session %q: %w", id, err)
		}
		r.inbound[id] = ir
		return nil
	})
	if err != nil {
		return err
	}
	err = s.store.Load(r.session, r.message, r.retained)
	if err != nil {
		return err
	}
	r.dropIncomplete()
	return s.store.LoadWills(r.will)
}

func (r *restorer) session(id string, rec []byte) error {
	s := r.srv
	var sr sessionRecord
	if err := sr.decode(rec); err != nil {
		return fmt.Errorf("session %q: %w", id, err)
	}
	if sr.DisconnectedAt != 0 && sr.Expiry != neverExpires &&
		!r.now.Before(time.Unix(sr.DisconnectedAt, 0).Add(time.Duration(sr.Expiry)*time.Second)) {
		r.delSessions = append(r.delSessions, id) // expired while the broker was down
		s.stats.expired.Add(1)
		return nil
	}
	sess := newSession(s, id)
	sess.version, sess.expiry = sr.Version, sr.Expiry
	if sr.OwnerKnown {
		sess.setOwner(sr.Owner)
	}
	for _, sub := range sr.Subs {
		group, filter, _, err := codec.ParseShared([]byte(sub.Filter))
		if err != nil {
			continue
		}
		if sess.subs == nil {
			sess.subs = map[string]storedSub{}
		}
		sess.subs[sub.Filter] = sub
		s.router.subscribe(sess, string(filter), string(group), sub.opts(s))
	}
	in := r.inbound[id]
	sess.qos2in.base = sr.InBase
	sess.qos2in.seq = max(sr.InBase, in.High)
	sess.qos2in.high = in.High
	for _, pid := range in.IDs {
		if sess.qos2in.ids == nil {
			sess.qos2in.ids = map[uint16]struct{}{}
		}
		sess.qos2in.ids[pid] = struct{}{}
	}
	s.inBaseMax = max(s.inBaseMax, sess.qos2in.seq)
	s.putSessionLocked(sess)
	sr.Subs = nil
	r.info[id] = sr
	gone := time.Unix(sr.DisconnectedAt, 0)
	if sr.DisconnectedAt == 0 {
		gone = r.now // was connected when the broker stopped
	}
	r.timers = append(r.timers, func() { s.scheduleExpiry(sess, gone) })
	return nil
}

func (r *restorer) message(id string, seq uint64, rec []byte) error {
	sm, err := decodeDeliveryRecord(rec)
	if err != nil {
		return fmt.Errorf("message %d of session %q: %w", seq, id, err)
	}
	sess := r.srv.sessions[id]
	if sess == nil || sm.msg.expired(r.now) {
		r.delMessages = append(r.delMessages, msgKey{id, seq}) // its session is gone, or it expired
		return nil
	}
	info := r.info[id]
	d := delivery{msg: sm.msg, qos: sm.qos, retain: sm.retain, subID: sm.subID, seq: seq,
		dup: info.DisconnectedAt == 0 || seq <= info.SentSeq}
	if sm.id != 0 && sm.qos == 2 {
		if _, used := sess.inflight[sm.id]; used {
			r.delMessages = append(r.delMessages, msgKey{id, seq})
			return nil
		}
		sess.order++
		sess.srv.stats.inflight.Add(1)
		if sess.inflight == nil {
			sess.inflight = map[uint16]*outMsg{}
		}
		sess.inflight[sm.id] = &outMsg{delivery: d, id: sm.id, pubrel: sm.pubrel, resend: true, dup: true, order: sess.order}
	} else {
		sess.queue = append(sess.queue, d)
	}
	sess.seq = max(sess.seq, seq)
	sess.addLoad(1)
	sess.qbytes += sm.msg.size()
	if sm.msg.inSeq != 0 {
		r.tagged = append(r.tagged, taggedMsg{sess, seq, sm.msg.From, sm.msg.inSeq})
	}
	r.nmsgs++
	return nil
}

func (r *restorer) retained(topic string, rec []byte) error {
	sm, err := decodeDeliveryRecord(rec)
	if err != nil {
		return fmt.Errorf("retained message %q: %w", topic, err)
	}
	m := sm.msg
	if m.expired(r.now) {
		r.delRetained = append(r.delRetained, topic)
		return nil
	}
	r.srv.retained.set(m, sm.stored)
	r.nret++
	return nil
}

// dropIncomplete removes the deliveries of QoS 2 PUBLISHes whose routing
// a crash may have cut short (see inboundRecord): their publisher never got
// PUBREC and will send them again.
func (r *restorer) dropIncomplete() {
	s := r.srv
	for _, t := range r.tagged {
		pub := s.sessions[t.from]
		if pub == nil || t.inSeq <= pub.qos2in.seq {
			continue
		}
		sess := t.sess
		r.delMessages = append(r.delMessages, msgKey{sess.id, t.seq})
		for id, m := range sess.inflight {
			if m.seq == t.seq {
				delete(sess.inflight, id)
				sess.srv.stats.inflight.Add(-1)
				sess.addLoad(-1)
				sess.qbytes -= m.msg.size()
			}
		}
		sess.queue = slices.DeleteFunc(sess.queue, func(d delivery) bool {
			if d.seq != t.seq {
				return false
			}
			sess.addLoad(-1)
			sess.qbytes -= d.msg.size()
			return true
		})
	}
	r.tagged = nil
}

func (r *restorer) will(id string, rec []byte) error {
	s := r.srv
	var w willRecord
	if err := w.decode(rec); err != nil {
		return fmt.Errorf("will of %q: %w", id, err)
	}
	r.nwills++
	at := w.At
	if at.IsZero() {
		at = r.now.Add(w.Delay) // its client was connected when the broker stopped
	}
	wait := max(at.Sub(r.now), 0)
	var owner *string
	if w.OwnerKnown {
		owner = &w.Owner
	}
	if sess := s.sessions[id]; sess != nil {
		r.timers = append(r.timers, func() { s.scheduleWill(sess, &w, wait) })
		return nil
	}
	r.timers = append(r.timers, func() {
		s.willTimers = append(s.willTimers, time.AfterFunc(wait, func() {
			s.storeDeleteWill(id)
			s.publishWill(w.Msg, w.Expiry, nil, owner)
		}))
	})
	return nil
}

// sweep deletes what restore left behind: expired sessions and messages,
// orphans and incomplete deliveries.
func (r *restorer) sweep() {
	s := r.srv
	for _, id := range r.delSessions {
		s.storeDelete(id)
	}
	for _, k := range r.delMessages {
		s.storeAck(k.id, k.seq)
	}
	for _, t := range r.delRetained {
		if err := s.store.DeleteRetained(t); err != nil {
			s.storeError("store: deleting an expired retained message", err, zap.String("topic", t))
		}
	}
}
