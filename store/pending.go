package store

import (
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/zap"
)

// In sync mode the store does not hand each write to the engine as it comes:
// it appends it to one pending batch, and the next Sync commits that batch
// with the fsync, as one record of the write-ahead log. At low rates every
// QoS 1 message costs the engine a commit, a write to the log and a wake-up
// of its log writer for the message, again for its deletion once the
// subscriber acknowledged it, and again for the fsync; this way a commit
// round costs one of each for every connection's writes together.
//
// A message whose subscriber acknowledged it before the round (PutMessage,
// then DeleteMessage of the same message in the same batch) never needs to
// reach the disk: when every write of a batch is such a pair, the batch is
// dropped, and Sync neither writes nor forces anything, since nothing that
// survives a crash would differ. The batch is committed whole otherwise
// (the pairs inside it are a few bytes of log), so the order of writes
// across a crash stays a prefix of the writes, as core.Store requires.
//
// Writes still pending when the process dies are lost, as any write before
// its Sync may be: the pending batch is committed (without an fsync) at the
// latest by the sampler, every sampleInterval, and by a batch reaching
// maxPendingBytes, so what a killed process loses is bounded as before by
// what core had not yet been promised.

// maxPendingBytes bounds the pending batch; past it the batch goes to the
// engine at once (without an fsync).
const maxPendingBytes = 1 << 20

// Kinds of pending writes.
const (
	opSet = iota
	opDelete
	opDeleteSession
)

// msgRef names a stored message, the unit a deletion can cancel.
type msgRef struct {
	id  string
	seq uint64
}

// pending is sync mode's batch of writes not yet committed.
type pending struct {
	// commitMu orders commits: a batch taken from mu goes to the engine
	// before the next one is taken, so the log keeps the order of the
	// writes. It is held only while a batch is handed to the engine, never
	// for its fsync.
	commitMu sync.Mutex

	mu        sync.Mutex
	b         *pebble.Batch       // nil when nothing is pending
	cancelled uint32              // writes of b that cancel out: new messages and their deletions
	fresh     map[msgRef]struct{} // messages put in b that were not stored before it
	unsynced  bool                // a batch reached the log since the last fsync
	settled   chan struct{}       // closed when the round waiting on it need wait no longer (awaitSettle)
}

// waitable reports whether a round should wait before it commits: the
// pending writes are only new messages, which the acknowledgements of
// their deliveries may yet cancel. mu is held.
func (p *pending) waitable() bool {
	if p.b == nil {
		return false
	}
	live := int(p.b.Count() - p.cancelled)
	return live > 0 && live == len(p.fresh)
}

// awaitSettle is a commit round's wait, up to CommitWait, for the pending
// new messages to be acknowledged by their subscribers: at the rates of
// devices, a subscriber online acknowledges in a fraction of a
// millisecond, and a round whose writes all cancel out makes no fsync.
// Any other write, or the last pending message cancelled, ends the wait.
func (s *Store) awaitSettle() {
	if !s.buffers() || s.opts.CommitWait <= 0 {
		return
	}
	p := &s.pend
	p.mu.Lock()
	if !p.waitable() {
		p.mu.Unlock()
		return
	}
	ch := p.settled // another caller waits already: the same wait
	if ch == nil {
		ch = make(chan struct{})
		p.settled = ch
	}
	p.mu.Unlock()
	t := time.NewTimer(s.opts.CommitWait)
	select {
	case <-ch:
	case <-t.C:
	case <-s.f.downSignal():
	}
	t.Stop()
	p.mu.Lock()
	if p.settled == ch {
		p.settled = nil
	}
	p.mu.Unlock()
}

// buffers reports whether writes go to the pending batch (sync mode).
func (s *Store) buffers() bool {
	return s.opts.Durability == DurabilitySync && !s.opts.ReadOnly
}

