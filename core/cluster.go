package core

import (
	"cmp"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// Cluster links the broker to the other nodes of a cluster (package
// cluster implements it over NATS, cmd/xmq wires it; core never imports
// either). With none configured (Config.Cluster nil) core pays one nil
// check per PUBLISH and per subscription change.
//
// Core tells the cluster which filters this node's subscribers use, so
// that messages travel only to nodes with interest, and hands it every
// message published on this node after routing it locally. Messages from
// other nodes come back through Server.DeliverRemote, which routes them to
// this node's subscribers only: nothing received is forwarded again. The
// cluster hands over each message once for the plain subscribers, however
// many of this node's filters it matches, and core matches it against the
// whole tree, so that a client gets the copies a local PUBLISH would give
// it wherever the publisher connected.
//
// A shared group ($share/GROUP/FILTER) is announced too: each message
// goes to one member cluster-wide, a member on the publisher's node when
// there is one (Forward says which groups it served), else one on a node
// the cluster picks, where the group's strategy picks the member.
//
// A client id is connected once cluster-wide: Claim at CONNECT, Release
// when the connection ends, Server.TakeOver where another node's claim
// replaces this node's. Retained messages are kept on every node:
// Retain when set here, Server.SetRetained when set elsewhere.
type Cluster interface {
	// Interest reports that this node's first (on) or last (!on) plain
	// subscription to filter (group "") or member of the shared group
	// group on filter came or went, whatever the number of sessions. It
	// is called with the router's lock held, in the order of the changes:
	// it must neither block nor call the Server. It returns the change's
	// number (increasing), for AwaitInterest.
	Interest(group, filter string, on bool) uint64
	// Forward hands the other nodes a message published on this node, on
	// the publisher's goroutine, once its local subscribers have it. m is
	// the message's immutable part (codec.Message): Forward must not
	// change what it shares, nor block on the network. served lists the
	// shared groups this node delivered it to, as group, filter pairs (nil
	// for none).
	Forward(m codec.Message, served []string)
	// Retain records m.Topic's retained message cluster-wide (an empty
	// payload clears it) as this node keeps it; the other nodes keep it
	// through Server.SetRetained. m is as Forward's, and Retain must not
	// block on the network either.
	Retain(m codec.Message)
	// Claim makes this connection, of the identity owner, the holder of
	// clientID cluster-wide, before its session is attached: a
	// connection with that id on another node is closed there
	// (Server.TakeOver). It returns the claim, which Release gives back,
	// or 0 when it could not be made (the connection goes ahead, held on
	// this node only). Without clean, a persistent session of clientID on
	// the node that held the id before moves here (that node's
	// ExportSession, this one's ImportSession) before Claim returns, so
	// that attach finds it. A non-zero reason code refuses the
	// connection, and nothing changed elsewhere: with checkOwner,
	// codec.NotAuthorized when the id's session on another node belongs
	// to another identity (as attach's check on one node); or the code
	// for a claim older than the connection it would replace there. It
	// runs on the connection's goroutine and may wait for a few round
	// trips.
	Claim(clientID, owner string, checkOwner, clean bool) (uint64, codec.ReasonCode)
	// AwaitInterest returns once the interest change numbered seq is
	// known to every other node, or after a bound: the broker calls it on
	// the connection's goroutine before a SUBACK, with the number of the
	// change that announced its filters (a change known long ago costs
	// nothing).
	AwaitInterest(seq uint64)
	// HandOver gives the other nodes a message of the shared group group
	// on filter whose member here went away with it unacknowledged while
	// no other member of the group is here: one member of the group on
	// another node gets it, no other subscriber. m is as Forward's; it
	// must not block on the network either.
	HandOver(group, filter string, m codec.Message)
	// Release gives up claim when its connection ends, unless a newer
	// claim replaced it; session reports that the client's persistent
	// session stays on this node, offline, for a later connection on any
	// node to take (see ExportSession). It must not block.
	Release(clientID string, claim uint64, session bool)
}

// forward hands msg, routed here to matches, to the cluster; the
// broker's own $SYS topics stay on their node. s.cluster is not nil.
func (s *Server) forward(msg *Message, matches []match) {
	if strings.HasPrefix(msg.Topic, "$SYS/") {
		return
	}
	var served []string
	for i := range matches {
		if g := matches[i].group; g != nil {
			served = append(served, g.name, g.filter)
		}
	}
	s.cluster.Forward(msg.Message, served)
}

// DeliverRemote routes a message that another node published: with group
// and filter "", to every plain subscriber here whose filter matches its
// topic, matched once against the whole tree as a local PUBLISH is (an
// MQTT 3.1.1 client whose subscriptions overlap gets one copy, at the
// highest QoS granted [MQTT-3.3.5-1]; an MQTT 5 client one per
// subscription); with a filter only, to the plain subscribers of exactly
// filter (the cluster's fallback for a message whose copies it cannot
// tell apart); with a group, to one member of the shared group group on
// filter — see Cluster. The rules are a local PUBLISH's: QoS downgrade,
// retain as published, No Local against m.From, subscription identifiers,
// the subscriber's read rights, the group's strategy. It is not retained
// here, nor forwarded again. m becomes the message: the caller must not
// change what it shares afterwards. It returns the number of deliveries
// made.
func (s *Server) DeliverRemote(group, filter string, m codec.Message) int {
	msg := &Message{Message: m}
	msg.QoS = min(msg.QoS, 2)
	if msg.expired(time.Now()) {
		s.stats.dropped(dropExpired)
		return 0
	}
	var matches []match
	if group == "" && filter == "" {
		matches = s.router.matchPlain(m.Topic, nil)
	} else {
		matches = s.router.matchFilter(group, filter, m.From, m.Topic, nil)
	}
	var r routed
	s.deliver(msg, matches, &r, nil)
	return r.n
}

// LocalRetained calls f with each unexpired retained message of this node
// that the cluster replicates (the broker's own $SYS ones stay on their
// node), outside the store's lock: the cluster uploads those of a broker
// that joins it with retained messages of its own.
func (s *Server) LocalRetained(f func(m codec.Message)) {
	now := time.Now()
	var ms []*Message
	s.retained.mu.RLock()
	s.retained.walk(retainedScan{}, func(e *retainedEntry) bool {
		if s.persistRetained(e.m.Topic) && !e.m.expired(now) {
			ms = append(ms, e.m)
		}
		return true
	})
	s.retained.mu.RUnlock()
	for _, m := range ms {
		f(m.Message)
	}
}

// TakeOver closes clientID's connection on this node because a
// connection on another node took the client id over (Cluster.Claim),
// with Session taken over (MQTT 5), as a takeover on one node does. claim
// is the hold the other node replaced: a newer connection here (another
// claim) is left alone. With endSession (the new connection started
// clean) the session here ends too, as does a session left offline here;
// otherwise the session stays here, offline, until it expires (sessions
// do not move between nodes), and a will waiting for its delay is not
// sent: the client is back. It reports whether it closed or ended anything.
func (s *Server) TakeOver(clientID string, claim uint64, endSession bool) bool {
	s.mu.Lock()
	sess := s.sessions[clientID]
	if sess == nil {
		s.mu.Unlock()
		return false
	}
	sess.mu.Lock()
	c := sess.c
	sess.mu.Unlock()
	if c != nil && c.rare().claim != claim || !endSession && c == nil {
		s.mu.Unlock()
		return false
	}
	if !endSession {
		s.mu.Unlock()
		c.takenElsewhere.Store(true)
		c.log(zap.InfoLevel, "session taken over on another node")
		c.close(CloseTakenOver, codec.SessionTakenOver)
		return true
	}
	c = s.endSessionLocked(sess) // the same c: attach changes it under s.mu only
	s.mu.Unlock()
	if c != nil {
		c.log(zap.InfoLevel, "session taken over on another node, with Clean Start")
		c.close(CloseTakenOver, codec.SessionTakenOver)
	}
	return true
}

// SetRetained keeps a retained message that another node set (an empty
// payload clears it), on this node and in its store, without delivering
// it and without telling the cluster again; m.Retain does not matter. m
// becomes the message: the caller must not change what it shares
// afterwards.
func (s *Server) SetRetained(m codec.Message) {
	msg := &Message{Message: m}
	if len(msg.Payload) == 0 {
		msg.Payload = nil
	}
	msg.QoS, msg.Retain = min(msg.QoS, 2), true
	// Not bounded by the retained budget: the node where it was published
	// checked its own, and refusing it here would make the nodes differ.
	_ = s.retainHere(msg, retainedBudget{})
}

// errSessionOnline refuses to replace a session whose client is connected
// on this node.
var errSessionOnline = errors.New("core: the session is connected on this node")

// ExportSession encodes clientID's persistent session, with the store's
// records, for another node to install (ImportSession). Without take it
// encodes the subscriptions only and changes nothing. With take the
// session leaves this node: its connection here, if any, is closed with
// Session taken over (MQTT 5) as a takeover does, a will waiting for its
// delay is cancelled (the client is back), and the session's
// subscriptions, queued and inflight messages and inbound QoS 2 state
// go in the encoding and are removed here, store included. It returns
// nil, changing nothing, when there is no persistent session of clientID
// here or its encoding would exceed maxBytes (0: no limit).
func (s *Server) ExportSession(clientID string, maxBytes int, take bool) []byte {
	s.mu.Lock()
	sess := s.sessions[clientID]
	if sess == nil {
		s.mu.Unlock()
		return nil
	}
	sess.mu.Lock()
	if !sess.persistent() || sess.pending {
		sess.mu.Unlock()
		s.mu.Unlock()
		return nil
	}
	b := sess.exportLocked(time.Now(), take)
	if maxBytes > 0 && len(b) > maxBytes {
		sess.mu.Unlock()
		s.mu.Unlock()
		s.log.Warn("session not moved to another node: too large for one NATS message", zap.String("client_id", clientID),
			zap.Int("bytes", len(b)), zap.Int("max_bytes", maxBytes))
		return nil
	}
	if !take {
		sess.mu.Unlock()
		s.mu.Unlock()
		return b
	}
	c := sess.c
	sess.c = nil
	sess.moved = true // its connection's detach keeps a delayed will unsent
	if sess.will.timer != nil {
		sess.will.timer.Stop()
	}
	sess.will.timer, sess.will.publish = nil, nil
	sess.mu.Unlock()
	s.discardLocked(sess)
	s.mu.Unlock()
	if c != nil {
		c.takenElsewhere.Store(true)
		c.log(zap.InfoLevel, "session moved to another node")
		c.close(CloseTakenOver, codec.SessionTakenOver)
	}
	return b
}

// exportLocked encodes the session for ExportSession: the format version,
// the session record, the inbound record, then, with msgs, each message
// (inflight ones first, in send order, then the queue) as a flags byte
// (1: sent before, so DUP; 2: in flight, its packet id and PUBREL state
// kept) and its delivery record. s.mu is held.
func (s *session) exportLocked(now time.Time, msgs bool) []byte {
	b := []byte{recordVersion}
	b = appendString(b, string(s.recordLocked(now.Unix()).append(nil)))
	in := inboundRecord{IDs: make([]uint16, 0, len(s.qos2in.ids))}
	for id := range s.qos2in.ids {
		in.IDs = append(in.IDs, id)
	}
	slices.Sort(in.IDs)
	b = appendString(b, string(in.append(nil)))
	if !msgs {
		return binary.AppendUvarint(b, 0)
	}
	inflight := make([]*outMsg, 0, len(s.inflight))
	for _, m := range s.inflight {
		inflight = append(inflight, m)
	}
	slices.SortFunc(inflight, func(a, b *outMsg) int { return cmp.Compare(a.order, b.order) })
	n := 0
	var recs []byte
	for _, m := range inflight {
		recs = append(recs, 3)
		recs = appendString(recs, string(appendDeliveryRecord(nil, m.msg, m.qos, m.retain, m.subID, m.id, m.pubrel)))
		n++
	}
	for _, d := range s.queue[s.qhead:] {
		if d.msg == nil || d.msg.expired(now) {
			continue
		}
		recs = append(recs, boolByte(d.dup))
		recs = appendString(recs, string(appendMessageRecord(nil, d.msg, d.qos, d.retain, d.subID)))
		n++
	}
	b = binary.AppendUvarint(b, uint64(n))
	return append(b, recs...)
}

// ImportSession installs a session that another node exported
// (ExportSession) as clientID's offline session here, in memory and in
// the store, for the client's connection to resume: its subscriptions
// (announced to the cluster as any), its messages to be sent, those sent
// before with DUP and their packet ids, in their order.
//
// A move is in two steps, so that no message published meanwhile is
// lost. Without final, data holds the subscriptions (ExportSession
// without take): the session is installed with them, pending, and queues
// what comes for it while the other node still does the same. With
// final, data is the whole session, which goes before what the pending
// session queued; those messages may have reached the other node too, so
// they go with DUP. An offline session of clientID here, older, is
// replaced; one whose client is connected here is not (errSessionOnline).
func (s *Server) ImportSession(clientID string, data []byte, final bool) error {
	sr, in, msgs, err := decodeExport(data)
	if err != nil {
		return err
	}
	now := time.Now()
	s.mu.Lock()
	sess := s.sessions[clientID]
	pending := false
	if sess != nil {
		sess.mu.Lock()
		online := sess.c != nil
		pending = sess.pending
		if !online && !pending && sess.will.timer != nil {
			sess.will.timer.Stop() // the client is back, with its newer session
			sess.will.timer, sess.will.publish = nil, nil
		}
		sess.mu.Unlock()
		if online {
			s.mu.Unlock()
			return errSessionOnline
		}
		if !pending {
			s.discardLocked(sess)
			sess = nil
		}
	}
	if !pending {
		sess = newSession(s, clientID)
		sess.pending = !final
		sess.qos2in.base = s.newInBase()
		sess.qos2in.seq = sess.qos2in.base
		s.inBaseMax = max(s.inBaseMax, sess.qos2in.seq)
		s.putSessionLocked(sess)
	}
	s.setSubscriptions(sess, sr.Subs)
	sess.mu.Lock()
	sess.version, sess.expiry = sr.Version, sr.Expiry
	if sr.OwnerKnown {
		sess.setOwner(sr.Owner)
	}
	if !final {
		sess.mu.Unlock()
		s.mu.Unlock()
		return nil
	}
	sess.pending, sess.replayed = false, 0
	for _, id := range in.IDs {
		if sess.qos2in.ids == nil {
			sess.qos2in.ids = map[uint16]struct{}{}
		}
		sess.qos2in.ids[id] = struct{}{}
	}
	// What the pending session queued goes after the moved messages, with
	// new store sequences: the store is written again from scratch.
	var queued []delivery
	for _, d := range sess.queue[sess.qhead:] {
		if d.msg != nil {
			d.dup = d.qos > 0
			queued = append(queued, d)
		}
	}
	sess.queue, sess.qhead, sess.holes, sess.dropAt, sess.qbytes, sess.seq = nil, 0, 0, 0, 0, 0
	s.stats.pending.Add(-int64(sess.load.Swap(0)))
	if pending {
		s.storeDelete(clientID)
	}
	var moved []delivery
	for _, em := range msgs {
		sm := em.storedMsg
		if sm.msg.expired(now) {
			continue
		}
		sm.msg.inSeq = 0 // numbered by the other node's publishers: meaningless here
		d := delivery{msg: sm.msg, qos: sm.qos, retain: sm.retain, subID: sm.subID, dup: em.sent}
		if em.inflight && sm.id != 0 && sm.qos > 0 {
			if _, used := sess.inflight[sm.id]; !used {
				sess.storeAddLocked(&d)
				sess.order++
				s.stats.inflight.Add(1)
				if sess.inflight == nil {
					sess.inflight = map[uint16]*outMsg{}
				}
				m := &outMsg{delivery: d, id: sm.id, pubrel: sm.pubrel, resend: true, dup: true, order: sess.order}
				sess.inflight[sm.id] = m
				if d.seq != 0 && d.qos == 2 {
					s.storeUpdate(clientID, m)
				}
				sess.addLoad(1)
				sess.qbytes += sm.msg.size()
				continue
			}
		}
		moved = append(moved, d)
	}
	sess.queue = append(moved, queued...)
	for i := range sess.queue {
		sess.storeAddLocked(&sess.queue[i])
		sess.addLoad(1)
		sess.qbytes += sess.queue[i].msg.size()
	}
	rec := sess.recordLocked(sr.DisconnectedAt)
	var inbound []byte
	if len(sess.qos2in.ids) > 0 {
		inbound = sess.inboundLocked(0)
	}
	sess.mu.Unlock()
	s.mu.Unlock()
	s.storeSave(clientID, rec)
	if inbound != nil {
		if err := s.store.PutInbound(clientID, inbound); err != nil {
			s.storeError("store: saving a moved session's inbound state", err, zap.String("client_id", clientID))
		}
	}
	if err := s.syncStore(); err != nil {
		s.storeError("store: sync of a moved session failed", err, zap.String("client_id", clientID))
	}
	gone := now
	if sr.DisconnectedAt != 0 {
		gone = time.Unix(sr.DisconnectedAt, 0)
	}
	s.scheduleExpiry(sess, gone)
	s.log.Info("session moved here from another node", zap.String("client_id", clientID),
		zap.Int("subscriptions", len(sr.Subs)), zap.Int("messages", len(msgs)), zap.Int("queued_meanwhile", len(queued)))
	return nil
}

// storeAddLocked gives a QoS 1/2 delivery of a persistent session its
// store sequence and writes it; one the store refuses stays in memory
// (seq 0): a move must not lose it. s.mu is held.
func (s *session) storeAddLocked(d *delivery) {
	d.seq = 0
	if d.qos == 0 || !s.persistent() {
		return
	}
	s.seq++
	d.seq = s.seq
	if s.srv.storeAdd(s.id, *d) != nil {
		d.seq = 0
	}
}

// setSubscriptions makes subs the subscriptions of sess (in the router
// too), adding the new ones before removing the others, so that the
// cluster's interest in a filter both use never lapses. Server.mu is held.
func (s *Server) setSubscriptions(sess *session, subs []storedSub) {
	want := make(map[string]storedSub, len(subs))
	for _, sub := range subs {
		group, filter, _, err := codec.ParseShared([]byte(sub.Filter))
		if err != nil {
			continue
		}
		want[sub.Filter] = sub
		s.router.subscribe(sess, string(filter), string(group), sub.opts(s))
	}
	sess.mu.Lock()
	old := sess.subs
	sess.subs = want
	sess.mu.Unlock()
	for f := range old {
		if _, kept := want[f]; !kept {
			group, filter, _, _ := codec.ParseShared([]byte(f))
			s.router.unsubscribe(sess, string(filter), string(group))
		}
	}
}

// SessionOwner reports whether clientID has a session here, connected
// or not, and the identity it belongs to when known: another node asks
// before its connection takes the id over (cluster.Local).
func (s *Server) SessionOwner(clientID string) (owner string, known, ok bool) {
	s.mu.Lock()
	sess := s.sessions[clientID]
	s.mu.Unlock()
	if sess == nil {
		return "", false, false
	}
	if o := sess.owner.Load(); o != nil {
		return *o, true, true
	}
	return "", false, true
}

// DropImport ends clientID's pending session (ImportSession without
// final) when its move failed, with what it queued.
func (s *Server) DropImport(clientID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[clientID]
	if sess == nil {
		return
	}
	sess.mu.Lock()
	pending := sess.pending && sess.c == nil
	sess.mu.Unlock()
	if pending {
		s.discardLocked(sess)
	}
}

// exportedMsg is one message of an exported session.
type exportedMsg struct {
	storedMsg
	sent     bool // sent before: DUP when sent again
	inflight bool // in flight: its packet id and PUBREL state stand
}

// decodeExport reads what exportLocked wrote.
func decodeExport(b []byte) (sr sessionRecord, in inboundRecord, msgs []exportedMsg, err error) {
	d := recDecoder{b: b}
	if v := d.byte(); d.err == nil && !readable(v) {
		return sr, in, nil, formatError("moved session", v)
	}
	rec, inRec := d.string(), d.string()
	if d.err != nil {
		return sr, in, nil, d.err
	}
	if err := sr.decode([]byte(rec)); err != nil {
		return sr, in, nil, err
	}
	if err := in.decode([]byte(inRec)); err != nil {
		return sr, in, nil, err
	}
	n := d.uvarint()
	if n > uint64(len(b)) {
		return sr, in, nil, errRecord
	}
	msgs = make([]exportedMsg, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		flags := d.byte()
		r := d.string()
		if d.err != nil {
			break
		}
		if flags > 3 {
			return sr, in, nil, errRecord
		}
		sm, err := decodeDeliveryRecord([]byte(r))
		if err != nil {
			return sr, in, nil, err
		}
		msgs = append(msgs, exportedMsg{storedMsg: sm, sent: flags&1 != 0, inflight: flags&2 != 0})
	}
	return sr, in, msgs, d.done()
}
