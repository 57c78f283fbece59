package store_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/store"
)

// rawSet writes a key into a closed store's directory behind its back.
func rawSet(t *testing.T, dir string, key, val []byte) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	must(t, db.Set(key, val, pebble.Sync))
	must(t, db.Close())
}

func TestNewerFormatRefused(t *testing.T) {
	dir := t.TempDir()
	st := openPebble(t, dir, store.Options{})
	must(t, st.Close())
	rawSet(t, dir, []byte("F"), binary.BigEndian.AppendUint32(nil, store.FormatVersion+1))
	_, err := store.Open(dir, store.Options{})
	if !errors.Is(err, store.ErrFormat) || !strings.Contains(err.Error(), "newer") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Open of a newer format: %v, want ErrFormat naming the directory and a newer build", err)
	}
}

func TestNotAnXmqStoreRefused(t *testing.T) {
	dir := t.TempDir()
	rawSet(t, dir, []byte("zzz"), []byte("v"))
	if _, err := store.Open(dir, store.Options{}); !errors.Is(err, store.ErrDamaged) {
		t.Fatalf("Open of a foreign database: %v, want ErrDamaged", err)
	}
}

func TestMalformedKeyReported(t *testing.T) {
	dir := t.TempDir()
	st := openPebble(t, dir, store.Options{})
	must(t, st.PutSession("ok", []byte("s")))
	must(t, st.Close())
	rawSet(t, dir, []byte{'m', 0, 9, 'x'}, []byte("v")) // id length beyond the key
	st = openPebble(t, dir, store.Options{ReadOnly: true})
	err := st.Load(func(string, []byte) error { return nil }, func(string, uint64, []byte) error { return nil },
		func(string, []byte) error { return nil })
	if !errors.Is(err, store.ErrDamaged) {
		t.Errorf("Load: %v, want ErrDamaged", err)
	}
	var problems []error
	ks, err := st.Check(func(err error) { problems = append(problems, err) })
	if err != nil || len(problems) != 1 || ks.Sessions != 1 {
		t.Errorf("Check = %+v, %v, problems %v; want one session and one problem", ks, err, problems)
	}
}

// TestDamagedFilesReported overwrites the store's files with garbage: Open
// or Load must say the store is damaged, and never panic.
func TestDamagedFilesReported(t *testing.T) {
	for _, victim := range []string{"MANIFEST", ".sst", "OPTIONS"} {
		t.Run(victim, func(t *testing.T) {
			dir := t.TempDir()
			st := openPebble(t, dir, store.Options{})
			for i := range uint64(2000) {
				must(t, st.PutMessage("c", i, []byte(strings.Repeat("p", 100))))
			}
			must(t, st.Compact()) // makes an sstable
			must(t, st.Close())
			entries, _ := os.ReadDir(dir)
			hit := 0
			for _, e := range entries {
				if strings.Contains(e.Name(), victim) {
					path := filepath.Join(dir, e.Name())
					data, err := os.ReadFile(path)
					must(t, err)
					for i := 0; i < len(data); i += 7 {
						data[i] ^= 0x5A
					}
					must(t, os.WriteFile(path, data, 0o600))
					hit++
				}
			}
			if hit == 0 {
				t.Skipf("no %s file in %v", victim, entries)
			}
			st2, err := store.Open(dir, store.Options{})
			if err == nil {
				err = st2.Load(func(string, []byte) error { return nil }, func(string, uint64, []byte) error { return nil },
					func(string, []byte) error { return nil })
				_ = closeQuietly(st2)
			}
			if !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("damaged %s: %v, want ErrDamaged naming %s", victim, err, dir)
			}
		})
	}
}

func TestReadOnlyDirectory(t *testing.T) {
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		// Root writes through permissions; the immutable attribute stops it.
		if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
			t.Skipf("chattr +i: %v %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("chattr", "-i", dir).Run() })
	} else {
		must(t, os.Chmod(dir, 0o500))
		t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
	}
	_, err := store.Open(dir, store.Options{})
	if !errors.Is(err, store.ErrNotWritable) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Open of a read-only directory: %v, want ErrNotWritable naming it", err)
	}
}

func TestDiskBudget(t *testing.T) {
	st := openPebble(t, t.TempDir(), store.Options{MaxDiskBytes: 2 << 20, MinFreeBytes: -1})
	payload := []byte(strings.Repeat("x", 1000))
	var err error
	n := uint64(0)
	for ; n < 10000 && err == nil; n++ {
		err = st.PutMessage("c", n, payload)
	}
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "max_disk_bytes") {
		t.Fatalf("after %d messages: %v, want ENOSPC naming the budget", n, err)
	}
	if n < 1000 {
		t.Errorf("refused after %d KB, want about the 2 MiB budget", n)
	}
	// Sessions and deletions still go through; once the data is gone the
	// store accepts messages again.
	must(t, st.PutSession("c", []byte("s")))
	must(t, st.DeleteSession("c"))
	must(t, st.Compact())
	deadline := time.Now().Add(5 * time.Second)
	for st.PutMessage("c", 1, payload) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("still refusing after the data was deleted: disk usage %d", st.DiskUsage())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestGroupCommit: concurrent Syncs share fsyncs, and each returns only
