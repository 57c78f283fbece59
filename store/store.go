package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"
)

// FormatVersion is the key layout this build writes and reads. A store of
// another version is refused with ErrFormat, never misread.
const FormatVersion = 1

// Errors the store reports; each is wrapped with the path and the cause.
var (
	// ErrDamaged: the database or one of its keys cannot be read.
	ErrDamaged = errors.New("store: damaged")
	// ErrFormat: the store was written by a build with another format version.
	ErrFormat = errors.New("store: unsupported format version")
	// ErrNotWritable: the directory cannot be written.
	ErrNotWritable = errors.New("store: directory not writable")
)

// Durability says when writes are forced to disk; see the package doc.
type Durability string

// Durability modes.
const (
	DurabilitySync     Durability = "sync"
	DurabilityInterval Durability = "interval"
	DurabilityNone     Durability = "none"
)

// Options configures a Store. The zero value is usable.
type Options struct {
	// Durability is sync (default), interval or none.
	Durability Durability
	// FlushInterval is the period of the background flush in interval mode
	// (default 100ms).
	FlushInterval time.Duration
	// MaxDiskBytes is the disk budget: once the stored data (tables, and
	// what the memtable holds until it is flushed) reaches it, PutMessage
	// and PutRetained fail with an error wrapping syscall.ENOSPC until
	// deletions and compactions bring it back under. The engine's
	// write-ahead log comes on top: up to about four memtables (64 MiB),
	// reused rather than grown. 0 = no budget.
	MaxDiskBytes int64
	// MinFreeBytes keeps this much of the file system free the same way, so
	// that the database never meets a full disk (default 64 MiB; negative
	// turns the check off).
	MinFreeBytes int64
	// ReserveBytes is the emergency reserve: a file of this size in the
	// store's directory, deleted when a write fails for space so that the
	// writes already inside the engine can finish, and written again once
	// the file system has room for it (default 32 MiB; negative: none).
	ReserveBytes int64
	// CommitWait is how long a commit round in sync mode waits while the
	// only pending writes are new messages, for their deliveries'
	// acknowledgements to cancel them so that nothing need reach the disk
	// (pending.go; default 1ms, negative: no wait).
	CommitWait time.Duration
	// StallTimeout is how long a disk operation may hang, or a write keep
	// failing for another cause than space, before the store fails and
	// calls OnFatal (default 30s). A disk operation slower than a tenth of
	// it (at most 5s) is reported as StateStalled meanwhile.
	StallTimeout time.Duration
	// OnFatal is called once when the store cannot go on: the engine met an
	// error it cannot recover from (a failed fsync), or the disk stalled.
	// The broker exits there, so that its supervisor restarts it. nil: the
	// engine's goroutine that met the error panics.
	OnFatal func(error)
	// ReadOnly opens an existing store without changing it (xmq store check).
	ReadOnly bool
	// Log receives the engine's messages (default: none).
	Log *zap.Logger

	fs vfs.FS // the file system under the engine; tests inject faults here
}

