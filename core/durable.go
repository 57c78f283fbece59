package core

// This file is what makes the Store's promises hold across a crash: group
// commit of acknowledgements, the inbound QoS 2 state of persistent
// sessions, pending wills, and restoring all of it.

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// maxPendingAcks bounds the acknowledgements a reader holds for one Sync.
const maxPendingAcks = 256

// pendingAck is an acknowledgement waiting for the store: PUBACK, PUBREC,
// PUBREL or PUBCOMP.
type pendingAck struct {
	kind codec.Type
	id   uint16
	rc   codec.ReasonCode
}

// ackAfterSync queues an acknowledgement to go out once what this
// connection wrote to the store is durable (releaseAcks, once per read
// burst): many messages share one fsync. Acknowledgements keep their order
// [MQTT-4.6.0-2]. Reader only.
func (c *client) ackAfterSync(kind codec.Type, id uint16, rc codec.ReasonCode) {
	c.acks = append(c.acks, pendingAck{kind, id, rc})
	if len(c.acks) >= maxPendingAcks {
		c.releaseAcks()
	}
}

// releaseAcks hands the held acknowledgements on at the end of a read
// burst. When this connection wrote to the store since its last release
// (or earlier acknowledgements are still waiting), they go to the server's
// syncer, which sends them after its next Sync; the reader does not wait
// and goes on reading and routing. Otherwise they go to the writer now.
// Reader only.
func (c *client) releaseAcks() {
	if len(c.acks) == 0 && !c.needSync {
		return
	}
	if c.needSync || c.syncQueued.Load() > 0 {
		c.needSync = false
		c.syncQueued.Add(1)
		c.srv.syncer.submit(syncBatch{c: c, acks: c.acks})
		c.acks = make([]pendingAck, 0, 8)
		return
	}
	if c.queueAcks(c.acks) {
		c.deferWake(c) // written with the burst's deliveries (inline.go)
	}
	c.acks = c.acks[:0]
}

// releaseAcksWait is releaseAcks that returns only once every
// acknowledgement held so far is with the writer, for a control packet
// that must follow them and the store writes they cover (SUBACK, the
// writer's last flush before DISCONNECT). Reader only.
func (c *client) releaseAcksWait() {
	if len(c.dirty) > 0 {
		c.flushDirty() // the wait must not hold this burst's deliveries back
	}
	if len(c.acks) == 0 && !c.needSync && c.syncQueued.Load() == 0 {
		return
	}
	done := make(chan struct{})
	c.needSync = false
	c.syncQueued.Add(1)
	c.srv.syncer.submit(syncBatch{c: c, acks: c.acks, done: done})
	c.acks = nil
	<-done
}

// sendAcks hands acknowledgements to the writer.
func (c *client) sendAcks(acks []pendingAck) {
	if c.queueAcks(acks) {
		c.wake()
	}
}

// queueAcks puts acknowledgements into the control packets waiting to be
// written, and reports whether there were any.
func (c *client) queueAcks(acks []pendingAck) bool {
	if len(acks) == 0 {
		return false
	}
	c.mu.Lock()
	for _, a := range acks {
		c.ctrl = (&codec.Ack{Kind: a.kind, PacketID: a.id, ReasonCode: a.rc}).Append(c.ctrl, c.version)
	}
	c.mu.Unlock()
	c.srv.stats.ctrlOut.Add(int64(len(acks)))
	return true
}

// refuseAcks turns acknowledgements held for a Sync that failed into
// refusals, and reports whether they may be sent: an MQTT 5 publisher gets
// an error code instead of each PUBACK and PUBREC that promised
// durability; an MQTT 3 publisher, which has no such code, is disconnected
// without them.
func (c *client) refuseAcks(acks []pendingAck, err error) bool {
	if c.version != codec.V5 {
		c.close(CloseStoreError, 0)
		return false
	}
	rc := codec.UnspecifiedError
	if isNoSpace(err) {
		rc = codec.QuotaExceeded
	}
	for i := range acks {
		a := &acks[i]
		if (a.kind == codec.PUBACK || a.kind == codec.PUBREC) && !a.rc.IsError() {
			a.rc = rc
			if a.kind == codec.PUBREC {
				c.sess.forgetInbound(a.id) // a refused QoS 2 flow ends at PUBREC
			}
		}
	}
	return true
}

// syncBatch is one connection's acknowledgements waiting for a Sync.
type syncBatch struct {
	c    *client
	acks []pendingAck
	done chan struct{} // closed once handed on, for releaseAcksWait
}

// syncer is the server's group commit: readers submit their held
// acknowledgements without waiting; one goroutine calls Sync once for
// everything submitted meanwhile, then hands each batch to its writer, in
// submission order, so each connection's acknowledgements keep theirs.
type syncer struct {
	srv     *Server
	mu      sync.Mutex
	queue   []syncBatch
	stopped bool          // Shutdown is over: batches are dropped
	wake    chan struct{} // cap 1
	stop    chan struct{}
	done    chan struct{}
}

