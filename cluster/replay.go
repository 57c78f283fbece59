package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server/gsl"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// Replay closes the window in which no node holds a dead node's sessions.
//
// A node that dies takes its sessions' NATS interest with it: until a
// survivor rebuilds a session from the replicas (death noticed, then
// JetStream's leader elections: seconds), what the other nodes publish
// for it reaches no node, yet their publishers had it acknowledged. So,
// with session replicas:
//
//   - every node keeps the QoS 1/2 messages it forwarded lately (the ring,
//     Options.ReplayWindow and ReplayMaxBytes), each numbered in a header
//     (hdrSeq; the numbers start at the node's start time in nanoseconds,
//     so that a restarted node's follow its earlier ones), numbered and
//     published under one lock, so that NATS carries them in number order;
//   - every node writes to the session stream, per origin node, the last
//     number it routed, once the records that routing queued are in the
//     stream ($XMQ.NAME.rep.NODE.$wm.ORIGIN, the mark): every message of
//     that origin up to the mark is in the dead node's records, or was
//     never for its persistent sessions;
//   - the survivor that rebuilds a session installs its subscriptions
//     first, pending (it queues what comes), sends the replay request to
//     every node (after its own NATS server has the new interest, so a
//     node that reads the request routes its later messages here), and
//     puts what they forwarded after the dead node's marks on the
//     session's filters before what the session queued meanwhile, with
//     DUP; then the records go before both.
//
// A replay is bounded three ways: the dead node's marks (for all its
// sessions at once), the ring's window (read with its age checked, so
// nothing older is ever given), and, per session, its start on the node
// whose records it comes from (core skips what was forwarded before it:
// hdrAt against the record, so the nodes' clocks are compared). The node
// that took a replay's messages into its sessions then moves its own marks
// to what the answers covered (markReplayed), so that a later replay of
// those sessions does not give them again.
//
// A message is lost only when it left its node's ring before the session
// was rebuilt (the window is too short for the time the cluster took), or
// when its own node died too. Messages published on the dead node itself
// are in its records (core acknowledges after they are replicated).

// hdrSeq is a forwarded QoS 1/2 message's number on its node (base 36);
// the replay's answers carry hdrSubject (the message's subject) and hdrAt
// (when its node forwarded it) and, last, hdrEnd (the answering node) with
// hdrTruncated when its ring no longer reached back to the mark asked for.
const (
	hdrSeq       = "Xmq-Seq"
	hdrSubject   = "Xmq-Subject"
	hdrAt        = "Xmq-At" // Unix nanoseconds, base 36
	hdrEnd       = "Xmq-End"
	hdrTruncated = "Xmq-Truncated"
	hdrLast      = "Xmq-Last" // on the end: the answering node's last number then
)

// replaySubject is where every node answers replay requests.
func replaySubject(name string) string { return "$XMQ." + name + ".replay" }

// replayTimeout bounds the wait for every node's replay answer.
const replayTimeout = 5 * time.Second

// replayer is the replay side of a node: the ring of what it forwarded
// lately and the answers to the other nodes' replay requests from it, the
// replays into the sessions rebuilt here (install, replayInto), and the
// replay of a node that comes back (rejoin).
type replayer struct {
	*link
	rep       *replica // the marks, the dead node's records
	interests *interests
	members   *membership // the nodes to wait for
	inbox     *inbox
	// send publishes a forwarded message (Cluster.publish), set by New.
	send func(m *nats.Msg, topic string)
	ring recent // what this node forwarded lately
	// rejoined are, per other node, its last message that the replay
	// of this node's return brought, on the filters rejoinedFilters;
	// written before routeLoop starts (rejoinDone closed), read-only
	// after.
	rejoined        map[string]uint64
	rejoinedFilters map[string]bool
	rejoinDone      chan struct{}
	// replays are the replays open for more sessions to join, by dead
	// node (replayInto).
	replayMu     sync.Mutex
	replays      map[string]*replayBatch
	replayedMsgs atomic.Int64 // deliveries replayed (Stats.Replayed)
}

// recentMsg is a message in the ring.
type recentMsg struct {
	seq  uint64
	at   int64 // Unix nanoseconds
	m    *nats.Msg
	size int
}

// recent is the ring of the QoS 1/2 messages this node forwarded lately.
type recent struct {
	mu    sync.Mutex
	seq   uint64
	msgs  []recentMsg // msgs[head:] in number order
	head  int
	bytes int64
	// evicted is the number of the last message that left the ring, or
	// the first number less one: what a previous run of the node
	// forwarded is not here either.
	evicted uint64
}