// SetDefaults fills in the defaults of the zero fields; Open calls it, and
// the configuration asks it to print the store section in effect.
func (o *Options) SetDefaults() {
	if o.Durability == "" {
		o.Durability = DurabilitySync
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = 100 * time.Millisecond
	}
	if o.MinFreeBytes == 0 {
		o.MinFreeBytes = DefaultMinFreeBytes
	}
	if o.ReserveBytes == 0 {
		o.ReserveBytes = DefaultReserveBytes
	}
	if o.StallTimeout == 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	if o.CommitWait == 0 {
		o.CommitWait = DefaultCommitWait
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.fs == nil {
		o.fs = vfs.Default
	}
}

// Defaults of Options.
const (
	DefaultMinFreeBytes = 64 << 20
	DefaultReserveBytes = 32 << 20
	DefaultStallTimeout = 30 * time.Second
	DefaultCommitWait   = time.Millisecond
)

// slowThreshold is when a disk operation counts as slow: a tenth of the
// stall timeout, at most 5s.
func (o *Options) slowThreshold() time.Duration { return min(o.StallTimeout/10, 5*time.Second) }

// Validate reports the first option out of range.
func (o *Options) Validate() error {
	switch o.Durability {
	case "", DurabilitySync, DurabilityInterval, DurabilityNone:
	default:
		return fmt.Errorf("store: unknown durability %q (sync, interval, none)", o.Durability)
	}
	if o.FlushInterval < 0 {
		return errors.New("store: flush interval must not be negative")
	}
	if o.MaxDiskBytes < 0 {
		return errors.New("store: max disk bytes must not be negative")
	}
	if o.StallTimeout < 0 || o.StallTimeout > 0 && o.StallTimeout < time.Second {
		return errors.New("store: stall timeout must be at least 1s")
	}
	return nil
}

// memTableSize is the engine's write buffer. Messages put and deleted
// within one memtable never reach a table.
const memTableSize = 16 << 20

// Key prefixes; see the package doc.
const (
	prefixFormat   = 'F'
	prefixSession  = 's'
	prefixInbound  = 'i'
	prefixWill     = 'w'
	prefixMessage  = 'm'
	prefixRetained = 'r'
	prefixBan      = 'b'
)

// Store is the Pebble store. It implements core.Store.
type Store struct {
	dir  string
	opts Options
	db   *pebble.DB
	log  *zap.Logger

	// Group commit: writes counts the writes in the log, synced how many of
	// them the last fsync covered. One fsync at a time runs (round); callers
	// wait for one that covers their writes.
	writes atomic.Uint64
	syncMu sync.Mutex
	synced uint64
	round  *syncRound    // the fsync under way, nil when none
	syncs  atomic.Uint64 // fsyncs done, for benchmarks and tests

	// pend holds sync mode's writes until the next commit (pending.go).
	pend pending

	// Disk budget: full is set by the sampler; written counts the bytes put
	// since its last sample, so a burst cannot overshoot between samples.
	full      atomic.Bool
	fullSince atomic.Int64 // Unix nanoseconds
	usage     atomic.Int64
	written   atomic.Int64
	unflushed atomic.Int64 // bytes written since the last memtable flush
	free      atomic.Int64 // the file system's free bytes when last measured
	sinceFree atomic.Int64 // bytes admitted since

	f      faults
	health io.Closer // the engine's disk health checker

	closed  atomic.Bool
	stop    chan struct{}
	done    sync.WaitGroup
	release func() // forgets the directory in openDirs
}

// ErrClosed is returned by a Store used after Close.
var ErrClosed = errors.New("store: closed")

// Open opens (creating if needed) the store in dir.
func Open(dir string, opts Options) (st *Store, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.SetDefaults()
	defer func() {
		if v := recover(); v != nil {
			st, err = nil, fmt.Errorf("%w: %s: opening: %v", ErrDamaged, dir, v)
		}
	}()
	if !opts.ReadOnly {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, notWritable(dir, err)
		}
		if err := probeWritable(dir); err != nil {
			return nil, err
		}
	} else if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	release, err := claimDir(dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if st == nil {
			release()
		}
	}()
	s := &Store{dir: dir, opts: opts, log: opts.Log, stop: make(chan struct{}), release: release}
	s.f.dir, s.f.log, s.f.opts, s.f.stop, s.f.downCh = dir, s.log, &s.opts, s.stop, make(chan struct{})
	po := &pebble.Options{
		Logger:             pebbleLogger{opts.Log.Sugar(), s},
		MemTableSize:       memTableSize,
		ReadOnly:           opts.ReadOnly,
		ErrorIfNotExists:   opts.ReadOnly,
		FormatMajorVersion: pebble.FormatNewest,
	}
	po.EventListener = &pebble.EventListener{
		BackgroundError: func(err error) { opts.Log.Error("store: background error", zap.Error(err)) },
		FlushEnd:        func(pebble.FlushInfo) { s.unflushed.Store(0) },
		// Pebble's default stops the process; a damaged file is reported by
		// the read that meets it instead, and here.
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			opts.Log.Error("store: damaged file: run `xmq store check` on the data directory",
				zap.String("dir", dir), zap.String("corruption", info.String()))
		},
	}
	if !opts.ReadOnly {
		// Outermost, faultFS: a write it retries is many short operations
		// to the health checker, not one that stalls.
		var hfs vfs.FS
		hfs, s.health = vfs.WithDiskHealthChecks(opts.fs, opts.slowThreshold(), nil, s.f.diskSlow)
		po.FS = faultFS{FS: hfs, faults: &s.f}
		if err := s.f.makeReserve(); err != nil {
			opts.Log.Warn("store: starting without its emergency reserve", zap.String("dir", dir), zap.Error(err))
		}
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		if s.health != nil {
			_ = s.health.Close()
		}
		if pid, held := heldBy(dir); held {
			return nil, lockedError(dir, pid)
		}
		switch {
		case errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS):
			return nil, notWritable(dir, err)
		case opts.ReadOnly && errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("store: %s holds no store: %w", dir, err)
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrDamaged, dir, err)
	}
	s.db = db
	if err := s.checkFormat(); err != nil {
		_ = db.Close()
		if s.health != nil {
			_ = s.health.Close()
		}
		return nil, err
	}
	if opts.ReadOnly {
		return s, nil
	}
	if opts.Durability == DurabilityInterval {
		s.done.Add(1)
		go s.flushLoop()
	}
	s.sample()
	s.done.Add(1)
	go s.sampleLoop()
	return s, nil
}

