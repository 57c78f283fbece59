package core

// ostree is an order-statistic B-tree: a set of items kept sorted by a
// string key, with lookup, insert, delete, rank (how many keys are below a
// key) and select (the item at a position) in O(log n), and in-order
// iteration from any key. Every node knows how many items its subtree
// holds, which makes rank and select logarithmic and lets the admin views
// count a range and page through it without touching the rest.
//
// It serves the retained messages (keyed by topic in level order, see
// compareTopics) and the client index (keyed by client id). It has no lock
// of its own: its owner's lock guards it.
type ostree[T any] struct {
	key  func(T) string
	cmp  func(a, b string) int
	root *osnode[T]
}

// osnode is one node: items sorted by key and, in an inner node,
// len(items)+1 children; the keys under children[i] lie between items[i-1]
// and items[i].
type osnode[T any] struct {
	items    []T
	children []*osnode[T]
	size     int // items in this subtree
}

// A node holds at most osMaxItems items and, except the root, at least
// osMinItems. The maximum is even, not the textbook 2·degree-1: then two
// nodes merged by a delete (2·osMinItems+1 items) are not full, and the
// next insert does not split them again, so a topic retained and cleared
// over and over costs no allocation.
const (
	osDegree   = 16
	osMaxItems = 2 * osDegree
	osMinItems = osDegree - 1
	// osMaxDepth bounds the height: a tree osMaxDepth deep holds more than
	// 16^(osMaxDepth-1) items.
	osMaxDepth = 18
)

func newOstree[T any](key func(T) string, cmp func(a, b string) int) *ostree[T] {
	return &ostree[T]{key: key, cmp: cmp}
}

// len returns the number of items.
func (t *ostree[T]) len() int {
	if t.root == nil {
		return 0
	}
	return t.root.size
}

// find returns the position of the first item of n whose key is not below
// key, and whether that item's key is key.
func (t *ostree[T]) find(n *osnode[T], key string) (int, bool) {
	lo, hi := 0, len(n.items)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.cmp(t.key(n.items[m]), key) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(n.items) && t.cmp(t.key(n.items[lo]), key) == 0
}

// get returns the item with key.
func (t *ostree[T]) get(key string) (T, bool) {
	for n := t.root; n != nil; {
		i, found := t.find(n, key)
		if found {
			return n.items[i], true
		}
		if n.children == nil {
			break
		}
		n = n.children[i]
	}
	var zero T
	return zero, false
}

// set inserts item, or replaces the item with its key and returns that.
func (t *ostree[T]) set(item T) (old T, replaced bool) {
	if t.root == nil {
		t.root = &osnode[T]{items: []T{item}, size: 1}
		return old, false
	}
	if len(t.root.items) == osMaxItems {
		r := &osnode[T]{children: []*osnode[T]{t.root}, size: t.root.size}
		t.split(r, 0)
		t.root = r
	}
	return t.insert(t.root, item)
}

// insert adds item under n, which is not full.
func (t *ostree[T]) insert(n *osnode[T], item T) (old T, replaced bool) {
	k := t.key(item)
	i, found := t.find(n, k)
	if found {
		old, n.items[i] = n.items[i], item
		return old, true
	}
	if n.children == nil {
		n.items = append(n.items, item)
		copy(n.items[i+1:], n.items[i:])
		n.items[i] = item
		n.size++
		return old, false
	}
	if len(n.children[i].items) == osMaxItems {
		t.split(n, i)
		switch c := t.cmp(k, t.key(n.items[i])); {
		case c == 0:
			old, n.items[i] = n.items[i], item
			return old, true
		case c > 0:
			i++
		}
	}
	old, replaced = t.insert(n.children[i], item)
	if !replaced {
		n.size++
	}
	return old, replaced
}

