package store_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/store"
)

var _ core.Store = (*store.Store)(nil)

// impl is one Store implementation under the contract: open gives a new
// empty store, reopen the same store as a restarted process sees it.
type impl struct {
	name   string
	open   func(t *testing.T) core.Store
	reopen func(t *testing.T, st core.Store) core.Store
}

func impls() []impl {
	return []impl{
		{
			name:   "mem",
			open:   func(t *testing.T) core.Store { return core.NewMemStore() },
			reopen: func(t *testing.T, st core.Store) core.Store { return st },
		},
		{
			name: "pebble",
			open: func(t *testing.T) core.Store { return openPebble(t, t.TempDir(), store.Options{}) },
			reopen: func(t *testing.T, st core.Store) core.Store {
				t.Helper()
				dir := st.(*store.Store).Dir()
				if err := st.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				return openPebble(t, dir, store.Options{})
			},
		},
	}
}

// openPebble opens a Pebble store closed at cleanup (a second Close is fine
// for the test: it only reports an error).
func openPebble(t testing.TB, dir string, opts store.Options) *store.Store {
	t.Helper()
	st, err := store.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			closed = true
			_ = closeQuietly(st)
		}
	})
	return st
}

// closeQuietly closes st unless it is closed already.
func closeQuietly(st *store.Store) (err error) {
	defer func() { _ = recover() }()
	return st.Close()
}

// dump is everything a store holds, as Load reports it.
type dump struct {
	Sessions map[string]string
	Messages map[string][]string // "seq=rec" in Load order
	Retained map[string]string
	Inbound  map[string]string
	Wills    map[string]string
}

