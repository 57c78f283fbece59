package store

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// openMem opens a store on a crashable in-memory file system.
func openMem(t *testing.T, fs vfs.FS, dir string, opts Options) *Store {
	t.Helper()
	opts.fs, opts.MinFreeBytes, opts.ReserveBytes = fs, -1, -1
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// crashed is what a machine crash now would leave of s: only what was
// synced. s is closed.
func crashed(t *testing.T, s *Store, mem *vfs.MemFS) []string {
	t.Helper()
	clone := mem.CrashClone(vfs.CrashCloneCfg{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := openMem(t, clone, s.dir, Options{})
	defer r.Close()
	var got []string
	err := r.Load(func(id string, _ []byte) error {
		got = append(got, "session "+id)
		return nil
	}, func(id string, seq uint64, rec []byte) error {
		got = append(got, fmt.Sprintf("%s/%d=%s", id, seq, rec))
		return nil
	}, func(string, []byte) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestPendingCancelledNeverWritten: in sync mode a message deleted before
// the Sync that would have written it costs no fsync and is not on disk;
// what a Sync covered survives a crash, in the order it was written.
func TestPendingCancelledNeverWritten(t *testing.T) {
	mem := vfs.NewCrashableMem()
	dir := filepath.Join(t.TempDir(), "store")
	s := openMem(t, mem, dir, Options{CommitWait: -1})
	n := s.Syncs()
	mustDo(t, s.PutMessage("a", 1, []byte("one")))
	mustDo(t, s.DeleteMessage("a", 1))
	mustDo(t, s.Sync())
	if s.Syncs() != n {
		t.Errorf("a message put and deleted before Sync cost %d fsyncs", s.Syncs()-n)
	}
	mustDo(t, s.PutMessage("a", 2, []byte("two")))
	mustDo(t, s.PutMessage("a", 3, []byte("three")))
	mustDo(t, s.Sync())
	if s.Syncs() != n+1 {
		t.Errorf("Sync of two messages: %d fsyncs, want 1", s.Syncs()-n)
	}
	// A deletion of a message on disk is written, cancelled pairs in the
	// same batch or not.
	mustDo(t, s.DeleteMessage("a", 2))
	mustDo(t, s.PutMessage("a", 4, []byte("four")))
	mustDo(t, s.DeleteMessage("a", 4))
	mustDo(t, s.Sync())
	// Not synced: lost by the crash, nothing after it survives either.
	mustDo(t, s.PutMessage("a", 5, []byte("five")))
	mustDo(t, s.DeleteMessage("a", 3))
	want := []string{"a/3=three"}
	if got := crashed(t, s, mem); !slices.Equal(got, want) {
		t.Errorf("after the crash: %q, want %q", got, want)
	}
}

// TestPendingUpdateNotCancelled: a message whose record was replaced is
// not a fresh one for its deletion (UpdateMessage), and a session's
// deletion before a message of the same id keeps its order.
func TestPendingUpdateNotCancelled(t *testing.T) {
	mem := vfs.NewCrashableMem()
	dir := filepath.Join(t.TempDir(), "store")
	s := openMem(t, mem, dir, Options{CommitWait: -1})
	mustDo(t, s.PutSession("a", []byte("s")))
	mustDo(t, s.PutMessage("a", 1, []byte("one")))
	mustDo(t, s.Sync())
	mustDo(t, s.UpdateMessage("a", 1, []byte("one'")))
	mustDo(t, s.PutMessage("a", 2, []byte("two")))
	mustDo(t, s.DeleteSession("a"))
	mustDo(t, s.PutSession("a", []byte("s2")))
	mustDo(t, s.PutMessage("a", 2, []byte("two'")))
	mustDo(t, s.Sync())
	want := []string{"session a", "a/2=two'"}
	if got := crashed(t, s, mem); !slices.Equal(got, want) {
		t.Errorf("after the crash: %q, want %q", got, want)
	}
}

// TestCommitWait: a Sync whose only pending writes are new messages waits
// for their deletions (their subscribers' acknowledgements) and then needs
// no fsync; any other write ends the wait, and the Sync covers it.
func TestCommitWait(t *testing.T) {
	mem := vfs.NewCrashableMem()
	dir := filepath.Join(t.TempDir(), "store")
	s := openMem(t, mem, dir, Options{CommitWait: time.Hour})
	n := s.Syncs()
	mustDo(t, s.PutMessage("a", 1, []byte("one")))
	done := make(chan error, 1)
	go func() { done <- s.Sync() }()
	time.Sleep(10 * time.Millisecond) // the Sync waits (not asserted: either order is correct)
	mustDo(t, s.DeleteMessage("a", 1))
	mustDo(t, <-done)
	if s.Syncs() != n {
		t.Errorf("Sync of a message deleted while it waited: %d fsyncs", s.Syncs()-n)
	}

	mustDo(t, s.PutMessage("a", 2, []byte("two")))
	go func() { done <- s.Sync() }()
	time.Sleep(10 * time.Millisecond)
	mustDo(t, s.PutSession("a", []byte("s")))
	mustDo(t, <-done) // a session record is not waited on: this returns
	mustDo(t, s.Sync())
	want := []string{"session a", "a/2=two"}
	if got := crashed(t, s, mem); !slices.Equal(got, want) {
		t.Errorf("after the crash: %q, want %q", got, want)
	}
}
