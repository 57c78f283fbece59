package core

import (
	"time"

	"go.uber.org/zap"
)

// Retained messages for a new subscription are streamed, not queued. A
// SUBSCRIBE to # on a broker with 200,000 retained messages once pushed
// them all onto the session's queue at once, where the queue bound
// (MaxQueued) dropped all but what the writer drained meanwhile, without
// a word. Now the subscription gets a retainedStream: a position in the
// retained set, which the connection's writer reads a batch at a time
// when its queue is empty, as the socket takes what it wrote. Memory
// stays one batch whatever the set holds, and the subscriber gets every
// message at its own pace.
//
// The stream reads the retained set as it is when it gets there: a
// message replaced meanwhile goes in its newer version, one cleared is
// not sent. A live message on a topic may then reach the subscriber
// before the topic's retained one; what comes last is never older than
// what came before (the retained message is kept before it is routed).
//
// A stream belongs to the connection that subscribed: when it ends (or
// another takes the session over) the rest is not sent — retained
// messages go with a SUBSCRIBE, not a reconnect — and the cut is counted
// (Snapshot.RetainedStreamsCut) and logged.

// retainedStream is what a new subscription is still owed of the retained
// set, by the session's current connection: streams are cut whenever the
// session's connection changes. Guarded by session.mu, except that the
// writer reads the set from after without it and then checks, under it,
// that the stream is still the one it read for.
type retainedStream struct {
	filter string // the subscription's filter (never shared: they get no retained messages)
	opts   subOpts
	after  string // the last topic read or passed over, "" none yet
	sent   int    // messages delivered, for the log of a cut
	dead   bool   // ended early (unsubscribed, subscribed again): skipped, then dropped
}

// streamSet is a session's retained streams: oldest subscription first,
// ended ones among them until dropped, and the live one of each filter.
type streamSet struct {
	list []*retainedStream
	of   map[string]*retainedStream
}

// maxBatch is the most deliveries a writer takes per round.
const maxBatch = 256

// streamReq is a subscription made by one SUBSCRIBE, for setStreams.
type streamReq struct {
	filter string
	opts   subOpts
	send   bool // a new stream of the retained messages (Retain Handling)
}

// setStreams starts the retained streams of a SUBSCRIBE's subscriptions on
// c, after its SUBACK is queued: a subscription made again starts its
// stream over (a SUBSCRIBE sends the retained messages again), or, with
// none to send, keeps its stream going with the new options.
func (s *session) setStreams(c *client, reqs []streamReq) {
	for i := range reqs {
		// Most subscriptions have no retained message to send: they cost
		// no stream and wake no writer.
		reqs[i].send = reqs[i].send && s.srv.retained.mayMatch(reqs[i].filter)
	}
	started := false
	s.mu.Lock()
	if s.c != c {
		s.mu.Unlock()
		return // taken over meanwhile: the new connection subscribed for itself
	}
	for _, r := range reqs {
		var old *retainedStream
		if s.streams != nil {
			old = s.streams.of[r.filter]
		}
		switch {
		case r.send:
			if old != nil {
				s.endStreamLocked(old)
			}
			if s.streams == nil {
				s.streams = &streamSet{of: map[string]*retainedStream{}}
			}
			st := &retainedStream{filter: r.filter, opts: r.opts}
			s.streams.list = append(s.streams.list, st)
			s.streams.of[r.filter] = st
			started = true
		case old != nil:
			old.opts = r.opts
		}
	}
	s.compactStreamsLocked()
	s.mu.Unlock()
	if started {
		c.wake()
	}
}

// stopStreamLocked ends the stream of filter, which was unsubscribed
// [MQTT-3.10.4-2]; s.mu is held.
func (s *session) stopStreamLocked(filter string) {
	if s.streams == nil {
		return
	}
	if st := s.streams.of[filter]; st != nil {
		s.endStreamLocked(st)
		s.compactStreamsLocked()
	}
}

// endStreamLocked ends st, which stays in the list, skipped, until the
// writer or a compaction drops it; s.mu is held.
func (s *session) endStreamLocked(st *retainedStream) {
	st.dead = true
	delete(s.streams.of, st.filter)
}

// compactStreamsLocked drops the ended streams once they are most of the
// list, so that a client subscribing again and again while it reads
// nothing holds no more than twice its live streams; s.mu is held.
func (s *session) compactStreamsLocked() {
	ss := s.streams
	if ss == nil || len(ss.list) <= 2*len(ss.of)+16 {
		return
	}
	live := ss.list[:0]
	for _, st := range ss.list {
		if !st.dead {
			live = append(live, st)
		}
	}
	clear(ss.list[len(live):])
	ss.list = live
}