// split moves the upper half of n's full child i to a new sibling and
// its middle item up into n: the child keeps osMinItems items, the
// sibling the other osMinItems+1.
func (t *ostree[T]) split(n *osnode[T], i int) {
	c := n.children[i]
	median := c.items[osMinItems]
	r := &osnode[T]{items: make([]T, len(c.items)-osMinItems-1, osMaxItems)}
	copy(r.items, c.items[osMinItems+1:])
	clear(c.items[osMinItems:]) // drop references for the collector
	c.items = c.items[:osMinItems]
	r.size = len(r.items)
	if c.children != nil {
		r.children = make([]*osnode[T], len(c.children)-osMinItems-1, osMaxItems+1)
		copy(r.children, c.children[osMinItems+1:])
		clear(c.children[osMinItems+1:])
		c.children = c.children[:osMinItems+1]
		for _, x := range r.children {
			r.size += x.size
		}
	}
	c.size -= r.size + 1
	n.items = append(n.items, median)
	copy(n.items[i+1:], n.items[i:])
	n.items[i] = median
	n.children = append(n.children, nil)
	copy(n.children[i+2:], n.children[i+1:])
	n.children[i+1] = r
}

// delete removes the item with key and returns it.
func (t *ostree[T]) delete(key string) (T, bool) {
	var zero T
	if t.root == nil {
		return zero, false
	}
	out, ok := t.remove(t.root, key)
	if len(t.root.items) == 0 {
		if t.root.children != nil {
			t.root = t.root.children[0]
		} else {
			t.root = nil
		}
	}
	return out, ok
}

// remove deletes key from under n; n has more than osMinItems items or is
// the root.
func (t *ostree[T]) remove(n *osnode[T], key string) (T, bool) {
	for {
		i, found := t.find(n, key)
		if n.children == nil {
			if !found {
				var zero T
				return zero, false
			}
			out := n.items[i]
			copy(n.items[i:], n.items[i+1:])
			var zero T
			n.items[len(n.items)-1] = zero
			n.items = n.items[:len(n.items)-1]
			n.size--
			return out, true
		}
		if len(n.children[i].items) <= osMinItems {
			t.grow(n, i)
			continue // the items moved: look again
		}
		if found {
			// Replace the item by its predecessor, the largest under child i.
			out := n.items[i]
			n.items[i] = t.removeMax(n.children[i])
			n.size--
			return out, true
		}
		out, ok := t.remove(n.children[i], key)
		if ok {
			n.size--
		}
		return out, ok
	}
}

// removeMax deletes and returns the largest item under n, which has more
// than osMinItems items.
func (t *ostree[T]) removeMax(n *osnode[T]) T {
	n.size--
	if n.children == nil {
		out := n.items[len(n.items)-1]
		var zero T
		n.items[len(n.items)-1] = zero
		n.items = n.items[:len(n.items)-1]
		return out
	}
	if last := len(n.children) - 1; len(n.children[last].items) <= osMinItems {
		t.grow(n, last)
	}
	return t.removeMax(n.children[len(n.children)-1])
}

// grow gives n's child i more than osMinItems items: it borrows one from a
// sibling through n, or merges with a sibling and the item between them.
func (t *ostree[T]) grow(n *osnode[T], i int) {
	var zero T
	c := n.children[i]
	if i > 0 && len(n.children[i-1].items) > osMinItems {
		l := n.children[i-1]
		c.items = append(c.items, zero)
		copy(c.items[1:], c.items)
		c.items[0] = n.items[i-1]
		n.items[i-1] = l.items[len(l.items)-1]
		l.items[len(l.items)-1] = zero
		l.items = l.items[:len(l.items)-1]
		moved := 1
		if l.children != nil {
			x := l.children[len(l.children)-1]
			l.children[len(l.children)-1] = nil
			l.children = l.children[:len(l.children)-1]
			c.children = append(c.children, nil)
			copy(c.children[1:], c.children)
			c.children[0] = x
			moved += x.size
		}
		l.size -= moved
		c.size += moved
		return
	}
	if i < len(n.items) && len(n.children[i+1].items) > osMinItems {
		r := n.children[i+1]
		c.items = append(c.items, n.items[i])
		n.items[i] = r.items[0]
		copy(r.items, r.items[1:])
		r.items[len(r.items)-1] = zero
		r.items = r.items[:len(r.items)-1]
		moved := 1
		if r.children != nil {
			x := r.children[0]
			copy(r.children, r.children[1:])
			r.children[len(r.children)-1] = nil
			r.children = r.children[:len(r.children)-1]
			c.children = append(c.children, x)
			moved += x.size
		}
		r.size -= moved
		c.size += moved
		return
	}
	if i == len(n.items) {
		i--
		c = n.children[i]
	}
	r := n.children[i+1]
	c.items = append(c.items, n.items[i])
	c.items = append(c.items, r.items...)
	c.children = append(c.children, r.children...)
	c.size += 1 + r.size
	copy(n.items[i:], n.items[i+1:])
	n.items[len(n.items)-1] = zero
	n.items = n.items[:len(n.items)-1]
	copy(n.children[i+1:], n.children[i+2:])
	n.children[len(n.children)-1] = nil
	n.children = n.children[:len(n.children)-1]
}

