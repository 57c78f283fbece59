package core

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// neverExpires is the Session Expiry Interval meaning "never" (0xFFFFFFFF,
// 3.1.2.11.2), which 3.1.1 persistent sessions get.
const neverExpires = 0xFFFFFFFF

// delivery is one message owed to one session, by value in the queue: a
// queue slot is the only per-subscriber cost of a publish.
type delivery struct {
	msg    *Message // nil: a QoS 0 message dropped from the queue to make room
	qos    byte
	retain bool
	dup    bool // restored after a restart and maybe sent before it
	subID  uint32
	group  *sharedGroup // the shared group it came through, for redispatch
	seq    uint64       // store sequence for persistent sessions, 0 otherwise
}

// outMsg is a QoS 1/2 delivery in flight: sent, not yet acknowledged.
type outMsg struct {
	delivery
	id     uint16
	pubrel bool // PUBREC received, PUBREL sent: awaiting PUBCOMP
	resend bool // to be sent again on the next connection
	dup    bool // sent before: DUP is set on redelivery [MQTT-3.3.1-1]
	order  uint64
}

// session is the server side of an MQTT session. It outlives connections
// when persistent. mu guards every field below it; publishers enqueue from
// their own goroutines, the owning client's reader handles acks and the
// writer takes deliveries, all under mu, and no socket I/O happens under it.
type session struct {
	srv *Server
	id  string

	load     atomic.Int32 // queued + inflight, for least_inflight dispatch
	drops    atomic.Int64 // messages this session did not get (dropped): ClientInfo.Dropped
	routes   atomic.Int32 // subscriptions in the router, to skip overlap checks
	isOnline atomic.Bool
	// owner is the user name (or certificate identity) the session belongs
	// to: only it may resume the session (Options.AnySessionOwner), and
	// deliveries are authorized for it. nil: unknown (restored from an
	// older store), claimed by the next client to log in with the id. A new
	// pointer is stored whenever it changes, so a pointer compare tells
	// whether an authorization answer still holds (subACL).
	owner atomic.Pointer[string]

	// (Fields are ordered so that small ones share words: a session is
	// allocated per connection, 256 bytes.)
	mu      sync.Mutex
	c       *client
	version byte
	// moved is set when the session went to another node
	// (Server.ExportSession): its client is back there.
	moved bool
	// pending is set on a session moving here from another node whose
	// messages have not arrived yet (Server.ImportSession).
	pending  bool
	expiry   uint32 // seconds; 0 ends the session with the connection
	subs     map[string]storedSub
	queue    []delivery
	qhead    int
	inflight map[uint16]*outMsg
	nextID   uint16
	// replayed counts the messages at the head of a pending session's
	// queue that Server.ReplayPending put there: the next goes after them,
	// before what the session queued meanwhile.
	replayed    int32
	order       uint64   // send order of inflight messages, for redelivery in order
	seq         uint64   // store sequence
	qos2in      inbound2 // inbound QoS 2 state (inbound2.go)
	qbytes      int64    // topic and payload bytes held, queued or in flight (MaxQueuedBytes)
	holes       int      // dropped QoS 0 slots still in queue
	dropAt      int      // queue[qhead:dropAt] holds no QoS 0 message to drop
	expireTimer *time.Timer
	will        delayedWill // the will waiting for its delay (will.go)
	droppedWarn int64       // Unix nanoseconds of the last queue-full warning
	// streams are the retained messages owed to this connection's new
	// subscriptions (stream.go); nil unless some are, so that a session
	// stays in its allocation size class.
	streams *streamSet
	// began is, on a pending session rebuilt from a dead node's records
	// (Server.PendSession), when it began on that node (see beganLocked).
	began uint64
}

func newSession(srv *Server, id string) *session {
	// subs, inflight and qos2in are made on first insert: most
	// connections never need one of them.
	return &session{srv: srv, id: id}
}