// start numbers the ring from now, in nanoseconds.
func (r *recent) start(now time.Time) {
	r.seq, r.evicted = uint64(now.UnixNano()), uint64(now.UnixNano())
}

// recentOverhead is what a message in the ring costs beside its subject,
// headers and payload (the struct, the nats.Msg, the header map).
const recentOverhead = 256

// publishNumbered numbers m, keeps it in the ring and publishes it, under
// the ring's lock so that the wire order is the numbers' order.
func (rp *replayer) publishNumbered(m *nats.Msg, topic string) {
	r := &rp.ring
	now := time.Now().UnixNano()
	size := recentOverhead + len(m.Subject) + len(m.Data)
	for k, vs := range m.Header {
		size += len(k)
		for _, v := range vs {
			size += len(v)
		}
	}
	r.mu.Lock()
	r.seq++
	m.Header[hdrSeq] = []string{strconv.FormatUint(r.seq, 36)}
	r.msgs = append(r.msgs, recentMsg{seq: r.seq, at: now, m: m, size: size})
	r.bytes += int64(size)
	r.trimLocked(now, rp.opts.ReplayWindow, rp.opts.ReplayMaxBytes)
	rp.send(m, topic)
	r.mu.Unlock()
}

// trimLocked drops from the ring what is older than window at now (Unix
// nanoseconds) or past maxBytes. Reads trim too: a node that forwards
// nothing for a while would otherwise keep, and replay, messages of any
// age. r.mu is held.
func (r *recent) trimLocked(now int64, window time.Duration, maxBytes int64) {
	old := now - int64(window)
	for r.head < len(r.msgs) && (r.msgs[r.head].at < old || r.bytes > maxBytes) {
		r.bytes -= int64(r.msgs[r.head].size)
		r.evicted = r.msgs[r.head].seq
		r.msgs[r.head] = recentMsg{}
		r.head++
	}
	if r.head > 1024 && r.head > len(r.msgs)/2 {
		r.msgs = append(r.msgs[:0], r.msgs[r.head:]...)
		r.head = 0
	}
}

// since returns the messages of the ring numbered after after whose topic
// matches one of filters, in number order, none older than the replay
// window, whether the ring still reaches back to after (false: some may
// be gone; after 0, no mark known, asks for all of it), and the last
// number given so far.
func (rp *replayer) since(after uint64, filters []string) ([]recentMsg, bool, uint64) {
	r := &rp.ring
	r.mu.Lock()
	r.trimLocked(time.Now().UnixNano(), rp.opts.ReplayWindow, rp.opts.ReplayMaxBytes)
	msgs := make([]recentMsg, 0, len(r.msgs)-r.head)
	for _, rm := range r.msgs[r.head:] {
		if rm.seq > after {
			msgs = append(msgs, rm)
		}
	}
	whole, last := after == 0 || r.evicted <= after, r.seq
	r.mu.Unlock()
	// The filters as NATS would match them (a subject tree, not each
	// filter against each message: a batch may hold thousands).
	sl := gsl.NewSimpleSublist()
	for _, f := range filters {
		for _, subj := range FilterSubjects(rp.opts.SubjectPrefix, f) {
			_ = sl.Insert(subj, struct{}{})
		}
	}
	var out []recentMsg
	for _, rm := range msgs {
		if sl.HasInterest(rm.m.Subject) {
			out = append(out, rm)
		}
	}
	return out, whole, last
}

// replayRequest is what a node rebuilding a dead node's session asks.
type replayRequest struct {
	Dead    string            `json:"dead"`
	Filters []string          `json:"filters"`
	After   map[string]uint64 `json:"after"` // per origin node, the dead node's mark
}

// serveReplay answers a replay request: one message per message of the
// ring asked for, then the end.
func (rp *replayer) serveReplay(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	var req replayRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		return
	}
	if req.Dead == rp.opts.Node {
		return // it is not dead: it has its sessions
	}
	msgs, whole, last := rp.since(req.After[rp.opts.Node], req.Filters)
	for _, rm := range msgs {
		out := &nats.Msg{Subject: m.Reply, Data: rm.m.Data, Header: make(nats.Header, len(rm.m.Header)+2)}
		for k, v := range rm.m.Header {
			out.Header[k] = v
		}
		out.Header.Set(hdrSubject, rm.m.Subject)
		out.Header.Set(hdrAt, strconv.FormatInt(rm.at, 36))
		if err := rp.nc.PublishMsg(out); err != nil {
			break
		}
	}
	end := &nats.Msg{Subject: m.Reply, Header: nats.Header{hdrEnd: []string{rp.opts.Node},
		hdrLast: []string{strconv.FormatUint(last, 36)}}}
	if !whole {
		end.Header.Set(hdrTruncated, "1")
	}
	_ = rp.nc.PublishMsg(end)
}

