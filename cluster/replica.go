package cluster

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// Session replicas (Options.SessionReplicas > 1): every record core
// writes to its store for a persistent session — the session, its
// messages, its inbound QoS 2 state, its pending will — goes to one
// JetStream stream per cluster as well, NAME_sessions, whatever the
// number of clients (never one JetStream object per session):
//
//	$XMQ.NAME.rep.NODE.ID.s        the session record
//	$XMQ.NAME.rep.NODE.ID.i        its inbound QoS 2 record
//	$XMQ.NAME.rep.NODE.ID.w        its pending will
//	$XMQ.NAME.rep.NODE.ID.m.SEQ    a message owed to it
//
// NODE is the node whose store wrote it, ID the client id in unpadded
// base64url. The stream keeps the last message per subject; a deletion
// is an empty message with a one-second TTL (the record it replaces is
// gone at once, the marker a second later), the end of a session one
// purge of its subjects. The writes are published asynchronously in the
// order core made them, and the store's Sync waits until every write
// before it is in the stream (on its replicas): core acknowledges a QoS
// 1/2 PUBLISH after a Sync, so what a PUBACK covers is on another node.
//
// When the node is gone, another rebuilds a session from these records
// (core's RestoreSession): the node its client connects to, when the old
// node does not answer, or the one that adopts it (liveness.go).

// Store is the store core writes (core.Store's methods, which cluster
// does not import): ReplicateStore wraps one.
type Store interface {
	PutSession(clientID string, rec []byte) error
	DeleteSession(clientID string) error
	PutMessage(clientID string, seq uint64, rec []byte) error
	UpdateMessage(clientID string, seq uint64, rec []byte) error
	DeleteMessage(clientID string, seq uint64) error
	PutRetained(topic string, rec []byte) error
	DeleteRetained(topic string) error
	PutInbound(clientID string, rec []byte) error
	DeleteInbound(clientID string) error
	PutWill(clientID string, rec []byte) error
	DeleteWill(clientID string) error
	Sync() error
	Load(session func(clientID string, rec []byte) error,
		message func(clientID string, seq uint64, rec []byte) error,
		retained func(topic string, rec []byte) error) error
	LoadInbound(fn func(clientID string, rec []byte) error) error
	LoadWills(fn func(clientID string, rec []byte) error) error
	Close() error
}

// replicaSyncTimeout bounds the wait of one Sync for the stream (a
// stream leader elected after a node's loss takes seconds): past it Sync
// fails, and core refuses what it held (MQTT 5 publishers get an error
// code, MQTT 3 ones are disconnected and send again).
const replicaSyncTimeout = 10 * time.Second

// replicaReadTimeout bounds the tries to read a dead node's records for
// a session: the stream's leader may have been on that node, and its
// election, seconds usually, takes longer on a loaded machine. A client
// connecting meanwhile waits rather than get an empty session.
const replicaReadTimeout = 30 * time.Second

// maxReplicaPending bounds the writes waiting for the stream: past it a
// write is dropped (counted, logged) and the next Sync fails.
const maxReplicaPending = 256 << 10

// replicaBatch bounds the writes published before their acks are awaited.
const replicaBatch = 1024

// tombstoneTTL is how long a deletion marker stays in the stream.
const tombstoneTTL = "1s"

// replicaOp is one write to the stream: a record (data), a deletion
// (data nil) or, with purge, the end of a session (subject is a filter).
type replicaOp struct {
	subject string
	data    []byte
	purge   bool
}

// replica queues the node's writes to the stream and tracks what is in,
// reads a dead node's records, and keeps the marks (replay.go).
type replica struct {
	*link
	// store is the store core writes (ReplicateStore's argument), synced
	// before marks are saved to Options.MarksFile.
	store          Store
	replicaDropped atomic.Int64 // writes dropped: too many waiting
	// mu guards the fields below; cond signals done and failed changes.
	mu       sync.Mutex
	cond     *sync.Cond
	queue    []replicaOp
	queued   uint64 // writes ever queued
	inStream uint64 // writes in the stream (or given up at Close), a prefix of queued
	dropped  bool   // a write was dropped since the last Sync
	// ids are the client ids with records in the stream from this node
	// (DeleteSession purges only those: a session that never was
	// persistent costs nothing).
	ids  map[string]struct{}
	wake chan struct{}
	// marks are the numbers routed here per origin node not yet in the
	// stream, written the last ones written (replay.go).
	marks   map[string][]mark
	written map[string]uint64
}