func (s *session) online() bool { return s.isOnline.Load() }

func (s *session) persistent() bool { return s.expiry > 0 }

// beganLocked is when the session began on the node whose records it is
// (Unix nanoseconds; 0 not known): created, started clean or moved there,
// when qos2in.base was taken (newInBase), or, rebuilt pending from a dead
// node's records, when it began on that node. A replayed message
// published before was never for it (Server.replay). s.mu is held.
func (s *session) beganLocked() uint64 {
	if s.pending {
		return s.began // 0 on a session moving from a live node: never replayed into
	}
	return s.qos2in.base
}

func (s *session) queued() int { return len(s.queue) - s.qhead - s.holes }

// size is what a message counts against MaxQueuedBytes.
func (m *Message) size() int64 { return int64(len(m.Topic) + len(m.Payload)) }

// enqueueResult is what became of one delivery.
type enqueueResult uint8

const (
	enqQueued   enqueueResult = iota // in the queue, memory only
	enqStored                        // in the queue and written to the store
	enqDropped                       // dropped as the rules allow (QoS 0, offline non-persistent…)
	enqRefused                       // QoS 1/2 refused: full session queue (Quota Exceeded)
	enqNoSpace                       // QoS 1/2 refused: full store (Quota Exceeded)
	enqStoreErr                      // QoS 1/2 refused: the store failed

	// enqLagging is or-ed into the result when the queue was full: the
	// subscriber is not keeping up (a message was dropped or refused).
	enqLagging enqueueResult = 0x80
)

// enqueue adds a delivery. It never blocks: a full queue (MaxQueued or
// MaxQueuedBytes) drops its oldest QoS 0 message to make room; with none, a
// new QoS 0 message is dropped and a new QoS 1/2 one refused, and the
// disconnect policy cuts an online client off.
func (s *session) enqueue(d delivery) enqueueResult { return s.enqueueFrom(d, nil) }

// enqueueFrom is enqueue for a delivery routed by from's reader (nil: by
// the broker): the subscriber's writer is woken through from.deferWake.
func (s *session) enqueueFrom(d delivery, from *client) enqueueResult {
	srv := s.srv
	s.mu.Lock()
	c := s.c
	if c == nil && (d.qos == 0 || !s.persistent()) {
		s.mu.Unlock()
		s.dropped(dropOffline)
		return enqDropped
	}
	size := d.msg.size()
	var lagging enqueueResult
	if s.full(size) {
		lagging = enqLagging
	}
	if lagging != 0 && !s.dropOldestQoS0(size) {
		disconnect := d.qos > 0 && srv.live.overflowDisc.Load() && c != nil
		now := time.Now().UnixNano()
		warn := now-s.droppedWarn > int64(10*time.Second)
		if warn {
			s.droppedWarn = now
		}
		s.mu.Unlock()
		res := enqDropped
		if d.qos == 0 {
			s.dropped(dropQueueFull)
		} else {
			s.dropped(dropQuotaExceeded)
			res = enqRefused
		}
		if warn {
			srv.log.Warn("session queue full: dropping messages", zap.String("client_id", s.id),
				zap.Int64("max_queued", srv.live.maxQueued.Load()), zap.Int64("max_queued_bytes", srv.live.maxQueuedBytes.Load()),
				zap.Uint8("qos", d.qos))
		}
		if disconnect {
			c.close(CloseSlowConsumer, codec.QuotaExceeded)
		}
		return res | lagging
	}
	res := enqQueued
	if d.qos > 0 && s.persistent() {
		if err := s.storeLocked(&d); err != nil {
			s.mu.Unlock()
			s.storeDropped(err)
			if isNoSpace(err) {
				return enqNoSpace
			}
			return enqStoreErr
		}
		res = enqStored
	}
	if s.qhead > 0 && s.qhead == len(s.queue) {
		s.resetQueue()
	} else if len(s.queue) == cap(s.queue) && s.qhead+s.holes >= len(s.queue)/4 {
		// Full, and a quarter of it taken or dropped: slide the live rest to
		// the front rather than grow, so a queue at its limit (a lagging
		// subscriber dropping its oldest QoS 0 messages) stops allocating.
		n := 0
		for _, q := range s.queue[s.qhead:] {
			if q.msg != nil {
				s.queue[n] = q
				n++
			}
		}
		clear(s.queue[n:])
		s.queue, s.qhead, s.holes, s.dropAt = s.queue[:n], 0, 0, 0
	}
	s.queue = append(s.queue, d)
	s.qbytes += size
	s.addLoad(1)
	s.mu.Unlock()
	if c != nil {
		if from != nil {
			from.deferWake(c)
		} else {
			c.wake()
		}
	}
	return res | lagging
}

