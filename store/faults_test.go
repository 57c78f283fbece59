package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/xmq-io/xmq/internal/mqtttest"
)

// injector fails (or holds) the file system operations its match accepts
// while it is on, counting them.
type injector struct {
	on    atomic.Bool
	err   error
	match func(errorfs.Op) bool
	hold  chan struct{} // non-nil: block the operation until closed, instead of failing it
	hits  atomic.Int64
}

func (i *injector) String() string { return "test injector" }

func (i *injector) MaybeError(op errorfs.Op) error {
	if !i.on.Load() || !i.match(op) {
		return nil
	}
	i.hits.Add(1)
	if i.hold != nil {
		<-i.hold
		return nil
	}
	return i.err
}

// kinds matches operations of these kinds on files whose name holds one of
// the parts (all files when there are none).
func kinds(ks []errorfs.OpKind, parts ...string) func(errorfs.Op) bool {
	return func(op errorfs.Op) bool {
		for _, k := range ks {
			if op.Kind != k {
				continue
			}
			if len(parts) == 0 {
				return true
			}
			for _, p := range parts {
				if strings.Contains(filepath.Base(op.Path), p) {
					return true
				}
			}
		}
		return false
	}
}

// openFaulty opens a store in a new directory over the injector.
func openFaulty(t *testing.T, inj *injector, opts Options) (*Store, string, *atomic.Value) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	var fatal atomic.Value
	opts.fs = errorfs.Wrap(vfs.Default, inj)
	opts.OnFatal = func(err error) { fatal.Store(err) }
	if opts.MinFreeBytes == 0 {
		opts.MinFreeBytes = -1 // the test machine's disk is not the subject
	}
	if opts.ReserveBytes == 0 {
		opts.ReserveBytes = 1 << 20
	}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir, &fatal
}

func waitState(t *testing.T, s *Store, want State, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for s.Health().State != want {
		if time.Now().After(deadline) {
			t.Fatalf("store state %q after %v, want %q", s.Health().State, within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// putAcked writes n messages of id and syncs them; it returns their
// sequence numbers, which the store promised to keep.
func putAcked(t *testing.T, s *Store, id string, from, n int) []uint64 {
	t.Helper()
	var seqs []uint64
	for i := range n {
		seq := uint64(from + i)
		if err := s.PutMessage(id, seq, fmt.Appendf(nil, "%s-%d", id, seq)); err != nil {
			t.Fatalf("put %d: %v", seq, err)
		}
		seqs = append(seqs, seq)
	}
	if err := s.Sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}
	return seqs
}

// churn writes and flushes until stop closes, so that the engine writes
// its log, tables and manifest; it ignores refusals.
func churn(s *Store, stop <-chan struct{}) {
	val := make([]byte, 4<<10)
	var flushing atomic.Bool
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		_ = s.PutMessage("churn", uint64(i), val)
		_ = s.DeleteMessage("churn", uint64(i))
		if i%64 == 0 {
			_ = s.Sync()
			if !flushing.Swap(true) {
				go func() { _ = s.db.Flush(); flushing.Store(false) }()
			}
		}
	}
}

// TestFaultWriteErrorsRecover: a write of any kind that fails, for want of
// space or with an I/O error, makes the store unavailable — writes and
// Syncs are refused at once, the reserve is given up — and never wedges
// the engine; once the writes succeed again the store takes writes by
// itself, and every write it acknowledged before, during and after is
// there after a restart.
func TestFaultWriteErrorsRecover(t *testing.T) {
	writes := []errorfs.OpKind{errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpCreate, errorfs.OpRename, errorfs.OpLink}
	for _, tc := range []struct {
		name  string
		err   error
		match func(errorfs.Op) bool
	}{
		{"ENOSPC log", syscall.ENOSPC, kinds(writes, ".log")},
		{"ENOSPC tables", syscall.ENOSPC, kinds(writes, ".sst")},
		{"ENOSPC manifest", syscall.ENOSPC, kinds(writes, "MANIFEST", "CURRENT")},
		{"ENOSPC any write", syscall.ENOSPC, kinds(writes)},
		{"EIO any write", syscall.EIO, kinds(writes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inj := &injector{err: tc.err, match: tc.match}
			s, dir, fatal := openFaulty(t, inj, Options{StallTimeout: 20 * time.Second})
			before := putAcked(t, s, "a", 0, 100)
			if _, err := os.Stat(filepath.Join(dir, ReserveFile)); err != nil {
				t.Fatalf("no emergency reserve: %v", err)
			}

			inj.on.Store(true)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); churn(s, stop) }()
			waitState(t, s, StateUnavailable, 5*time.Second)
			if inj.hits.Load() == 0 {
				t.Fatal("unavailable without an injected fault")
			}
			start := time.Now()
			err := s.PutMessage("a", 1000, []byte("x"))
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("put while unavailable: %v, want ErrUnavailable", err)
			}
			if errors.Is(tc.err, syscall.ENOSPC) != errors.Is(err, syscall.ENOSPC) {
				t.Errorf("put while unavailable: %v: wraps ENOSPC %v, want %v", err, errors.Is(err, syscall.ENOSPC), errors.Is(tc.err, syscall.ENOSPC))
			}
			if err := s.PutSession("b", []byte("rec")); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("put session while unavailable: %v", err)
			}
			if err := s.Sync(); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("sync while unavailable: %v", err)
			}
			if d := time.Since(start); d > 500*time.Millisecond {
				t.Errorf("refusals took %v, want at once", d)
			}
			if h := s.Health(); h.Err() == nil || !strings.Contains(h.Reason, tc.err.Error()) {
				t.Errorf("health %+v: want the cause named", h)
			}
			if errors.Is(tc.err, syscall.ENOSPC) {
				if _, err := os.Stat(filepath.Join(dir, ReserveFile)); !os.IsNotExist(err) {
					t.Errorf("reserve kept on a full disk: %v", err)
				}
			}
			time.Sleep(300 * time.Millisecond) // the engine keeps retrying meanwhile

			inj.on.Store(false)
			waitState(t, s, StateOK, 5*time.Second)
			close(stop)
			wg.Wait()
			after := putAcked(t, s, "a", 2000, 100)
			if _, err := os.Stat(filepath.Join(dir, ReserveFile)); err != nil {
				t.Errorf("reserve not written again: %v", err)
			}
			if err := fatal.Load(); err != nil {
				t.Fatalf("OnFatal called: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			wantMessages(t, dir, "a", append(before, after...))
		})
	}
}