// replayed is a message a replay brought.
type replayed struct {
	msg codec.Message
	// at is when its node forwarded it; zero when an older node's answer
	// did not say.
	at time.Time
}

// fetchReplay asks every node (this one included) for what it forwarded
// on filters after dead's marks after, and returns it, each node's in
// number order, with each node's last number when it answered. The
// request goes once this node's NATS server has the interest it is for:
// a node that reads it routes what it publishes next to this node.
func (rp *replayer) fetchReplay(dead string, filters []string, after map[string]uint64) ([]replayed, map[string]uint64) {
	want, counted := rp.members.peers()
	delete(want, dead)
	data, _ := json.Marshal(replayRequest{Dead: dead, Filters: filters, After: after})
	inbox := rp.nc.NewRespInbox()
	// A callback, not a channel: NATS drops what a full channel cannot
	// take, and an answer may be thousands of messages. A node's end
	// comes after its messages, which the callback has kept by then.
	var mu sync.Mutex
	var got []*nats.Msg
	taken := false // got is the caller's: late answers are dropped
	ends := make(chan *nats.Msg, 64)
	truncated := 0
	last := map[string]uint64{}
	sub, err := rp.nc.Subscribe(inbox, func(m *nats.Msg) {
		if m.Header.Get(hdrEnd) != "" {
			select {
			case ends <- m:
			case <-rp.stop:
			}
			return
		}
		mu.Lock()
		if !taken {
			got = append(got, m)
		}
		mu.Unlock()
	})
	if err == nil {
		_ = sub.SetPendingLimits(-1, -1)
		if rp.nc.PublishRequest(replaySubject(rp.opts.Name), inbox, data) == nil {
			truncated = rp.collectReplay(ends, want, counted, last)
		}
		_ = sub.Unsubscribe()
	}
	mu.Lock()
	taken = true
	all := got
	mu.Unlock()
	own, whole, _ := rp.since(after[rp.opts.Node], filters)
	if !whole {
		truncated++
	}
	if truncated > 0 {
		rp.log.Warn("messages published while no node held a dead node's session are partly gone: the replay window is shorter than the time it took",
			zap.String("node", dead), zap.Int("nodes_truncated", truncated), zap.Duration("replay_window", rp.opts.ReplayWindow))
	}
	out := make([]replayed, 0, len(all)+len(own))
	add := func(m *nats.Msg, subj string, at time.Time) {
		topic, err := Topic(rp.opts.SubjectPrefix, subj)
		if err != nil {
			return
		}
		var in incoming
		decodeMsg(&in, topic, m.Data, m.Header)
		out = append(out, replayed{msg: in.msg, at: at})
	}
	for _, m := range all {
		var at time.Time
		if ns, err := strconv.ParseInt(m.Header.Get(hdrAt), 36, 64); err == nil {
			at = time.Unix(0, ns)
		}
		add(m, m.Header.Get(hdrSubject), at)
	}
	for _, rm := range own {
		add(rm.m, rm.m.Subject, time.Unix(0, rm.at))
	}
	return out, last
}

// collectReplay waits for the end of every node of want (with an
// external NATS whose nodes are not counted, until pingQuiet after the
// last end), or replayTimeout; it returns the number of nodes whose ring
// was truncated, and notes each node's last number in last.
func (rp *replayer) collectReplay(ends chan *nats.Msg, want map[string]bool, counted bool, last map[string]uint64) int {
	if counted && len(want) == 0 {
		return 0
	}
	truncated := 0
	deadline := time.NewTimer(replayTimeout)
	defer deadline.Stop()
	var quiet <-chan time.Time
	for {
		select {
		case m := <-ends:
			node := m.Header.Get(hdrEnd)
			if m.Header.Get(hdrTruncated) != "" {
				truncated++
			}
			if n, err := strconv.ParseUint(m.Header.Get(hdrLast), 36, 64); err == nil {
				last[node] = n
			}
			delete(want, node)
			if counted && len(want) == 0 {
				return truncated
			}
			if !counted {
				quiet = time.After(pingQuiet)
			}
		case <-quiet:
			return truncated
		case <-rp.stop:
			return truncated
		case <-deadline.C:
			rp.warn("nodes did not answer a replay in time: a restored session may miss what they published while no node held it",
				zap.Int("missing", len(want)))
			return truncated
		}
	}
}