func newSyncer(srv *Server) *syncer {
	return &syncer{srv: srv, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

func (y *syncer) submit(b syncBatch) {
	y.mu.Lock()
	if y.stopped {
		y.mu.Unlock()
		b.c.syncQueued.Add(-1)
		if b.done != nil {
			close(b.done)
		}
		return
	}
	y.queue = append(y.queue, b)
	y.mu.Unlock()
	select {
	case y.wake <- struct{}{}:
	default:
	}
}

// run is the syncer goroutine; after stop it drains what is queued.
func (y *syncer) run() {
	defer close(y.done)
	var batch []syncBatch
	for {
		select {
		case <-y.wake:
		case <-y.stop:
			y.round(batch)
			y.mu.Lock()
			y.stopped = true
			y.mu.Unlock()
			y.round(nil)
			return
		}
		batch = y.round(batch)
	}
}

// round syncs once for every queued batch and hands them on; it returns
// the slice for reuse.
func (y *syncer) round(batch []syncBatch) []syncBatch {
	y.mu.Lock()
	batch, y.queue = y.queue, batch[:0]
	y.mu.Unlock()
	if len(batch) == 0 {
		return batch
	}
	err := y.srv.syncStore()
	if err != nil {
		y.srv.storeError("store: sync failed; refusing the messages it held", err)
	}
	for i := range batch {
		b := &batch[i]
		if err == nil || b.c.refuseAcks(b.acks, err) {
			b.c.sendAcks(b.acks)
		}
		b.c.syncQueued.Add(-1)
		if b.done != nil {
			close(b.done)
		}
		*b = syncBatch{}
	}
	return batch
}

// inboundSeq numbers a QoS 2 PUBLISH from a persistent session (see
// inboundRecord); 0 when its state is not kept in the store.
func (s *session) inboundSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.persistent() {
		return 0
	}
	s.inSeq++
	return s.inSeq
}

// commitInbound records that the QoS 2 PUBLISH numbered seq has been
// routed, and its packet id as awaiting PUBREL when accepted, in memory
// and, for a persistent session (seq != 0), in the store.
func (s *session) commitInbound(id uint16, seq uint64, accepted bool) error {
	s.mu.Lock()
	if accepted {
		if s.qos2in == nil {
			s.qos2in = map[uint16]struct{}{}
		}
		s.qos2in[id] = struct{}{}
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
	_, found = s.qos2in[id]
	if !found {
		s.mu.Unlock()
		return false, false
	}
	delete(s.qos2in, id)
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
	delete(s.qos2in, id)
	s.mu.Unlock()
}

// inboundLocked encodes the inbound state; high is the new High, or 0 to
// keep it. s.mu is held.
func (s *session) inboundLocked(high uint64) []byte {
	if high > s.inHigh {
		s.inHigh = high
	}
	r := inboundRecord{High: s.inHigh, IDs: make([]uint16, 0, len(s.qos2in))}
	for id := range s.qos2in {
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

// isNoSpace reports a store refusing a record for lack of space.
func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// storeError logs a store failure, at most once a second: a full disk
// fails every write.
func (s *Server) storeError(msg string, err error, fields ...zap.Field) {
	if rarely(&s.storeWarn) {
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
	sess.inBase = sr.InBase
	sess.inSeq = max(sr.InBase, in.High)
	sess.inHigh = in.High
	for _, pid := range in.IDs {
		if sess.qos2in == nil {
			sess.qos2in = map[uint16]struct{}{}
		}
		sess.qos2in[pid] = struct{}{}
	}
	s.inBaseMax = max(s.inBaseMax, sess.inSeq)
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
		if pub == nil || t.inSeq <= pub.inSeq {
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

// scheduleWill makes w sess's will waiting for its delay, published
// after wait unless its client comes back first.
func (s *Server) scheduleWill(sess *session, w *willRecord, wait time.Duration) {
	var owner *string
	if w.OwnerKnown {
		owner = &w.Owner
	}
	sess.mu.Lock() // the timer may fire at once and clear willTimer
	sess.pendingWill = func() { s.publishWill(w.Msg, w.Expiry, sess, owner) }
	sess.willTimer = time.AfterFunc(wait, sess.pendingWill)
	sess.mu.Unlock()
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

// newHeld returns a held gate for a message (Message.held).
func newHeld() *atomic.Bool {
	b := new(atomic.Bool)
	b.Store(true)
	return b
}

// inflightQoS is the QoS of the inflight delivery id, 0 when none.
func (s *session) inflightQoS(id uint16) byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.inflight[id]; ok {
		return m.qos
	}
	return 0
}