func load(t *testing.T, st core.Store) dump {
	t.Helper()
	d := dump{map[string]string{}, map[string][]string{}, map[string]string{}, map[string]string{}, map[string]string{}}
	err := st.Load(func(id string, rec []byte) error {
		if len(d.Messages[id]) > 0 {
			return fmt.Errorf("session %q reported after its messages", id)
		}
		d.Sessions[id] = string(rec)
		return nil
	}, func(id string, seq uint64, rec []byte) error {
		d.Messages[id] = append(d.Messages[id], fmt.Sprintf("%d=%s", seq, rec))
		return nil
	}, func(topic string, rec []byte) error {
		d.Retained[topic] = string(rec)
		return nil
	})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if err := st.LoadInbound(func(id string, rec []byte) error { d.Inbound[id] = string(rec); return nil }); err != nil {
		t.Fatalf("LoadInbound: %v", err)
	}
	if err := st.LoadWills(func(id string, rec []byte) error { d.Wills[id] = string(rec); return nil }); err != nil {
		t.Fatalf("LoadWills: %v", err)
	}
	return d
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestContract runs the same cases against every implementation; each case
// writes, optionally reopens, and checks what Load reports.
func TestContract(t *testing.T) {
	cases := []struct {
		name  string
		write func(t *testing.T, st core.Store)
		want  dump
	}{
		{
			name: "sessions replace and delete",
			write: func(t *testing.T, st core.Store) {
				must(t, st.PutSession("a", []byte("a1")))
				must(t, st.PutSession("a", []byte("a2")))
				must(t, st.PutSession("b", []byte("b1")))
				must(t, st.PutSession("gone", []byte("g")))
				must(t, st.DeleteSession("gone"))
				must(t, st.DeleteSession("never-there"))
			},
			want: dump{Sessions: map[string]string{"a": "a2", "b": "b1"}},
		},
		{
			name: "messages in seq order per session",
			write: func(t *testing.T, st core.Store) {
				must(t, st.PutSession("a", []byte("s")))
				must(t, st.PutSession("ab", []byte("s")))
				for _, seq := range []uint64{65536, 2, 256, 1, 1 << 40} {
					must(t, st.PutMessage("a", seq, []byte(fmt.Sprint("m", seq))))
				}
				must(t, st.PutMessage("ab", 1, []byte("other")))
				must(t, st.DeleteMessage("a", 2))
				must(t, st.UpdateMessage("a", 256, []byte("updated")))
				must(t, st.DeleteMessage("a", 3)) // never stored
			},
			want: dump{
				Sessions: map[string]string{"a": "s", "ab": "s"},
				Messages: map[string][]string{
					"a":  {"1=m1", "256=updated", "65536=m65536", fmt.Sprintf("%d=m%d", 1<<40, 1<<40)},
					"ab": {"1=other"},
				},
			},
		},
		{
			name: "delete session takes its messages and inbound state, not its will",
			write: func(t *testing.T, st core.Store) {
				for _, id := range []string{"x", "x2"} {
					must(t, st.PutSession(id, []byte("s")))
					must(t, st.PutMessage(id, 1, []byte("m")))
					must(t, st.PutInbound(id, []byte("in")))
					must(t, st.PutWill(id, []byte("will")))
				}
				must(t, st.DeleteSession("x"))
			},
			want: dump{
				Sessions: map[string]string{"x2": "s"},
				Messages: map[string][]string{"x2": {"1=m"}},
				Inbound:  map[string]string{"x2": "in"},
				Wills:    map[string]string{"x": "will", "x2": "will"},
			},
		},
		{
			name: "retained, inbound and wills",
			write: func(t *testing.T, st core.Store) {
				must(t, st.PutRetained("a/b", []byte("1")))
				must(t, st.PutRetained("a/b", []byte("2")))
				must(t, st.PutRetained("c", []byte("3")))
				must(t, st.PutRetained("gone", []byte("4")))
				must(t, st.DeleteRetained("gone"))
				must(t, st.PutInbound("p", []byte("i1")))
				must(t, st.PutInbound("p", []byte("i2")))
				must(t, st.PutInbound("q", []byte("i")))
				must(t, st.DeleteInbound("q"))
				must(t, st.PutWill("w", []byte("w1")))
				must(t, st.PutWill("v", []byte("w2")))
				must(t, st.DeleteWill("v"))
			},
			want: dump{
				Retained: map[string]string{"a/b": "2", "c": "3"},
				Inbound:  map[string]string{"p": "i2"},
				Wills:    map[string]string{"w": "w1"},
			},
		},
		{
			name: "empty and binary values, odd ids",
			write: func(t *testing.T, st core.Store) {
				long := string(slices.Repeat([]byte("x"), 65535))
				must(t, st.PutSession("", []byte{}))
				must(t, st.PutSession(long, []byte{0, 0xFF}))
				must(t, st.PutMessage(long, 7, []byte{}))
				must(t, st.PutSession("é/\x01", []byte("u")))
			},
			want: dump{
				Sessions: map[string]string{"": "", string(slices.Repeat([]byte("x"), 65535)): "\x00\xff", "é/\x01": "u"},
				Messages: map[string][]string{string(slices.Repeat([]byte("x"), 65535)): {"7="}},
			},
		},
	}
	for _, im := range impls() {
		for _, tc := range cases {
			for _, reopen := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/reopen=%v", im.name, tc.name, reopen), func(t *testing.T) {
					st := im.open(t)
					tc.write(t, st)
					must(t, st.Sync())
					if reopen {
						st = im.reopen(t, st)
					}
					got := load(t, st)
					want := tc.want
					for _, m := range []*map[string]string{&want.Sessions, &want.Retained, &want.Inbound, &want.Wills} {
						if *m == nil {
							*m = map[string]string{}
						}
					}
					if want.Messages == nil {
						want.Messages = map[string][]string{}
					}
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("Load:\n got %.300v\nwant %.300v", got, want)
					}
				})
			}
		}
	}
}

// TestContractConcurrent writes from many goroutines at once, as
// connections do, and syncs from all of them.
func TestContractConcurrent(t *testing.T) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			st := im.open(t)
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					id := fmt.Sprint("c", g)
					must(t, st.PutSession(id, []byte("s")))
					for i := range uint64(200) {
						must(t, st.PutMessage(id, i+1, []byte("m")))
						if i%2 == 0 {
							must(t, st.DeleteMessage(id, i+1))
						}
						if i%20 == 0 {
							must(t, st.Sync())
						}
					}
				})
			}
			wg.Wait()
			st = im.reopen(t, st)
			got := load(t, st)
			for g := range 8 {
				if n := len(got.Messages[fmt.Sprint("c", g)]); n != 100 {
					t.Errorf("session c%d holds %d messages, want 100", g, n)
				}
			}
		})
	}
}

// TestLoadCallbackError stops Load at the callback's error.
func TestLoadCallbackError(t *testing.T) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			st := im.open(t)
			must(t, st.PutSession("a", []byte("s")))
			must(t, st.PutSession("b", []byte("s")))
			stop := fmt.Errorf("stop")
			n := 0
			err := st.Load(func(string, []byte) error { n++; return stop },
				func(string, uint64, []byte) error { return nil }, func(string, []byte) error { return nil })
			if err != stop || n != 1 {
				t.Errorf("Load = %v after %d calls, want the callback's error after 1", err, n)
			}
		})
	}
}