// install installs clientID's session from recs, which node (dead)
// wrote, with what the nodes published for it since node's marks (see
// Replay above); withWill schedules its will. The caller holds clientID's
// claims.serialize: two installs of one session here would lose what the
// first queued.
func (rp *replayer) install(st *state, node, clientID string, recs *replicaRecords, withWill bool) (bool, error) {
	filters, err := rp.local.PendSession(clientID, recs.session)
	if err != nil {
		return false, err
	}
	var last map[string]uint64
	if len(filters) > 0 {
		last = rp.replayInto(st, node, clientID, filters)
	}
	// On routeLoop, after the replay: what the pending session queued
	// meanwhile stays after the replayed messages, the records go first.
	err = rp.inbox.run(func() error {
		err := rp.local.RestoreSession(clientID, recs.session, recs.inbound, recs.seqs, recs.msgs, recs.will, withWill)
		if err == nil {
			rp.markReplayed(last)
		}
		return err
	})
	if err != nil {
		rp.local.DropImport(clientID)
		return false, err
	}
	return true, nil
}

// replayBatchWindow is how long the first session of a dead node to be
// rebuilt here waits for others to share its replay: a fleet reconnecting
// (or an adoption) makes one request per window, not one per session.
const replayBatchWindow = 10 * time.Millisecond

// replayBatch is the replay that the sessions of a dead node rebuilt here
// at about the same time share.
type replayBatch struct {
	ids     map[string]bool
	filters map[string]bool
	ready   chan struct{}
	last    map[string]uint64 // the answering nodes' last numbers, once ready
}

// replayInto puts into clientID's pending session (and those sharing the
// batch) what the nodes published on filters after node's marks, and
// returns once it is there, with each answering node's last number then.
func (rp *replayer) replayInto(st *state, node, clientID string, filters []string) map[string]uint64 {
	rp.replayMu.Lock()
	b := rp.replays[node]
	leader := b == nil
	if leader {
		b = &replayBatch{ids: map[string]bool{}, filters: map[string]bool{}, ready: make(chan struct{})}
		if rp.replays == nil {
			rp.replays = map[string]*replayBatch{}
		}
		rp.replays[node] = b
	}
	b.ids[clientID] = true
	for _, f := range filters {
		b.filters[f] = true
	}
	rp.replayMu.Unlock()
	if !leader {
		select {
		case <-b.ready:
			return b.last
		case <-rp.stop:
			return nil
		}
	}
	defer close(b.ready)
	select {
	case <-time.After(replayBatchWindow):
	case <-rp.stop:
		return nil
	}
	rp.replayMu.Lock()
	delete(rp.replays, node) // closed: the next session starts another
	rp.replayMu.Unlock()
	start := time.Now()
	// The sessions' subscriptions are on this node's NATS server before
	// the request leaves (see Replay).
	if err := rp.interests.syncInterest(sessionTimeout); err != nil {
		rp.warn("restored sessions' subscriptions are not on NATS yet", zap.String("node", node), zap.Error(err))
	}
	list := make([]string, 0, len(b.filters))
	for f := range b.filters {
		list = append(list, f)
	}
	msgs, last := rp.fetchReplay(node, list, rp.readMarksRetrying(st, node))
	b.last = last
	n := 0
	// On routeLoop: the answers came after what their nodes routed here
	// before them, which the pending sessions queued; nothing is routed
	// between the replay and its going in.
	_ = rp.inbox.run(func() error {
		for _, m := range msgs {
			n += rp.local.ReplayPending(b.ids, m.msg, m.at)
		}
		return nil
	})
	rp.replayedMsgs.Add(int64(n))
	rp.log.Info("messages published while no node held a dead node's sessions replayed into them", zap.String("node", node),
		zap.Int("sessions", len(b.ids)), zap.Int("messages", len(msgs)), zap.Int("deliveries", n),
		zap.Duration("took", time.Since(start)))
	return last
}