// storeLocked gives a QoS 1/2 delivery to a persistent session its store
// sequence and writes it to the store; s.mu is held.
func (s *session) storeLocked(d *delivery) error {
	s.seq++
	d.seq = s.seq
	if err := s.srv.storeAdd(s.id, *d); err != nil {
		s.seq--
		d.seq = 0
		return err
	}
	return nil
}

// storeDropped counts a delivery the store could not record.
func (s *session) storeDropped(err error) {
	if isNoSpace(err) {
		s.dropped(dropQuotaExceeded)
	} else {
		s.dropped(dropStoreError)
	}
}

// full reports whether a message of size bytes does not fit; s.mu is held.
func (s *session) full(size int64) bool {
	l := &s.srv.live
	maxBytes := l.maxQueuedBytes.Load()
	return int64(s.queued()) >= l.maxQueued.Load() || maxBytes > 0 && s.qbytes+size > maxBytes
}

// dropOldestQoS0 drops queued QoS 0 messages, oldest first, until a message
// of size bytes fits, and reports whether it does; s.mu is held. A dropped
// slot stays in the queue as a hole (msg nil) so nothing is moved, and the
// scan resumes at dropAt: a subscriber that lags for good drops one message
// per publish, and rescanning the holes before it made that O(queue).
func (s *session) dropOldestQoS0(size int64) bool {
	i := max(s.qhead, s.dropAt)
	for ; i < len(s.queue) && s.full(size); i++ {
		d := &s.queue[i]
		if d.msg == nil || d.qos != 0 {
			continue
		}
		s.qbytes -= d.msg.size()
		*d = delivery{}
		s.holes++
		s.addLoad(-1)
		s.dropped(dropQueueFull)
	}
	s.dropAt = i
	return !s.full(size)
}

// resetQueue empties the queue and keeps its backing array; s.mu is held.
func (s *session) resetQueue() {
	s.queue, s.qhead, s.holes, s.dropAt = s.queue[:0], 0, 0, 0
}