func notWritable(dir string, err error) error {
	return fmt.Errorf("%w: %s: %v", ErrNotWritable, dir, err)
}

// probeWritable creates and removes a file, so a read-only directory is
// reported as such rather than as whatever the engine trips on first.
func probeWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return notWritable(dir, err)
	}
	name := f.Name()
	_ = f.Close()
	_ = os.Remove(name)
	return nil
}

// checkFormat reads the format version, writing it into a new store.
func (s *Store) checkFormat() error {
	v, closer, err := s.db.Get([]byte{prefixFormat})
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		empty, err := s.empty()
		if err != nil {
			return err
		}
		if !empty {
			return fmt.Errorf("%w: %s: keys without a format version (not an xmq store?)", ErrDamaged, s.dir)
		}
		if s.opts.ReadOnly {
			return nil
		}
		return s.db.Set([]byte{prefixFormat}, binary.BigEndian.AppendUint32(nil, FormatVersion), pebble.Sync)
	case err != nil:
		return fmt.Errorf("%w: %s: reading the format version: %v", ErrDamaged, s.dir, err)
	}
	defer closer.Close()
	if len(v) != 4 {
		return fmt.Errorf("%w: %s: format version key holds %d bytes", ErrDamaged, s.dir, len(v))
	}
	switch got := binary.BigEndian.Uint32(v); {
	case got > FormatVersion:
		return fmt.Errorf("%w: %s was written in format %d by a newer xmq; this build reads format %d: run the newer xmq, or move the directory aside to start empty",
			ErrFormat, s.dir, got, FormatVersion)
	case got < FormatVersion:
		return fmt.Errorf("%w: %s is in format %d, which this build cannot migrate (it reads %d)", ErrFormat, s.dir, got, FormatVersion)
	}
	return nil
}

func (s *Store) empty() (bool, error) {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return false, err
	}
	defer it.Close()
	return !it.First(), it.Error()
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Syncs is how many times the log was forced to disk.
func (s *Store) Syncs() uint64 { return s.syncs.Load() }

// idKey is prefix, the two-byte length of id, then id.
func idKey(prefix byte, id string, extra int) []byte {
	k := make([]byte, 0, 3+len(id)+extra)
	k = append(k, prefix)
	k = binary.BigEndian.AppendUint16(k, uint16(len(id)))
	return append(k, id...)
}

func msgKey(id string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(idKey(prefixMessage, id, 8), seq)
}

func retainedKey(topic string) []byte {
	return append([]byte{prefixRetained}, topic...)
}

// checkID refuses ids the key layout cannot hold (MQTT strings are at most
// 65535 bytes, so a valid client id always fits).
func checkID(id string) error {
	if len(id) > 0xFFFF {
		return fmt.Errorf("store: client id of %d bytes", len(id))
	}
	return nil
}