// wantMessages reopens dir and checks that id's messages include seqs.
func wantMessages(t *testing.T, dir, id string, seqs []uint64) {
	t.Helper()
	s, err := Open(dir, Options{MinFreeBytes: -1, ReserveBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	have := map[uint64]bool{}
	err = s.Load(func(string, []byte) error { return nil },
		func(cid string, seq uint64, rec []byte) error {
			if cid == id {
				have[seq] = string(rec) == fmt.Sprintf("%s-%d", id, seq)
			}
			return nil
		}, func(string, []byte) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range seqs {
		if !have[seq] {
			t.Fatalf("acknowledged message %s/%d lost after the fault", id, seq)
		}
	}
}

// TestFaultPersistentErrorFails: a write that keeps failing with an I/O
// error past StallTimeout fails the store (OnFatal) rather than leave it
// unavailable for ever.
func TestFaultPersistentErrorFails(t *testing.T) {
	inj := &injector{err: syscall.EIO, match: kinds([]errorfs.OpKind{errorfs.OpFileWrite}, ".log")}
	s, _, fatal := openFaulty(t, inj, Options{StallTimeout: time.Second})
	putAcked(t, s, "a", 0, 10)
	inj.on.Store(true)
	_ = s.PutMessage("a", 100, make([]byte, 64<<10))
	go func() { _ = s.Sync() }()
	waitState(t, s, StateFailed, 5*time.Second)
	// fail marks the state before it calls OnFatal.
	mqtttest.WaitFor(t, "OnFatal", func() bool { return fatal.Load() != nil })
	if err := s.PutMessage("a", 101, []byte("x")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("put after failure: %v", err)
	}
	if err := s.Close(); err == nil {
		t.Error("closing a failed store reported no error")
	}
}

// TestFaultSyncErrorFails: a failed fsync is not retried (the kernel may
// have dropped what it could not write): the Sync that met it fails, the
// store fails and says so, and nothing blocks.
func TestFaultSyncErrorFails(t *testing.T) {
	syncs := []errorfs.OpKind{errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo}
	inj := &injector{err: syscall.EIO, match: kinds(syncs, ".log")}
	s, _, fatal := openFaulty(t, inj, Options{})
	putAcked(t, s, "a", 0, 10)
	inj.on.Store(true)
	if err := s.PutMessage("a", 100, []byte("x")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Sync() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("sync over a failing fsync succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sync over a failing fsync hangs")
	}
	// The engine gives up at its next commit.
	_ = s.PutMessage("a", 101, []byte("x"))
	waitState(t, s, StateFailed, 5*time.Second)
	// fail marks the state before it calls OnFatal.
	mqtttest.WaitFor(t, "OnFatal", func() bool { return fatal.Load() != nil })
	if err := s.Sync(); err == nil {
		t.Fatal("sync of a failed store succeeded")
	}
	_ = s.Close()
}

// TestFaultStall: an fsync that does not return is reported as stalled
// within seconds, and past StallTimeout the store fails (the broker then
// exits for its supervisor to restart it).
func TestFaultStall(t *testing.T) {
	syncs := []errorfs.OpKind{errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo}
	inj := &injector{hold: make(chan struct{}), match: kinds(syncs, ".log")}
	s, _, fatal := openFaulty(t, inj, Options{StallTimeout: 3 * time.Second})
	defer close(inj.hold)
	putAcked(t, s, "a", 0, 10)
	inj.on.Store(true)
	_ = s.PutMessage("a", 100, []byte("x"))
	go func() { _ = s.Sync() }()
	waitState(t, s, StateStalled, 4*time.Second)
	if h := s.Health(); h.Err() == nil || !strings.Contains(h.Reason, "sync") {
		t.Errorf("stalled health %+v: want an error naming the operation", h)
	}
	waitState(t, s, StateFailed, 6*time.Second)
	if err, _ := fatal.Load().(error); err == nil || !strings.Contains(err.Error(), "stall") {
		t.Fatalf("OnFatal got %v, want a stall", err)
	}
}