// take moves deliveries to the writer of c: first the inflight messages to
// resend after a reconnect, then queued messages while the inflight window
// has room. QoS 1/2 deliveries get a packet id and an inflight entry here.
// sync reports that the writer must Sync the store before sending: a QoS 2
// delivery to a persistent session had its packet id recorded, or a
// delivery came from a QoS 2 PUBLISH whose receipt was just recorded.
// held reports a message that may not be sent yet (Message.held). stream
// reports that the queue is drained, the batch has room and a retained
// stream waits (streamRetained), so the writer takes this lock again only
// then.
func (s *session) take(c *client, out []outMsg, window int, now time.Time) (_ []outMsg, sync, held, stream bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != c {
		return out, false, false, false
	}
	for _, m := range s.inflight {
		if m.resend {
			m.resend = false
			m.dup = true
			out = append(out, *m)
		}
	}
	if len(out) > 1 {
		slices.SortFunc(out, func(a, b outMsg) int { return int(a.order - b.order) })
	}
	for s.qhead < len(s.queue) && len(out) < maxBatch {
		d := s.queue[s.qhead]
		if d.msg == nil { // a dropped QoS 0 message
			s.qhead++
			s.holes--
			continue
		}
		if d.msg.isHeld() {
			held = true
			break
		}
		if d.qos > 0 && len(s.inflight) >= window {
			break
		}
		s.queue[s.qhead] = delivery{}
		s.qhead++
		if d.msg.expired(now) {
			s.done(&d)
			s.dropped(dropExpired)
			continue
		}
		if d.qos == 0 {
			s.qbytes -= d.msg.size()
			s.addLoad(-1)
			out = append(out, outMsg{delivery: d, dup: d.dup}) // the fan-out path: no call, one copy
			continue
		}
		var sy bool
		out, sy = s.sendLocked(out, d)
		sync = sync || sy
	}
	if s.qhead == len(s.queue) {
		// Empty: the backing array stays for the next burst, so steady
		// delivery allocates nothing (its size is bounded by MaxQueued).
		s.resetQueue()
	}
	stream = s.streams != nil && len(s.queue) == 0 && len(out) < maxBatch
	return out, sync, held, stream
}

// sendLocked appends d to out as a message for the writer; a QoS 1/2 one
// gets a packet id and an inflight entry. sync is as take's. s.mu is held.
func (s *session) sendLocked(out []outMsg, d delivery) (_ []outMsg, sync bool) {
	out = append(out, outMsg{delivery: d, dup: d.dup})
	if d.qos == 0 {
		return out, false
	}
	m := &out[len(out)-1]
	m.id = s.nextPacketID()
	s.order++
	m.order = s.order
	cp := *m
	if s.inflight == nil {
		s.inflight = map[uint16]*outMsg{}
	}
	s.inflight[m.id] = &cp
	s.srv.stats.inflight.Add(1)
	if d.seq != 0 {
		if d.qos == 2 {
			s.srv.storeUpdate(s.id, m)
			sync = true
		}
		sync = sync || d.msg.inSeq != 0
	}
	return out, sync
}

func (s *session) nextPacketID() uint16 {
	for {
		s.nextID++
		if s.nextID == 0 {
			s.nextID = 1
		}
		if _, used := s.inflight[s.nextID]; !used {
			return s.nextID
		}
	}
}

// done forgets a finished QoS 1/2 delivery; s.mu is held.
func (s *session) done(d *delivery) {
	s.addLoad(-1)
	s.qbytes -= d.msg.size()
	if d.seq != 0 {
		s.srv.storeAck(s.id, d.seq)
	}
}

// ack handles PUBACK (qos 1) and PUBCOMP (qos 2) and reports whether id
// was in flight and deliveries wait for the room it made in the window.
// Waking the writer on every acknowledgement cost a writer run for nothing
// per message at low rates, and that writer, running, took the next
// delivery from the reader that would have written it in place.
func (s *session) ack(id uint16, qos byte) (waiting bool) {
	s.mu.Lock()
	m, ok := s.inflight[id]
	if ok && (m.qos != qos || qos == 2 && !m.pubrel) {
		ok = false // wrong acknowledgement for this flow
	}
	if ok {
		delete(s.inflight, id)
		s.srv.stats.inflight.Add(-1)
		s.done(&m.delivery)
		waiting = s.qhead < len(s.queue) || s.streams != nil
	}
	s.mu.Unlock()
	return waiting
}

// pubrec handles PUBREC: the message is now owed only a PUBREL. stored
// reports that the new state was written to the store, so the PUBREL must
// wait for a Sync.
func (s *session) pubrec(id uint16) (ok, stored bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.inflight[id]
	if !ok || m.qos != 2 {
		return false, false
	}
	if !m.pubrel && m.seq != 0 {
		m.pubrel = true
		s.srv.storeUpdate(s.id, m)
		return true, true
	}
	m.pubrel = true
	return true, false
}