// writable reports why a write cannot be made now, if it cannot: the store
// is closed, unavailable or failed.
func (s *Store) writable() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return s.f.downErr()
}

// write runs one write to the engine. The engine panics (through its
// logger's Fatalf) on a commit it cannot make; that is the store failing,
// returned as an error to this caller.
func (s *Store) write(w func() error) (err error) {
	if err := s.writable(); err != nil {
		return err
	}
	defer func() {
		if v := recover(); v != nil {
			err = s.f.downErr()
			if err == nil {
				err = fmt.Errorf("%w: %v", ErrUnavailable, v)
			}
		}
	}()
	if err := w(); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	s.writes.Add(1)
	return nil
}

func (s *Store) set(key, val []byte) error {
	if s.buffers() {
		return s.buffer(opSet, key, val, msgRef{}, false)
	}
	return s.write(func() error { return s.db.Set(key, val, pebble.NoSync) })
}

func (s *Store) del(key []byte) error {
	if s.buffers() {
		return s.buffer(opDelete, key, nil, msgRef{}, false)
	}
	return s.write(func() error { return s.db.Delete(key, pebble.NoSync) })
}

// admit applies the disk budget and the free space to a write of n bytes.
// The free space is measured again, here on the write path, once what was
// admitted since the last measure could have taken it below MinFreeBytes:
// a burst between two samples must not reach a full disk.
func (s *Store) admit(n int) error {
	if s.full.Load() {
		return s.fullError()
	}
	s.unflushed.Add(int64(n))
	w := s.written.Add(int64(n))
	if b := s.opts.MaxDiskBytes; b > 0 && s.usage.Load()+w > b {
		s.setFull(true)
		return s.fullError()
	}
	if m := s.opts.MinFreeBytes; m > 0 && s.free.Load()-s.sinceFree.Add(int64(n)) < m {
		if free, err := freeBytes(s.dir); err == nil { // freespace_*.go
			s.free.Store(free)
			s.sinceFree.Store(0)
			if free < m {
				s.setFull(true)
				return s.fullError()
			}
		}
	}
	return nil
}

// setFull records whether the store is full, and since when.
func (s *Store) setFull(full bool) {
	if full && !s.full.Swap(true) {
		s.fullSince.Store(time.Now().UnixNano())
	} else if !full {
		s.full.Store(false)
	}
}

func (s *Store) fullError() error {
	if b := s.opts.MaxDiskBytes; b > 0 && s.usage.Load()+s.written.Load() > b {
		return fmt.Errorf("store: %s uses %d bytes of its %d-byte budget (store.max_disk_bytes): %w",
			s.dir, s.usage.Load(), b, syscall.ENOSPC)
	}
	return fmt.Errorf("store: less than %d bytes free on the file system of %s: %w", s.opts.MinFreeBytes, s.dir, syscall.ENOSPC)
}

// PutSession implements core.Store.
func (s *Store) PutSession(id string, rec []byte) error {
	if err := checkID(id); err != nil {
		return err
	}
	return s.set(idKey(prefixSession, id, 0), rec)
}

// DeleteSession implements core.Store: the session, its inbound state and
// every message owed to it.
func (s *Store) DeleteSession(id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	lo := idKey(prefixMessage, id, 9)
	hi := append(append([]byte(nil), lo...), 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF)
	if s.buffers() {
		return s.buffer(opDeleteSession, idKey(prefixSession, id, 0), nil, msgRef{id: id}, false, lo, hi)
	}
	return s.write(func() error {
		b := s.db.NewBatch()
		defer b.Close()
		deleteSession(b, id, lo, hi)
		return b.Commit(pebble.NoSync)
	})
}

// PutMessage implements core.Store.
func (s *Store) PutMessage(id string, seq uint64, rec []byte) error {
	if err := checkID(id); err != nil {
		return err
	}
	if err := s.admit(len(rec) + len(id) + 11); err != nil {
		return err
	}
	if s.buffers() {
		return s.buffer(opSet, msgKey(id, seq), rec, msgRef{id, seq}, true)
	}
	return s.set(msgKey(id, seq), rec)
}

