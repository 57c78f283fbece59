package core

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// check verifies the tree's invariants: keys in order, node fill, equal
// leaf depth and subtree sizes.
func (t *ostree[T]) check(tb testing.TB) {
	tb.Helper()
	if t.root == nil {
		return
	}
	leafDepth := -1
	var prev *string
	var walk func(n *osnode[T], depth int, root bool) int
	walk = func(n *osnode[T], depth int, root bool) int {
		if len(n.items) > osMaxItems || !root && len(n.items) < osMinItems || len(n.items) == 0 {
			tb.Fatalf("node with %d items", len(n.items))
		}
		size := 0
		visit := func(x T) {
			k := t.key(x)
			if prev != nil && t.cmp(*prev, k) >= 0 {
				tb.Fatalf("key %q after %q", k, *prev)
			}
			prev = &k
			size++
		}
		if n.children == nil {
			if leafDepth < 0 {
				leafDepth = depth
			} else if leafDepth != depth {
				tb.Fatalf("leaves at depths %d and %d", leafDepth, depth)
			}
			for _, x := range n.items {
				visit(x)
			}
		} else {
			if len(n.children) != len(n.items)+1 {
				tb.Fatalf("%d items, %d children", len(n.items), len(n.children))
			}
			for i, c := range n.children {
				size += walk(c, depth+1, false)
				if i < len(n.items) {
					visit(n.items[i])
				}
			}
		}
		if n.size != size {
			tb.Fatalf("node size %d, holds %d", n.size, size)
		}
		return size
	}
	walk(t.root, 0, true)
}

// TestOstreeAgainstSortedSlice applies random sets and deletes to a tree
// and to a sorted slice and compares every operation's answer.
func TestOstreeAgainstSortedSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tr := newOstree(func(s string) string { return s }, strings.Compare)
	var ref []string
	key := func() string { return fmt.Sprintf("k%05d", rng.IntN(3000)) }
	for step := range 20_000 {
		k := key()
		i, found := slices.BinarySearch(ref, k)
		if rng.IntN(3) == 0 {
			_, ok := tr.delete(k)
			if ok != found {
				t.Fatalf("step %d: delete(%s) = %v, want %v", step, k, ok, found)
			}
			if found {
				ref = slices.Delete(ref, i, i+1)
			}
		} else {
			_, replaced := tr.set(k)
			if replaced != found {
				t.Fatalf("step %d: set(%s) replaced %v, want %v", step, k, replaced, found)
			}
			if !found {
				ref = slices.Insert(ref, i, k)
			}
		}
		if step%1000 == 0 || step > 19_800 {
			tr.check(t)
			if tr.len() != len(ref) {
				t.Fatalf("len %d, want %d", tr.len(), len(ref))
			}
			for range 20 {
				k := key()
				want, _ := slices.BinarySearch(ref, k)
				if r := tr.rank(k); r != want {
					t.Fatalf("rank(%s) = %d, want %d", k, r, want)
				}
				if it := tr.seek(k); it.valid() != (want < len(ref)) || it.valid() && it.item() != ref[want] {
					t.Fatalf("seek(%s) wrong, want position %d", k, want)
				}
				if _, ok := tr.get(k); ok != slices.Contains(ref, k) {
					t.Fatalf("get(%s) = %v", k, ok)
				}
				if len(ref) > 0 {
					if j := rng.IntN(len(ref)); tr.at(j) != ref[j] {
						t.Fatalf("at(%d) = %s, want %s", j, tr.at(j), ref[j])
					}
				}
			}
			var all []string
			for it := tr.first(); it.valid(); it.next() {
				all = append(all, it.item())
			}
			if !slices.Equal(all, ref) {
				t.Fatalf("iteration gives %d items, want %d", len(all), len(ref))
			}
		}
	}
	for _, k := range slices.Clone(ref) {
		if _, ok := tr.delete(k); !ok {
			t.Fatalf("delete(%s) missed", k)
		}
	}
	if tr.len() != 0 || tr.root != nil {
		t.Fatalf("emptied tree: len %d", tr.len())
	}
}