// markReplayed makes last, each answering node's last number when it
// answered a replay into sessions here, this node's marks, once what the
// replay brought is queued for the store. Every message of that node up
// to it is then in this node's records or was never for its sessions:
// the replay had those on the replayed sessions' filters (the dead
// node's marks covering the older ones), and
// those on the others' filters came before the answer on the same
// connection and were routed first. Without this, a node that routes
// nothing of that node's keeps an old mark, and a later replay of these
// sessions from it gives them the same messages again.
func (rp *replayer) markReplayed(last map[string]uint64) {
	for origin, seq := range last {
		rp.rep.mark(origin, seq)
	}
}

// markKind is the record kind of a node's marks (never a client id's
// key: '$' is not in base64url).
const markKind = "$wm"

// readMarks reads node's marks: per origin node, the last number it
// routed with its records in the stream.
func (r *replica) readMarks(st *state, node string) (map[string]uint64, error) {
	prefix := repPrefix(r.opts.Name, node) + markKind + "."
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	info, err := st.sessions.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		return nil, err
	}
	marks := map[string]uint64{}
	for subj := range info.State.Subjects {
		m, err := st.sessions.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if seq, err := strconv.ParseUint(string(m.Data), 36, 64); err == nil {
			marks[strings.TrimPrefix(subj, prefix)] = seq
		}
	}
	return marks, nil
}

// readMarksRetrying is readMarks, tried for as long as the records' read
// (the stream may be electing a leader); without them the whole rings
// are replayed (more copies, with DUP, none lost).
func (rp *replayer) readMarksRetrying(st *state, node string) map[string]uint64 {
	var marks map[string]uint64
	err := rp.retry(replicaReadTimeout, func() (err error) {
		marks, err = rp.rep.readMarks(st, node)
		return err
	})
	if err != nil {
		rp.warn("cannot read a dead node's replay marks: whole rings are replayed", zap.String("node", node), zap.Error(err))
		marks = map[string]uint64{}
	}
	return marks
}

// markEvery is how often the marks of messages that queued no record
// are written.
const markEvery = 250 * time.Millisecond

// mark is a number of an origin node routed here, with the count of
// writes queued then: once those are in the stream, so is the mark.
type mark struct{ seq, queued uint64 }

// mark notes that the message numbered seq from origin was routed here,
// or, from markReplayed, that a replay covered it: a number not above the
// last noted changes nothing (a mark moving back would have messages it
// covered replayed again).
func (r *replica) mark(origin string, seq uint64) {
	r.mu.Lock()
	ms := r.marks[origin]
	prev := r.written[origin]
	if n := len(ms); n > 0 {
		prev = ms[n-1].seq
	}
	if seq <= prev {
		r.mu.Unlock()
		return
	}
	if n := len(ms); n > 0 && ms[n-1].queued == r.queued {
		ms[n-1].seq = seq
	} else {
		ms = append(ms, mark{seq, r.queued})
	}
	r.marks[origin] = ms
	r.mu.Unlock()
}

// writeMarks publishes, per origin, the newest mark whose writes are in
// the stream, when it moved. A mark that does not reach the stream only
// makes a replay longer (its answers go with DUP), so none is awaited.
func (r *replica) writeMarks(st *state) {
	r.mu.Lock()
	var out map[string]uint64
	for origin, ms := range r.marks {
		i := 0
		for i < len(ms) && ms[i].queued <= r.inStream {
			i++
		}
		if i == 0 {
			continue
		}
		if seq := ms[i-1].seq; seq != r.written[origin] {
			if out == nil {
				out = map[string]uint64{}
			}
			out[origin] = seq
			r.written[origin] = seq
		}
		r.marks[origin] = append(ms[:0], ms[i:]...)
	}
	r.mu.Unlock()
	for origin, seq := range out {
		_, _ = st.js.PublishMsgAsync(&nats.Msg{Subject: repPrefix(r.opts.Name, r.opts.Node) + markKind + "." + origin,
			Data: []byte(strconv.FormatUint(seq, 36))})
	}
}

// A node that comes back (its sessions in its store, with SessionReplicas
// 1 only there, and their interest gone while it was down: a crash, or a
// graceful stop in a rolling restart, whose sessions nobody adopts)
// fetches what the others published for them meanwhile. Its marks are in
// Options.MarksFile: marksLoop saves them, after a Sync of the store,
// every markEvery while messages come; rejoin, before routeLoop routes
// anything, asks every node for what it forwarded after them on the
// filters of this node's plain subscriptions (its sessions', restored
// from the store), hands that to the broker (Local.DeliverReplayed, with
// DUP), and notes each node's last number then: what arrives from it on
// those filters up to that number was in the replay, and is dropped.