// DeleteMessage implements core.Store.
func (s *Store) DeleteMessage(id string, seq uint64) error {
	if err := checkID(id); err != nil {
		return err
	}
	if s.buffers() {
		return s.buffer(opDelete, msgKey(id, seq), nil, msgRef{id, seq}, true)
	}
	return s.del(msgKey(id, seq))
}

// PutRetained implements core.Store.
func (s *Store) PutRetained(topic string, rec []byte) error {
	if err := s.admit(len(rec) + len(topic) + 1); err != nil {
		return err
	}
	return s.set(retainedKey(topic), rec)
}

// DeleteRetained implements core.Store.
func (s *Store) DeleteRetained(topic string) error { return s.del(retainedKey(topic)) }

// PutInbound implements core.Store.
func (s *Store) PutInbound(id string, rec []byte) error {
	if err := checkID(id); err != nil {
		return err
	}
	return s.set(idKey(prefixInbound, id, 0), rec)
}

// DeleteInbound implements core.Store.
func (s *Store) DeleteInbound(id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	return s.del(idKey(prefixInbound, id, 0))
}

// PutWill implements core.Store.
func (s *Store) PutWill(id string, rec []byte) error {
	if err := checkID(id); err != nil {
		return err
	}
	return s.set(idKey(prefixWill, id, 0), rec)
}

// DeleteWill implements core.Store.
func (s *Store) DeleteWill(id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	return s.del(idKey(prefixWill, id, 0))
}

// Sync implements core.Store. In sync mode it returns once every write
// made before the call is on disk; callers that arrive while an fsync is
// under way wait for the next one, which covers them all (group commit).
// In the other modes it returns at once.
func (s *Store) Sync() error {
	if s.opts.Durability != DurabilitySync || s.opts.ReadOnly {
		return nil
	}
	if err := s.writable(); err != nil {
		return err
	}
	return s.syncTo(s.writes.Load())
}

// syncRound is one fsync: done is closed when it ends, with err.
type syncRound struct {
	done chan struct{}
	err  error
}

// syncTo waits until the writes up to target are on disk, starting an
// fsync when none is under way. The fsync runs on its own goroutine, so
// that every caller can stop waiting when the store goes down: an fsync
// held up by a full disk must not hold up a CONNECT.
func (s *Store) syncTo(target uint64) error {
	down := s.f.downSignal()
	s.awaitSettle()
	s.syncMu.Lock()
	for s.synced < target {
		r := s.round
		if r == nil {
			if covered, ok := s.nothingToSync(); ok {
				s.synced = max(s.synced, covered)
				continue
			}
			r = &syncRound{done: make(chan struct{})}
			s.round = r
			go func() {
				covered := s.writes.Load() // every write counted here is in the log, or pending for this round
				err := s.fsync()
				s.syncMu.Lock()
				r.err = err
				if err == nil {
					s.synced = max(s.synced, covered)
				}
				s.round = nil
				close(r.done)
				s.syncMu.Unlock()
			}()
		}
		s.syncMu.Unlock()
		select {
		case <-r.done:
		case <-down:
			return s.f.downErr()
		}
		if r.err != nil {
			return r.err
		}
		s.syncMu.Lock()
	}
	s.syncMu.Unlock()
	return nil
}

// fsync forces the write-ahead log to disk.
func (s *Store) fsync() (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: syncing %s: %v", ErrUnavailable, s.dir, v)
		}
	}()
	if s.buffers() {
		return s.commitPending(true)
	}
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("store: syncing %s: %w", s.dir, err)
	}
	s.syncs.Add(1)
	return nil
}

// flushLoop is interval mode's background flush.
func (s *Store) flushLoop() {
	defer s.done.Done()
	t := time.NewTicker(s.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := s.syncTo(s.writes.Load()); err != nil {
				s.log.Error("store: periodic flush failed", zap.Error(err))
			}
		case <-s.stop:
			return
		}
	}
}

// sampleInterval is how often the disk budget is measured.
const sampleInterval = 200 * time.Millisecond