// buffer appends one write to the pending batch. A PutMessage (msg, set)
// marks its message fresh; a DeleteMessage of a fresh message cancels both.
// lohi is a deleted session's message range (opDeleteSession).
func (s *Store) buffer(op int, key, val []byte, ref msgRef, msg bool, lohi ...[]byte) error {
	if err := s.writable(); err != nil {
		return err
	}
	p := &s.pend
	p.mu.Lock()
	if p.b == nil {
		p.b = s.db.NewBatch()
	}
	switch op {
	case opSet:
		_ = p.b.Set(key, val, nil)
		if msg {
			if p.fresh == nil {
				p.fresh = map[msgRef]struct{}{}
			}
			p.fresh[ref] = struct{}{}
		}
	case opDelete:
		_ = p.b.Delete(key, nil)
		if _, ok := p.fresh[ref]; ok && msg {
			delete(p.fresh, ref)
			p.cancelled += 2
		}
	case opDeleteSession:
		deleteSession(p.b, ref.id, lohi[0], lohi[1])
	}
	s.writes.Add(1) // under mu: a Sync that counts it commits the batch holding it
	if p.settled != nil && !p.waitable() {
		close(p.settled)
		p.settled = nil
	}
	big := p.b.Len() >= maxPendingBytes
	p.mu.Unlock()
	if big {
		s.flushPending()
	}
	return nil
}

// deleteSession adds a session's deletion to b: its record, its inbound
// state and its messages (the range lo to hi).
func deleteSession(b *pebble.Batch, id string, lo, hi []byte) {
	_ = b.Delete(idKey(prefixSession, id, 0), nil)
	_ = b.Delete(idKey(prefixInbound, id, 0), nil)
	_ = b.DeleteRange(lo, hi, nil)
}

// nothingToSync reports, when no round is under way (syncMu is held),
// whether a Sync has nothing to make durable: nothing is pending but writes
// that cancel out, and nothing reached the log since the last fsync. It
// then drops the pending batch and returns the writes it covers: the caller
// needs neither a round nor a goroutine.
func (s *Store) nothingToSync() (covered uint64, ok bool) {
	if !s.buffers() {
		return 0, false
	}
	p := &s.pend
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.unsynced || p.b != nil && p.cancelled != p.b.Count() {
		return 0, false
	}
	if p.b != nil {
		p.b.Close()
		p.b = nil
		p.cancelled = 0
		clear(p.fresh)
	}
	return s.writes.Load(), true
}

// flushPending hands the pending batch to the engine without an fsync.
func (s *Store) flushPending() {
	if !s.buffers() || s.writable() != nil {
		return
	}
	if err := s.commitPending(false); err != nil {
		s.log.Error("store: writing pending writes failed", zap.Error(err))
	}
}

// commitPending commits the pending batch; with sync it returns once the
// batch and everything before it in the log are on disk. A batch whose
// writes all cancel out is dropped, and when nothing reached the log since
// the last fsync none is made.
func (s *Store) commitPending(sync bool) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: committing in %s: %v", ErrUnavailable, s.dir, v)
		}
	}()
	p := &s.pend
	p.commitMu.Lock()
	p.mu.Lock()
	b := p.b
	p.b = nil
	if b != nil && p.cancelled == b.Count() {
		b.Close() // nothing in it outlives the batch
		b = nil
	}
	p.cancelled = 0
	clear(p.fresh)
	needSync := sync && (b != nil || p.unsynced)
	if needSync {
		p.unsynced = false
	} else if b != nil {
		p.unsynced = true
	}
	p.mu.Unlock()
	switch {
	case b == nil && !needSync:
		p.commitMu.Unlock()
		return nil
	case b == nil:
		b = s.db.NewBatch()
		_ = b.LogData(nil, nil)
	}
	defer b.Close()
	if !sync {
		err = b.Commit(pebble.NoSync)
		p.commitMu.Unlock()
		if err != nil {
			return fmt.Errorf("store: writing %s: %w", s.dir, err)
		}
		return nil
	}
	err = s.db.ApplyNoSyncWait(b, pebble.Sync) // in the log's order; the fsync is waited for below
	p.commitMu.Unlock()
	if err == nil {
		if err = b.SyncWait(); err != nil {
			// What the engine does with a failed fsync it waited for
			// itself (pebbleLogger.Fatalf): the store fails; the log may
			// have lost what it held.
			s.f.fail(fmt.Errorf("store: syncing %s: %w", s.dir, err))
		}
	}
	if err != nil {
		p.mu.Lock()
		p.unsynced = true
		p.mu.Unlock()
		return fmt.Errorf("store: syncing %s: %w", s.dir, err)
	}
	s.syncs.Add(1)
	return nil
}
