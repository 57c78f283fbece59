package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"
)

// How the store meets a disk that fails it (see the package doc, "Faults").
//
// Pebble treats a failed write to its log or manifest as fatal: the commit
// pipeline keeps the failed batch queued, every later commit waits behind
// it, and the engine asks its logger to end the process. A broker that
// recovered from that panic kept a database whose commit lock was never
// released: alive, but deaf. So the engine is never shown a full disk:
// faultFS retries a write that failed for space until it succeeds, while
// the store refuses every new write and every Sync at once (the store is
// "unavailable"), and a reserve file gives the writes already inside the
// engine room to finish. What cannot be retried safely (a failed fsync:
// the kernel may have dropped the pages it could not write) and a disk that
// stops answering are fatal: Options.OnFatal ends the process so that its
// supervisor starts it again, with every acknowledged message on disk.

// State is the store's health, worst first in Health.
type State string

// States of the store.
const (
	// StateOK: writes are accepted.
	StateOK State = "ok"
	// StateFull: below min_free_bytes or over max_disk_bytes; new queued
	// and retained messages are refused, everything else is written.
	StateFull State = "full"
	// StateStalled: a disk operation has taken longer than the slow
	// threshold; writes wait for it. Past stall_timeout the store fails.
	StateStalled State = "stalled"
	// StateUnavailable: a write failed (the disk is full or reports an
	// error); every write and Sync is refused until it succeeds again and
	// the file system has room for the reserve.
	StateUnavailable State = "unavailable"
	// StateFailed: the engine cannot go on; OnFatal has been called.
	StateFailed State = "failed"
)

// ErrUnavailable is wrapped by every write and Sync refused while the store
// is unavailable or failed. When the cause is a full disk the error wraps
// syscall.ENOSPC too, so core refuses messages as Quota Exceeded.
var ErrUnavailable = errors.New("store: unavailable")

// Health is a snapshot of the store's state.
type Health struct {
	State  State
	Reason string    // why, when State is not StateOK
	Since  time.Time // when it entered State (zero for StateOK)
}

// Err is nil in StateOK, else an error naming the state and its reason,
// for a readiness probe: a full store refuses new messages too.
func (h Health) Err() error {
	if h.State == StateOK {
		return nil
	}
	return fmt.Errorf("store %s since %s: %s", h.State, h.Since.UTC().Format(time.RFC3339), h.Reason)
}

// ReserveFile is the emergency reserve's name in the store's directory.
const ReserveFile = "EMERGENCY-RESERVE"

// Fault-handling timings.
const (
	// retryInterval is how often a write that failed is tried again.
	retryInterval = 100 * time.Millisecond
	// slowRecent is how long a disk-slow report keeps StateStalled: the
	// engine's health checker reports an operation still under way every
	// two seconds.
	slowRecent = 5 * time.Second
	// closeWait is how long Close waits for an unavailable store to come
	// back before it abandons the engine.
	closeWait = 2 * time.Second
)

// faults is the store's fault state and what acts on it: marking the store
// down and up, failing it, retrying the engine's writes, the reserve. It is
// given the few things it needs from the Store (set by Open).
type faults struct {
	dir      string
	log      *zap.Logger
	opts     *Options        // OnFatal, StallTimeout, ReserveBytes, MinFreeBytes
	stop     <-chan struct{} // closed by Close: retries give up
	slowWarn atomic.Int64    // the last disk-slow warning (rarely)

	down     atomic.Bool  // unavailable or failed: refuse writes and Syncs
	retrying atomic.Int64 // writes inside the engine waiting to be retried
	slowAt   atomic.Int64 // Unix nanoseconds of the last disk-slow report

	mu        sync.Mutex
	state     State // StateUnavailable or StateFailed while down
	reason    string
	cause     error
	since     time.Time
	downCh    chan struct{} // closed when the store goes down
	slowWhat  string
	fatalOnce sync.Once
}

// downSignal is closed once the store goes down (a new one while it is up).
func (f *faults) downSignal() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.downCh
}