// headStreamLocked returns the oldest live stream, dropping ended ones
// before it, or nil, and then drops the set; s.mu is held.
func (s *session) headStreamLocked() *retainedStream {
	ss := s.streams
	if ss == nil {
		return nil
	}
	for len(ss.list) > 0 && ss.list[0].dead {
		ss.list[0] = nil
		ss.list = ss.list[1:]
	}
	if len(ss.list) == 0 {
		s.streams = nil
		return nil
	}
	return ss.list[0]
}

// cutStreamsLocked ends the streams when their connection goes (or the
// session does) and returns what the log says of them; s.mu is held.
func (s *session) cutStreamsLocked() streamCut {
	var cut streamCut
	if st := s.headStreamLocked(); st != nil {
		cut = streamCut{n: len(s.streams.of), filter: st.filter, sent: st.sent}
		for _, st := range s.streams.list {
			st.dead = true // a writer between its read and its deliveries drops them
		}
	}
	s.streams = nil
	return cut
}

// streamCut is what cutStreamsLocked ended.
type streamCut struct {
	n      int
	filter string // the oldest stream's
	sent   int    // … and what it had sent
}

// noteCut counts streams cut short and logs it, at most once a second.
func (s *Server) noteCut(clientID string, cut streamCut) {
	if cut.n == 0 {
		return
	}
	s.stats.retainedCut.Add(int64(cut.n))
	if rarely(&s.warned.cut) {
		s.log.Info("retained messages not all sent: the subscriber's connection ended first",
			zap.String("client_id", clientID), zap.String("filter", cut.filter), zap.Int("sent", cut.sent),
			zap.Int("streams", cut.n))
	}
}

// streamRetained appends to out the next retained messages c's oldest
// stream owes, while the batch and the inflight window have room and the
// session's queue is empty (live messages go first: the queue is bounded,
// the stream is not). It reads the retained set and asks the Authorizer
// without the session's lock, then takes the lock to make the deliveries,
// as take does for queued ones (sync and held as take's). Writer only.
func (c *client) streamRetained(out []outMsg, now time.Time) (_ []outMsg, sync, held bool) {
	s := c.sess
	srv := c.srv
	ws := c.ws
	for len(out) < maxBatch {
		s.mu.Lock()
		var st *retainedStream
		if s.c == c && s.qhead == len(s.queue) {
			st = s.headStreamLocked()
		}
		if st == nil {
			s.mu.Unlock()
			break
		}
		after, filter, acl := st.after, st.filter, st.opts.acl
		s.mu.Unlock()

		msgs, next, done := srv.retained.read(filter, after, maxBatch-len(out), now, ws.retained[:0])
		ws.retained = msgs
		var denied [maxBatch / 64]uint64 // msgs[i] may not be read: bit i
		if acl != nil {
			gen := srv.aclGeneration()
			for i, m := range msgs {
				if !srv.mayRead(s, acl, m.Topic, gen) { // counted as not_readable
					denied[i/64] |= 1 << (i % 64)
				}
			}
		}

		s.mu.Lock()
		if s.c != c || st.dead {
			// Cut, unsubscribed or subscribed again meanwhile: start over.
			s.mu.Unlock()
			clear(msgs)
			continue
		}
		blocked := false
		for i, m := range msgs {
			if denied[i/64]&(1<<(i%64)) != 0 {
				st.after = m.Topic
				continue
			}
			qos := min(m.QoS, st.opts.qos)
			if m.isHeld() || qos > 0 && len(s.inflight) >= c.window {
				// Its publisher is recording it (see take), or the window is
				// full: an acknowledgement wakes the writer.
				held = held || m.isHeld()
				blocked = true
				break
			}
			st.after = m.Topic
			// Sent with RETAIN set because of a new subscription [MQTT-3.3.1-8].
			d := delivery{msg: m, qos: qos, retain: true, subID: st.opts.subID}
			if qos > 0 {
				if s.persistent() {
					if err := s.storeLocked(&d); err != nil {
						s.storeDropped(err)
						continue
					}
				}
				s.qbytes += m.size() // given back by done, as a queued delivery's
				s.addLoad(1)
			}
			var sy bool
			out, sy = s.sendLocked(out, d)
			sync = sync || sy
			st.sent++
		}
		if !blocked {
			st.after = next
			if done {
				s.endStreamLocked(st) // dropped by the next headStreamLocked
			}
		}
		s.mu.Unlock()
		clear(msgs)
		if blocked {
			break
		}
	}
	return out, sync, held
}