// dropInflight completes an inflight message that cannot be sent (too large).
func (s *session) dropInflight(id uint16) {
	s.mu.Lock()
	if m, ok := s.inflight[id]; ok {
		delete(s.inflight, id)
		s.srv.stats.inflight.Add(-1)
		s.done(&m.delivery)
	}
	s.mu.Unlock()
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

// attach makes c the session's connection; inflight messages are marked
// for redelivery [MQTT-4.4.0-1]. s.mu and Server.mu are held by the caller.
func (s *session) attachLocked(c *client) {
	s.c = c
	s.srv.setOnlineLocked(s, true)
	for _, m := range s.inflight {
		m.resend = true
	}
	if s.expireTimer != nil {
		s.expireTimer.Stop()
		s.expireTimer = nil
	}
	if s.will.timer != nil {
		s.will.timer.Stop() // a new connection before the will delay cancels the will
		s.will.timer = nil
	}
}

// releaseShared takes back the deliveries that came through a shared group
// and are not yet acknowledged, so they can go to another member. A QoS 2
// message past PUBREC stays: its payload has been delivered.
func (s *session) releaseSharedLocked() []delivery {
	var out []delivery
	for id, m := range s.inflight {
		if m.group != nil && !m.pubrel {
			out = append(out, m.delivery)
			delete(s.inflight, id)
			s.srv.stats.inflight.Add(-1)
			s.done(&m.delivery)
		}
	}
	kept := s.queue[:s.qhead]
	for _, d := range s.queue[s.qhead:] {
		if d.msg == nil {
			s.holes--
			continue
		}
		if d.group != nil {
			out = append(out, d)
			s.done(&d)
		} else {
			kept = append(kept, d)
		}
	}
	s.queue, s.dropAt = kept, 0
	return out
}

// recordLocked returns the session as the Store keeps it; s.mu is held.
func (s *session) recordLocked(disconnectedAt int64) *sessionRecord {
	r := &sessionRecord{Version: s.version, Expiry: s.expiry, DisconnectedAt: disconnectedAt,
		InBase: s.qos2in.base, Subs: make([]storedSub, 0, len(s.subs))}
	if o := s.owner.Load(); o != nil {
		r.Owner, r.OwnerKnown = *o, true
	}
	if disconnectedAt != 0 {
		r.SentSeq = s.seq
	}
	for _, sub := range s.subs {
		r.Subs = append(r.Subs, sub)
	}
	slices.SortFunc(r.Subs, func(a, b storedSub) int { return strings.Compare(a.Filter, b.Filter) })
	return r
}

// opts are the router options of a stored subscription.
func (sub *storedSub) opts(srv *Server) subOpts {
	return subOpts{qos: sub.QoS, noLocal: sub.NoLocal, rap: sub.RetainAsPublished, rh: sub.RetainHandling,
		subID: sub.SubscriptionID, v5: sub.V5, acl: newSubACL(srv, sub.Filter)}
}

// setOwner records who the session belongs to now. Each call stores a new
// pointer, even for the same name: subscriptions keep the Authorizer's
// ReadsAll answers per owner pointer (subACL), and a new login may bring
// other rights than the last one with the same user name (a token's ACL
// claim), so each attach asks again.
func (s *session) setOwner(username string) {
	s.owner.Store(&username)
}

// ownedBy reports whether username may resume the session: it is the
// owner, or the owner is unknown.
func (s *session) ownedBy(username string) bool {
	o := s.owner.Load()
	return o == nil || *o == username
}

// dropped counts a message this session did not get, for it and the server.
func (s *session) dropped(c dropCause) {
	s.drops.Add(1)
	s.srv.stats.dropped(c)
}

// addLoad changes the session's queued + inflight count and the server's gauge.
func (s *session) addLoad(n int32) {
	s.load.Add(n)
	s.srv.stats.pending.Add(int64(n))
}