// downErr is the error of a refused write, nil while the store is up.
func (f *faults) downErr() error {
	if !f.down.Load() {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if isSpace(f.cause) {
		return fmt.Errorf("%w (%s): %s: %w", ErrUnavailable, f.state, f.reason, syscall.ENOSPC)
	}
	return fmt.Errorf("%w (%s): %s", ErrUnavailable, f.state, f.reason)
}

// setDown marks the store unavailable because what failed with err; a full
// disk releases the reserve so that the writes already inside the engine
// can finish.
func (f *faults) setDown(what string, err error) {
	f.mu.Lock()
	if f.down.Load() {
		f.mu.Unlock()
		return
	}
	f.state, f.cause, f.since = StateUnavailable, err, time.Now()
	f.reason = fmt.Sprintf("%s: %v", what, err)
	f.down.Store(true)
	close(f.downCh)
	f.mu.Unlock()
	f.log.Error("store unavailable: refusing writes until the disk takes them again",
		zap.String("dir", f.dir), zap.String("op", what), zap.Error(err))
	if isSpace(err) {
		f.releaseReserve()
	}
}

// setUp ends StateUnavailable (never StateFailed).
func (f *faults) setUp() {
	f.mu.Lock()
	if !f.down.Load() || f.state == StateFailed {
		f.mu.Unlock()
		return
	}
	took := time.Since(f.since)
	f.state, f.reason, f.cause = "", "", nil
	f.downCh = make(chan struct{})
	f.down.Store(false)
	f.mu.Unlock()
	f.log.Info("store available again: accepting writes", zap.String("dir", f.dir),
		zap.Duration("unavailable_for", took.Round(time.Millisecond)))
}

// fail marks the store failed for good and calls OnFatal once.
func (f *faults) fail(err error) {
	f.fatalOnce.Do(func() {
		f.mu.Lock()
		f.state, f.cause, f.reason = StateFailed, err, err.Error()
		if !f.down.Load() {
			f.since = time.Now()
			f.down.Store(true)
			close(f.downCh)
		}
		f.mu.Unlock()
		f.log.Error("store failed: the broker cannot keep its promises and must be restarted", zap.String("dir", f.dir), zap.Error(err))
		if f.opts.OnFatal != nil {
			f.opts.OnFatal(err)
		}
	})
}

// Health reports the store's state, worst first.
func (s *Store) Health() Health {
	if h, ok := s.f.health(); ok {
		return h
	}
	if s.full.Load() {
		return Health{State: StateFull, Reason: s.fullError().Error(), Since: time.Unix(0, s.fullSince.Load())}
	}
	return Health{State: StateOK}
}

// health is the fault state's part of Health: down or stalled, ok false
// when neither.
func (f *faults) health() (Health, bool) {
	f.mu.Lock()
	if f.down.Load() {
		h := Health{State: f.state, Reason: f.reason, Since: f.since}
		f.mu.Unlock()
		return h, true
	}
	slow := f.slowWhat
	f.mu.Unlock()
	if at := f.slowAt.Load(); at != 0 && time.Since(time.Unix(0, at)) < slowRecent {
		return Health{State: StateStalled, Reason: slow, Since: time.Unix(0, at)}, true
	}
	return Health{}, false
}

// diskSlow is the engine's disk health checker reporting an operation
// under way for info.Duration. It must not block or do I/O.
func (f *faults) diskSlow(info vfs.DiskSlowInfo) {
	f.slowAt.Store(time.Now().UnixNano())
	f.mu.Lock()
	f.slowWhat = info.String()
	f.mu.Unlock()
	if rarely(&f.slowWarn) {
		f.log.Warn("store: disk slow", zap.String("dir", f.dir), zap.String("what", info.String()))
	}
	if info.Duration >= f.opts.StallTimeout {
		go f.fail(fmt.Errorf("store: disk stalled for %v (store.stall_timeout %v): %s",
			info.Duration.Round(time.Second), f.opts.StallTimeout, info))
	}
}

// rarely reports whether a second has passed since it last reported true
// for last (Unix nanoseconds), and takes the turn.
func rarely(last *atomic.Int64) bool {
	now := time.Now().UnixNano()
	l := last.Load()
	return now-l >= int64(time.Second) && last.CompareAndSwap(l, now)
}

func isSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// retry runs op, and while it fails marks the store unavailable and runs it
// again every retryInterval. A full disk is waited out however long it
// lasts; any other error that persists for StallTimeout fails the store.
// Once the store is closed the error is returned to the engine.
func (f *faults) retry(what string, op func() error) error {
	err := op()
	if err == nil {
		return nil
	}
	f.retrying.Add(1)
	defer f.retrying.Add(-1)
	f.setDown(what, err)
	start := time.Now()
	t := time.NewTicker(retryInterval)
	defer t.Stop()
	for {
		if !isSpace(err) && time.Since(start) >= f.opts.StallTimeout {
			f.fail(fmt.Errorf("store: %s failing for %v: %w", what, f.opts.StallTimeout, err))
			return err
		}
		select {
		case <-t.C:
		case <-f.stop:
			return err
		}
		if err = op(); err == nil {
			return nil
		}
	}
}

// faultFS retries the engine's writes (see retry). Syncs are not retried:
// a failed fsync may have lost the pages it could not write, so the engine
// sees it and fails.
type faultFS struct {
	vfs.FS
	faults *faults
}

func (f faultFS) wrap(file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return faultFile{File: file, faults: f.faults}, nil
}

func (f faultFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	var file vfs.File
	err := f.faults.retry("create "+filepath.Base(name), func() (err error) {
		file, err = f.FS.Create(name, c)
		return err
	})
	return f.wrap(file, err)
}

func (f faultFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return f.wrap(f.FS.OpenReadWrite(name, c, opts...))
}

func (f faultFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return f.wrap(f.FS.ReuseForWrite(oldname, newname, c))
}

func (f faultFS) Link(oldname, newname string) error {
	return f.faults.retry("link "+filepath.Base(newname), func() error { return f.FS.Link(oldname, newname) })
}

func (f faultFS) Rename(oldname, newname string) error {
	return f.faults.retry("rename "+filepath.Base(newname), func() error { return f.FS.Rename(oldname, newname) })
}

func (f faultFS) MkdirAll(dir string, perm os.FileMode) error {
	return f.faults.retry("mkdir "+filepath.Base(dir), func() error { return f.FS.MkdirAll(dir, perm) })
}

func (f faultFS) Unwrap() vfs.FS { return f.FS }

// faultFile retries writes from where the failed one stopped.
type faultFile struct {
	vfs.File
	faults *faults
}

func (f faultFile) Write(p []byte) (int, error) {
	done := 0
	err := f.faults.retry("write", func() error {
		n, err := f.File.Write(p[done:])
		done += n
		return err
	})
	return done, err
}

func (f faultFile) WriteAt(p []byte, off int64) (int, error) {
	done := 0
	err := f.faults.retry("write", func() error {
		n, err := f.File.WriteAt(p[done:], off+int64(done))
		done += n
		return err
	})
	return done, err
}

// Preallocate is an optimization (the engine reserves its next log's
// size, about a memtable): on a file system that cannot reserve that much
// the writes may still fit, and they are retried when they do not.
func (f faultFile) Preallocate(off, n int64) error {
	if err := f.File.Preallocate(off, n); err != nil && !isSpace(err) {
		return err
	}
	return nil
}

// FreeBytes is the free space of the store's file system when last
// measured (every 200ms, and on the write path near MinFreeBytes).
func (s *Store) FreeBytes() int64 { return s.free.Load() }

// reservePath is the reserve's path.
func (f *faults) reservePath() string { return filepath.Join(f.dir, ReserveFile) }

// makeReserve creates the reserve, or completes it, when the file system
// has room for it above MinFreeBytes; a reserve that would itself fill the
// disk is left out and reported. It writes zeros rather than extending the
// file, since a sparse file reserves nothing.
func (f *faults) makeReserve() error {
	size := f.opts.ReserveBytes
	if size <= 0 {
		return nil
	}
	path := f.reservePath()
	var have int64
	if fi, err := os.Stat(path); err == nil {
		have = fi.Size()
	}
	if have >= size {
		return nil
	}
	if free, err := freeBytes(f.dir); err == nil && free-(size-have) < max(f.opts.MinFreeBytes, 0) {
		return fmt.Errorf("store: no room for the %d-byte emergency reserve (%d bytes free)", size, free)
	}
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	zeros := make([]byte, 1<<20)
	for off := have; off < size && err == nil; off += int64(len(zeros)) {
		_, err = file.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off)
	}
	if err == nil {
		err = file.Sync()
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("store: writing the emergency reserve: %w", err)
	}
	return nil
}

// releaseReserve deletes the reserve, giving its space to the engine.
func (f *faults) releaseReserve() {
	if err := os.Remove(f.reservePath()); err == nil {
		f.log.Warn("store: emergency reserve released to let the engine finish its writes",
			zap.String("dir", f.dir), zap.Int64("bytes", f.opts.ReserveBytes))
	}
}

// tryRecover ends StateUnavailable once no write is waiting to be retried
// and the file system has room for MinFreeBytes and the reserve again; the
// sampler calls it.
func (f *faults) tryRecover() {
	if !f.down.Load() || f.retrying.Load() > 0 {
		return
	}
	f.mu.Lock()
	failed := f.state == StateFailed
	f.mu.Unlock()
	if failed {
		return
	}
	if err := f.makeReserve(); err != nil {
		return // not yet room for it: stay unavailable rather than meet a full disk again
	}
	if free, err := freeBytes(f.dir); err == nil && f.opts.MinFreeBytes > 0 && free < f.opts.MinFreeBytes {
		return
	}
	f.setUp()
}