func (s *Store) sampleLoop() {
	defer s.done.Done()
	t := time.NewTicker(sampleInterval)
	defer t.Stop()
	wasFull := false
	for {
		select {
		case <-t.C:
			s.sample()
			s.f.tryRecover()
			s.flushPending()
			if full := s.full.Load(); full != wasFull {
				wasFull = full
				if full {
					s.log.Error("store full: refusing new queued and retained messages", zap.Error(s.fullError()))
				} else {
					s.log.Info("store below its limits again: accepting messages")
				}
			}
		case <-s.stop:
			return
		}
	}
}

// sample measures the database and the file system's free space.
func (s *Store) sample() {
	usage := s.DiskUsage()
	s.usage.Store(usage)
	s.written.Store(0)
	full := s.opts.MaxDiskBytes > 0 && usage >= s.opts.MaxDiskBytes
	if free, err := freeBytes(s.dir); err == nil { // freespace_*.go
		s.free.Store(free)
		s.sinceFree.Store(0)
		full = full || s.opts.MinFreeBytes > 0 && free < s.opts.MinFreeBytes
	}
	s.setFull(full)
}

// DiskUsage is what the disk budget counts: the tables on disk and the
// bytes written since the last memtable flush, not the write-ahead log.
func (s *Store) DiskUsage() int64 {
	m := s.db.Metrics()
	return int64(m.DiskSpaceUsage()-m.WAL.PhysicalSize-m.WAL.ObsoletePhysicalSize) + s.unflushed.Load()
}

// Compact compacts the whole key space, so that deleted data leaves the
// disk now rather than when the engine gets to it.
func (s *Store) Compact() error {
	return s.db.Compact(context.Background(), []byte{0}, []byte{0xFF, 0xFF}, true)
}

// Close implements core.Store: it stops the background work, syncs in the
// modes that promise it and closes the database.
func (s *Store) Close() (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("store: closing %s: %v", s.dir, v)
		}
	}()
	if s.closed.Swap(true) {
		return ErrClosed
	}
	defer s.release() // after the engine has let go of its lock
	if err := s.awaitUp(); err != nil {
		// The engine holds writes it cannot make (or has failed): closing
		// it would wait for them for ever. Leave it to the process's end;
		// what was acknowledged is on disk already.
		close(s.stop)
		return fmt.Errorf("store: %s left without closing: %w", s.dir, err)
	}
	close(s.stop)
	s.done.Wait()
	if s.health != nil {
		defer s.health.Close()
	}
	if !s.opts.ReadOnly && s.opts.Durability != DurabilityNone {
		if serr := s.syncTo(s.writes.Load()); serr != nil {
			err = serr
		}
	}
	if cerr := s.db.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("store: closing %s: %w", s.dir, cerr)
	}
	return err
}

// awaitUp waits up to closeWait for an unavailable store to take writes
// again; it returns why it did not.
func (s *Store) awaitUp() error {
	if s.opts.ReadOnly {
		return nil
	}
	for deadline := time.Now().Add(closeWait); s.f.down.Load() && s.Health().State != StateFailed && time.Now().Before(deadline); {
		time.Sleep(retryInterval)
		s.f.tryRecover()
	}
	return s.f.downErr()
}

// pebbleLogger sends the engine's messages to zap.
type pebbleLogger struct {
	l *zap.SugaredLogger
	s *Store
}

func (p pebbleLogger) Infof(format string, args ...any)  { p.l.Debugf("pebble: "+format, args...) }
func (p pebbleLogger) Errorf(format string, args ...any) { p.l.Errorf("pebble: "+format, args...) }

// Fatalf is the engine giving up: the store fails (OnFatal, which ends
// the broker). Fatalf must not return; its panic is recovered into an
// error where the store called the engine itself.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf("pebble: "+format, args...)
	if p.s != nil {
		p.s.f.fail(errors.New(msg))
	} else {
		p.l.Error(msg)
	}
	panic(msg)
}

// UpdateMessage implements core.Store: a message's new delivery state,
// never refused for space (the message is on disk already).
func (s *Store) UpdateMessage(id string, seq uint64, rec []byte) error {
	if err := checkID(id); err != nil {
		return err
	}
	return s.set(msgKey(id, seq), rec)
}