// replicaStore is a Store whose session records go to the stream too.
type replicaStore struct {
	Store
	r *replica
}

// ReplicateStore returns st with its persistent sessions' records
// replicated in the cluster's session stream when Options.SessionReplicas
// is above 1, st itself otherwise. Call it before the broker restores
// from st.
func (c *Cluster) ReplicateStore(st Store) Store {
	c.rep.store = st
	if c.opts.SessionReplicas <= 1 {
		return st
	}
	return &replicaStore{Store: st, r: c.rep}
}

func newReplica(l *link) *replica {
	r := &replica{link: l, ids: map[string]struct{}{}, wake: make(chan struct{}, 1), marks: map[string][]mark{}, written: map[string]uint64{}}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// repPrefix is the subject prefix of node's records.
func repPrefix(name, node string) string { return "$XMQ." + name + ".rep." + node + "." }

func (r *replica) repSubject(id, kind string) string {
	return repPrefix(r.opts.Name, r.opts.Node) + key(id) + "." + kind
}

func (r *replica) add(op replicaOp, id string) {
	if r.closed.Load() {
		return // stopping: replicaLoop is gone (see liveness.left)
	}
	r.mu.Lock()
	if len(r.queue) >= maxReplicaPending {
		r.dropped = true
		r.mu.Unlock()
		r.replicaDropped.Add(1)
		r.warn("session record not replicated: too many waiting for the stream", zap.String("client_id", id))
		return
	}
	if op.data != nil {
		r.ids[id] = struct{}{}
	}
	r.queue = append(r.queue, op)
	r.queued++
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (s *replicaStore) put(id, kind string, rec []byte) {
	s.r.add(replicaOp{subject: s.r.repSubject(id, kind), data: slices.Clone(rec)}, id)
}

func (s *replicaStore) del(id, kind string) {
	s.r.mu.Lock()
	_, known := s.r.ids[id]
	s.r.mu.Unlock()
	if known {
		s.r.add(replicaOp{subject: s.r.repSubject(id, kind)}, id)
	}
}

func msgKind(seq uint64) string { return "m." + strconv.FormatUint(seq, 10) }

// PutSession implements Store.
func (s *replicaStore) PutSession(id string, rec []byte) error {
	err := s.Store.PutSession(id, rec)
	if err == nil {
		s.put(id, "s", rec)
	}
	return err
}

// DeleteSession implements Store: the session's subjects are purged.
func (s *replicaStore) DeleteSession(id string) error {
	err := s.Store.DeleteSession(id)
	s.r.mu.Lock()
	_, known := s.r.ids[id]
	delete(s.r.ids, id)
	s.r.mu.Unlock()
	if known {
		s.r.add(replicaOp{subject: s.r.repSubject(id, ">"), purge: true}, id)
	}
	return err
}

// PutMessage implements Store.
func (s *replicaStore) PutMessage(id string, seq uint64, rec []byte) error {
	err := s.Store.PutMessage(id, seq, rec)
	if err == nil {
		s.put(id, msgKind(seq), rec)
	}
	return err
}

// UpdateMessage implements Store.
func (s *replicaStore) UpdateMessage(id string, seq uint64, rec []byte) error {
	err := s.Store.UpdateMessage(id, seq, rec)
	if err == nil {
		s.put(id, msgKind(seq), rec)
	}
	return err
}

// DeleteMessage implements Store.
func (s *replicaStore) DeleteMessage(id string, seq uint64) error {
	err := s.Store.DeleteMessage(id, seq)
	s.del(id, msgKind(seq))
	return err
}

// PutInbound implements Store.
func (s *replicaStore) PutInbound(id string, rec []byte) error {
	err := s.Store.PutInbound(id, rec)
	if err == nil {
		s.put(id, "i", rec)
	}
	return err
}

// DeleteInbound implements Store.
func (s *replicaStore) DeleteInbound(id string) error {
	err := s.Store.DeleteInbound(id)
	s.del(id, "i")
	return err
}

// PutWill implements Store.
func (s *replicaStore) PutWill(id string, rec []byte) error {
	err := s.Store.PutWill(id, rec)
	if err == nil {
		s.put(id, "w", rec)
	}
	return err
}

// DeleteWill implements Store.
func (s *replicaStore) DeleteWill(id string) error {
	err := s.Store.DeleteWill(id)
	s.del(id, "w")
	return err
}

// Load implements Store, noting the sessions it holds: their records
// may be in the stream from before.
func (s *replicaStore) Load(session func(string, []byte) error, message func(string, uint64, []byte) error,
	retained func(string, []byte) error) error {
	return s.Store.Load(func(id string, rec []byte) error {
		s.r.mu.Lock()
		s.r.ids[id] = struct{}{}
		s.r.mu.Unlock()
		return session(id, rec)
	}, message, retained)
}

// LoadWills implements Store, as Load.
func (s *replicaStore) LoadWills(fn func(string, []byte) error) error {
	return s.Store.LoadWills(func(id string, rec []byte) error {
		s.r.mu.Lock()
		s.r.ids[id] = struct{}{}
		s.r.mu.Unlock()
		return fn(id, rec)
	})
}

// errReplica refuses a Sync whose writes are not all in the stream.
var errReplica = errors.New("cluster: session records not replicated")

// Sync implements Store: the local store's Sync, then the wait until
// every write queued before the call is in the stream.
func (s *replicaStore) Sync() error {
	r := s.r
	r.mu.Lock()
	target := r.queued
	dropped := r.dropped
	r.dropped = false
	r.mu.Unlock()
	if err := s.Store.Sync(); err != nil {
		return err
	}
	if dropped {
		return errReplica
	}
	return r.wait(target, replicaSyncTimeout)
}

// wait returns once the first target writes are in the stream, or an
// error after timeout.
func (r *replica) wait(target uint64, timeout time.Duration) error {
	t := time.AfterFunc(timeout, func() {
		r.mu.Lock()
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	defer t.Stop()
	deadline := time.Now().Add(timeout)
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.inStream < target {
		if r.closed.Load() {
			return nil // stopping: nothing more reaches the stream; the local store has it
		}
		if time.Now().After(deadline) {
			r.warn("session records not replicated in time: acknowledgements refused", zap.Uint64("waiting", target-r.inStream))
			return errReplica
		}
		r.cond.Wait()
	}
	return nil
}

// Close implements Store: the writes queued so far get a moment to
// reach the stream (those of the sessions this node still holds), then
// the local store closes.
func (s *replicaStore) Close() error {
	s.r.mu.Lock()
	target := s.r.queued
	s.r.mu.Unlock()
	_ = s.r.wait(target, 2*time.Second)
	return s.Store.Close()
}

// replicaLoop writes the queued records to the stream, in order: a batch
// published asynchronously, its acks awaited, what failed published again
// (unless a later write of the batch replaces it) until it is in; a purge
// waits for the writes before it and is one request.
func (r *replica) replicaLoop(st *state) {
	tick := time.NewTicker(markEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			// Marks of messages that queued no record move on their own.
			r.writeMarks(st)
			continue
		case <-r.stop:
			// Nothing more reaches the stream: Syncs waiting fail, not hang.
			r.mu.Lock()
			r.inStream = r.queued
			r.queue = nil
			r.cond.Broadcast()
			r.mu.Unlock()
			return
		case <-r.wake:
		}
		for {
			r.mu.Lock()
			n := min(len(r.queue), replicaBatch)
			batch := slices.Clone(r.queue[:n])
			r.mu.Unlock()
			if n == 0 {
				break
			}
			if !r.writeReplica(st, batch) {
				continue // stopping: the select above sees it
			}
			r.mu.Lock()
			r.queue = r.queue[n:]
			if len(r.queue) == 0 {
				r.queue = nil
			}
			r.inStream += uint64(n)
			r.cond.Broadcast()
			r.mu.Unlock()
		}
		r.writeMarks(st)
	}
}

// writeReplica writes batch to the stream, retrying until it is in; false
// when the node stops first.
func (r *replica) writeReplica(st *state, batch []replicaOp) bool {
	todo := batch
	for len(todo) > 0 {
		var failed []replicaOp
		i := 0
		for i < len(todo) {
			j := i
			for j < len(todo) && !todo[j].purge {
				j++
			}
			failed = append(failed, r.publishOps(st, todo[i:j])...)
			if j < len(todo) {
				if len(failed) == 0 {
					if err := r.purgeReplica(st, todo[j].subject); err != nil {
						failed = append(failed, todo[j])
					}
				} else {
					failed = append(failed, todo[j]) // in order: after the writes before it
				}
				j++
			}
			i = j
		}
		if len(failed) == 0 {
			return true
		}
		todo = failed
		select {
		case <-r.stop:
			return false
		case <-time.After(250 * time.Millisecond):
		}
	}
	return true
}

// publishOps publishes ops asynchronously and returns those that failed,
// in order, without the ones a later op of ops on the same subject
// replaces.
func (r *replica) publishOps(st *state, ops []replicaOp) []replicaOp {
	futures := make([]jetstream.PubAckFuture, len(ops))
	for i, op := range ops {
		m := &nats.Msg{Subject: op.subject, Data: op.data}
		if op.data == nil {
			m.Header = nats.Header{jetstream.MsgTTLHeader: []string{tombstoneTTL}}
		}
		futures[i], _ = st.js.PublishMsgAsync(m)
	}
	last := map[string]int{}
	for i, op := range ops {
		last[op.subject] = i
	}
	var failed []replicaOp
	for i, f := range futures {
		err, stopped := r.awaitAck(f)
		if stopped {
			return ops[i:]
		}
		if err != nil && last[ops[i].subject] == i {
			r.warn("session record not replicated yet: retrying", zap.String("subject", ops[i].subject), zap.Error(err))
			failed = append(failed, ops[i])
		}
	}
	return failed
}

// purgeReplica removes every record under filter.
func (r *replica) purgeReplica(st *state, filter string) error {
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	err := st.sessions.Purge(ctx, jetstream.WithPurgeSubject(filter))
	if err != nil {
		r.warn("session records not purged yet: retrying", zap.String("subject", filter), zap.Error(err))
	}
	return err
}

// makeSessionStream creates or binds the session stream.
func (r *replica) makeSessionStream(js jetstream.JetStream, replicas int) (jetstream.Stream, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cfg := jetstream.StreamConfig{
		Name:              r.opts.Name + "_sessions",
		Description:       "xmq: persistent sessions' records, per node and client id",
		Subjects:          []string{"$XMQ." + r.opts.Name + ".rep.>"},
		MaxMsgsPerSubject: 1,
		Replicas:          replicas,
		Storage:           jetstream.FileStorage,
		AllowMsgTTL:       true,
		Discard:           jetstream.DiscardOld,
	}
	s, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = js.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			s, err = js.Stream(ctx, cfg.Name)
		}
	}
	return s, err
}

// replicaRecords are a session's records read from the stream.
type replicaRecords struct {
	session, inbound, will []byte
	seqs                   []uint64
	msgs                   [][]byte
}

// readReplica reads clientID's records written by node; nil when there
// is no session record.
func (r *replica) readReplica(st *state, node, clientID string) (*replicaRecords, error) {
	all, err := r.readRecords(st, node, key(clientID)+".>")
	if err != nil {
		return nil, err
	}
	return all[clientID], nil
}

// readRecords reads the records node wrote under filter (below its
// prefix) with one ordered consumer, by client id; ids without a
// session record are left out.
func (r *replica) readRecords(st *state, node, filter string) (map[string]*replicaRecords, error) {
	prefix := repPrefix(r.opts.Name, node)
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	info, err := st.sessions.Info(ctx, jetstream.WithSubjectFilter(prefix+filter))
	if err != nil {
		return nil, err
	}
	want := len(info.State.Subjects)
	if want == 0 {
		return nil, nil
	}
	if want <= maxGets {
		// A few records (one session): one get each from the stream's
		// leader (which has every acknowledged write), no consumer to make
		// (that needs JetStream's meta leader too, which a dead node may
		// have been).
		rb := newRecordsBuilder(prefix)
		for subj := range info.State.Subjects {
			gctx, gcancel := context.WithTimeout(context.Background(), stateTimeout)
			m, err := st.sessions.GetLastMsgForSubject(gctx, subj)
			gcancel()
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue // gone meanwhile (a deletion marker's TTL)
			}
			if err != nil {
				return nil, err
			}
			rb.add(m.Subject, m.Data)
		}
		return rb.done(), nil
	}
	// One try to (re)create it (nats.go retries forever by default, which
	// would hold a CONNECT while JetStream elects a leader: the caller
	// tries again, bounded), and gone soon after the read.
	cons, err := st.js.OrderedConsumer(ctx, st.sessions.CachedInfo().Config.Name, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{prefix + filter}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
		MaxResetAttempts: 1, InactiveThreshold: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	rb := newRecordsBuilder(prefix)
	got := 0
	for got < want {
		b, err := cons.Fetch(min(want-got, 512), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range b.Messages() {
			n++
			got++
			if md, err := m.Metadata(); err == nil && md.NumPending == 0 {
				got = want
			}
			rb.add(m.Subject(), m.Data())
		}
		if b.Error() != nil && n == 0 {
			return nil, b.Error()
		}
		if n == 0 {
			break
		}
	}
	return rb.done(), nil
}

// maxGets bounds the records read one get each; more are read with a
// consumer.
const maxGets = 256

// recordsBuilder sorts the records read from the stream by client id.
type recordsBuilder struct {
	prefix string
	recs   map[string]*replicaRecords
	msgs   map[string][]msgRec
}

type msgRec struct {
	seq uint64
	rec []byte
}

func newRecordsBuilder(prefix string) *recordsBuilder {
	return &recordsBuilder{prefix: prefix, recs: map[string]*replicaRecords{}, msgs: map[string][]msgRec{}}
}

// add takes the record on subject (empty: deleted).
func (b *recordsBuilder) add(subject string, data []byte) {
	if len(data) == 0 {
		return
	}
	k, kind, _ := strings.Cut(strings.TrimPrefix(subject, b.prefix), ".")
	id, ok := unkey(k)
	if !ok {
		return
	}
	r := b.recs[id]
	if r == nil {
		r = &replicaRecords{}
		b.recs[id] = r
	}
	switch {
	case kind == "s":
		r.session = data
	case kind == "i":
		r.inbound = data
	case kind == "w":
		r.will = data
	case strings.HasPrefix(kind, "m."):
		if seq, err := strconv.ParseUint(kind[2:], 10, 64); err == nil {
			b.msgs[id] = append(b.msgs[id], msgRec{seq, data})
		}
	}
}

// done returns the sessions read, their messages in sequence order; ids
// without a session record are left out.
func (b *recordsBuilder) done() map[string]*replicaRecords {
	for id, r := range b.recs {
		if r.session == nil {
			delete(b.recs, id) // a will whose session ended (its expiry was shorter): see docs
			continue
		}
		ms := b.msgs[id]
		slices.SortFunc(ms, func(a, b msgRec) int { return cmp.Compare(a.seq, b.seq) })
		for _, m := range ms {
			r.seqs = append(r.seqs, m.seq)
			r.msgs = append(r.msgs, m.rec)
		}
	}
	return b.recs
}

// restoreFromReplica installs clientID's session from the records node
// (gone) replicated, then removes them; withWill schedules its will (a
// node adopting the session of a client not back yet). It reports
// whether there was a session.
func (rp *replayer) restoreFromReplica(st *state, node, clientID string, withWill bool) (bool, error) {
	// The stream's leader may have been on the dead node: its replicas
	// elect another within seconds, meanwhile reads fail.
	var recs *replicaRecords
	err := rp.retry(replicaReadTimeout, func() (err error) {
		recs, err = rp.rep.readReplica(st, node, clientID)
		return err
	})
	if err != nil || recs == nil {
		return false, err
	}
	return rp.install(st, node, clientID, recs, withWill)
}

// dropReplica removes the records node wrote for clientID, once the
// session lives on here: one purge.
func (r *replica) dropReplica(st *state, node, clientID string) {
	if err := r.purgeReplica(st, repPrefix(r.opts.Name, node)+key(clientID)+".>"); err != nil {
		r.log.Warn("records of a session restored here stay in the stream", zap.String("client_id", clientID),
			zap.String("node", node), zap.Error(err))
	}
}