// once its own writes are covered.
func TestGroupCommit(t *testing.T) {
	st := openPebble(t, t.TempDir(), store.Options{})
	const workers, rounds = 16, 50
	before := st.Syncs()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range uint64(rounds) {
				must(t, st.PutMessage(fmt.Sprint("c", w), i, []byte("m")))
				must(t, st.Sync())
			}
		})
	}
	wg.Wait()
	syncs := st.Syncs() - before
	t.Logf("%d Sync calls, %d fsyncs", workers*rounds, syncs)
	if syncs == 0 || syncs >= workers*rounds {
		t.Errorf("%d fsyncs for %d Sync calls, want fewer (group commit)", syncs, workers*rounds)
	}
	// Nothing written since: Sync costs nothing.
	n := st.Syncs()
	must(t, st.Sync())
	if st.Syncs() != n {
		t.Errorf("Sync with nothing to write did an fsync")
	}
}

func TestDurabilityModes(t *testing.T) {
	for _, mode := range []store.Durability{store.DurabilityInterval, store.DurabilityNone} {
		t.Run(string(mode), func(t *testing.T) {
			st := openPebble(t, t.TempDir(), store.Options{Durability: mode, FlushInterval: 10 * time.Millisecond})
			must(t, st.PutMessage("c", 1, []byte("m")))
			must(t, st.Sync())
			if st.Syncs() != 0 {
				t.Errorf("Sync forced an fsync in %s mode", mode)
			}
			time.Sleep(100 * time.Millisecond)
			if got := st.Syncs(); (mode == store.DurabilityInterval) != (got > 0) {
				t.Errorf("%s mode: %d background flushes", mode, got)
			}
		})
	}
	if err := (&store.Options{Durability: "sometimes"}).Validate(); err == nil {
		t.Error("unknown durability accepted")
	}
}

// dirSize sums the store's files: tables and the rest (log, manifest).
func dirSize(t *testing.T, dir string) (tables, other int64) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	must(t, err)
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			continue // deleted meanwhile
		}
		if strings.HasSuffix(e.Name(), ".sst") {
			tables += fi.Size()
		} else {
			other += fi.Size()
		}
	}
	return tables, other
}

// TestCompactionUnderChurn puts and deletes many messages while a small set
// stays live: the store's size must follow what is live, not what passed
// through. The write-ahead log is a fixed cost on top (reused files of
// about a memtable each).
func TestCompactionUnderChurn(t *testing.T) {
	cycles := 400_000
	if testing.Short() {
		cycles = 100_000
	}
	const live, size = 1000, 200
	dir := t.TempDir()
	st := openPebble(t, dir, store.Options{Durability: store.DurabilityNone})
	payload := []byte(strings.Repeat("p", size))
	for i := range uint64(cycles) {
		must(t, st.PutMessage(fmt.Sprint("c", i%50), i, payload))
		if i >= live {
			must(t, st.DeleteMessage(fmt.Sprint("c", (i-live)%50), i-live))
		}
	}
	passed := int64(cycles * size)
	tables, other := dirSize(t, dir)
	must(t, st.Compact())
	time.Sleep(100 * time.Millisecond) // obsolete files go in the background
	ctables, cother := dirSize(t, dir)
	t.Logf("%d MB passed through, %d KB live: tables %d KB + log %d KB; after a full compaction tables %d KB + log %d KB",
		passed>>20, live*size>>10, tables>>10, other>>10, ctables>>10, cother>>10)
	if tables > passed/4 {
		t.Errorf("tables hold %d bytes after churn, want far less than the %d that passed through", tables, passed)
	}
	if ctables > 8*live*size+(1<<20) {
		t.Errorf("tables hold %d bytes after compaction, want proportional to %d live bytes", ctables, live*size)
	}
	if other > 6*16<<20 {
		t.Errorf("log and manifest hold %d bytes, want them bounded by a few memtables", other)
	}
}

// TestCheckStoreDecodes runs core's record check over a store a Server
// wrote: every record decodes, and a foreign record is reported.
func TestCheckStoreDecodes(t *testing.T) {
	dir := t.TempDir()
	st := openPebble(t, dir, store.Options{})
	must(t, st.PutSession("bad", []byte{99, 1, 2}))
	must(t, st.Close())
	st = openPebble(t, dir, store.Options{ReadOnly: true})
	rep, err := core.CheckStore(st)
	if err != nil || rep.Sessions != 1 || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].Error(), "newer") {
		t.Fatalf("CheckStore = %+v, %v; want one session with a format problem", rep, err)
	}
}