// rejoinRoutes bounds the wait for the routes to the other nodes before
// the replay of a node that comes back.
const rejoinRoutes = 5 * time.Second

// loadMarks reads the marks a previous run saved, nil for none.
func (r *replica) loadMarks() map[string]uint64 {
	if r.opts.MarksFile == "" {
		return nil
	}
	b, err := os.ReadFile(r.opts.MarksFile)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			r.log.Warn("cannot read the replay marks: what other nodes published while this node was down is not fetched",
				zap.String("file", r.opts.MarksFile), zap.Error(err))
		}
		return nil
	}
	var marks map[string]uint64
	if err := json.Unmarshal(b, &marks); err != nil {
		r.log.Warn("replay marks unreadable: what other nodes published while this node was down is not fetched",
			zap.String("file", r.opts.MarksFile), zap.Error(err))
		return nil
	}
	return marks
}

// marksLoop saves the marks to Options.MarksFile when they move, the
// store synced first: a mark covers only messages whose records a crash
// keeps.
func (r *replica) marksLoop() {
	defer r.done.Done()
	t := time.NewTicker(markEvery)
	defer t.Stop()
	saved := map[string]uint64{}
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		marks := make(map[string]uint64, len(r.marks))
		moved := false
		for origin, ms := range r.marks {
			if len(ms) > 0 {
				marks[origin] = ms[len(ms)-1].seq
				r.marks[origin] = ms[len(ms)-1:]
			} else {
				// With session replicas writeMarks takes the marks
				// whose records are in the stream: the last it wrote.
				marks[origin] = max(saved[origin], r.written[origin])
			}
			moved = moved || marks[origin] != saved[origin]
		}
		r.mu.Unlock()
		if !moved {
			continue
		}
		if r.store != nil {
			if err := r.store.Sync(); err != nil {
				r.warn("replay marks not saved: the store's sync failed", zap.Error(err))
				continue
			}
		}
		if err := writeFileAtomic(r.opts.MarksFile, marks); err != nil {
			r.warn("replay marks not saved", zap.String("file", r.opts.MarksFile), zap.Error(err))
			continue
		}
		saved = marks
	}
}

// writeFileAtomic writes v as JSON to name through a temporary file and
// a rename, synced: a crash leaves the old file or the new one.
func writeFileAtomic(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := name + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, name)
}

// replayedOnRejoin reports whether a message for the plain subscribers
// that comes now was in the replay of this node's return (rejoin):
// numbered up to its node's last one in the replay, on a topic one of the
// replayed filters matches. The replay went to every plain subscriber of
// the topic, so all of the message is dropped, whichever filter brought
// its first copy; only messages in flight when the replay ended get past
// the number test.
func (rp *replayer) replayedOnRejoin(in *incoming) bool {
	if in.seq == 0 || in.seq > rp.rejoined[in.node] {
		return false
	}
	for f := range rp.rejoinedFilters {
		if codec.Match([]byte(f), []byte(in.msg.Topic)) {
			return true
		}
	}
	return false
}

// rejoin replays into this node's sessions what the other nodes published
// on their filters after marks (nil: nothing to do), before routeLoop.
func (rp *replayer) rejoin(marks map[string]uint64) {
	if marks == nil {
		return
	}
	start := time.Now()
	if rp.emb != nil {
		for rp.emb.srv.NumRoutes() < rp.nodeCount()-1 && time.Since(start) < rejoinRoutes {
			select {
			case <-rp.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	if err := rp.interests.syncInterest(sessionTimeout); err != nil {
		rp.warn("this node's subscriptions are not on NATS yet: the replay may miss messages", zap.Error(err))
	}
	filters := rp.interests.plainFilters()
	if len(filters) == 0 {
		return
	}
	list := make([]string, 0, len(filters))
	for f := range filters {
		list = append(list, f)
	}
	msgs, last := rp.fetchReplay(rp.opts.Node, list, marks)
	n := 0
	for _, m := range msgs {
		n += rp.local.DeliverReplayed(m.msg, m.at)
	}
	rp.markReplayed(last) // saved by marksLoop after a Sync of what went in
	rp.rejoined, rp.rejoinedFilters = last, filters
	rp.replayedMsgs.Add(int64(n))
	rp.log.Info("messages published while this node was down replayed into its sessions", zap.Int("messages", len(msgs)),
		zap.Int("deliveries", n), zap.Int("filters", len(list)), zap.Duration("took", time.Since(start)))
}