// rank returns how many items have a key below key.
func (t *ostree[T]) rank(key string) int {
	r := 0
	for n := t.root; n != nil; {
		i, found := t.find(n, key)
		r += i
		if n.children == nil {
			break
		}
		for _, c := range n.children[:i] {
			r += c.size
		}
		if found {
			return r + n.children[i].size
		}
		n = n.children[i]
	}
	return r
}

// at returns the item at position i (0 ≤ i < len) in key order.
func (t *ostree[T]) at(i int) T {
	n := t.root
	for n.children != nil {
		j := 0
		for ; i >= n.children[j].size; j++ {
			i -= n.children[j].size
			if i == 0 {
				return n.items[j]
			}
			i--
		}
		n = n.children[j]
	}
	return n.items[i]
}

// osIter walks a tree in key order. It is a value with a fixed stack, so
// a walk allocates nothing; the tree must not change during the walk.
type osIter[T any] struct {
	t     *ostree[T]
	stack [osMaxDepth]osFrame[T]
	depth int
}

// osFrame is a node on the path to the current item: the walk is at
// items[i] of the deepest frame, and each frame above is at the item that
// follows the child it descended into.
type osFrame[T any] struct {
	n *osnode[T]
	i int
}

// seek returns an iterator at the first item whose key is not below key.
func (t *ostree[T]) seek(key string) osIter[T] {
	it := osIter[T]{t: t}
	for n := t.root; n != nil; {
		i, found := t.find(n, key)
		it.stack[it.depth] = osFrame[T]{n, i}
		it.depth++
		if found || n.children == nil {
			break
		}
		n = n.children[i]
	}
	it.settle()
	return it
}

// first returns an iterator at the smallest item.
func (t *ostree[T]) first() osIter[T] {
	it := osIter[T]{t: t}
	if t.root != nil {
		it.descend(t.root)
	}
	it.settle()
	return it
}

// descend pushes the path to the smallest item under n.
func (it *osIter[T]) descend(n *osnode[T]) {
	for {
		it.stack[it.depth] = osFrame[T]{n, 0}
		it.depth++
		if n.children == nil {
			return
		}
		n = n.children[0]
	}
}

// settle pops the frames whose items are all behind the walk.
func (it *osIter[T]) settle() {
	for it.depth > 0 && it.stack[it.depth-1].i >= len(it.stack[it.depth-1].n.items) {
		it.depth--
	}
}

// valid reports whether the iterator is at an item.
func (it *osIter[T]) valid() bool { return it.depth > 0 }

// item returns the current item; valid must be true.
func (it *osIter[T]) item() T {
	f := &it.stack[it.depth-1]
	return f.n.items[f.i]
}

// next moves to the following item.
func (it *osIter[T]) next() {
	f := &it.stack[it.depth-1]
	f.i++
	if f.n.children != nil {
		it.descend(f.n.children[f.i])
	}
	it.settle()
}
