package core

import (
	"encoding/binary"
	"strings"
	"sync"
	"time"

	"github.com/xmq-io/xmq/codec"
)

// retainedStore holds the last retained message of each topic. A map
// answers exact lookups and replaces a topic's message in O(1), as a
// retained PUBLISH to an existing topic needs; an order-statistic B-tree
// holds the same entries keyed by topic in level order (compareTopics).
// The order keeps every branch of the topic tree contiguous, so a filter
// is answered by seeking from branch to branch (walk) instead of reading
// every topic: a SUBSCRIBE to a/b/# costs a few seeks plus its matches,
// whatever else is retained, and the admin views page, count and search
// in logarithmic time plus the page.
type retainedStore struct {
	mu     sync.RWMutex
	topics map[string]*retainedEntry
	tree   *ostree[*retainedEntry]
	bytes  int64 // topic and payload bytes of every message held
	// own and ownBytes are the messages of the broker's own $SYS topics
	// and their bytes, which the retained budget leaves out.
	own      int
	ownBytes int64
}

// retainedBudget bounds the retained messages of clients (Options.
// MaxRetainedMessages, MaxRetainedBytes): how many, and their topic and
// payload bytes; 0 or less is no bound.
type retainedBudget struct {
	msgs  int
	bytes int64
}

// retainedEntry is a topic's place in both indexes; set replaces its
// message in place, under the write lock.
type retainedEntry struct {
	m      *Message
	stored int64 // when m was retained, Unix milliseconds; 0 unknown (restored from an older store)
}

func newRetainedStore() *retainedStore {
	return &retainedStore{topics: map[string]*retainedEntry{},
		tree: newOstree(func(e *retainedEntry) string { return e.m.Topic }, compareTopics)}
}

// compareTopics orders topics level by level: byte by byte, with '/'
// below every other byte (a topic holds no NUL [MQTT-4.7.3-2], so nothing
// ties with it). Then a topic comes right before its own subtopics, and
// the topics whose level k is the same value v (v itself and v/…) sit
// together, before those whose level k merely begins with v (v-x/…),
// which is what lets walk skip a whole branch with one seek.
func compareTopics(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	// Skip the common prefix a word at a time: topics of one tree share
	// long prefixes.
	ab, bb := unsafeBytes(a), unsafeBytes(b)
	for i+8 <= n && binary.LittleEndian.Uint64(ab[i:]) == binary.LittleEndian.Uint64(bb[i:]) {
		i += 8
	}
	for ; i < n; i++ {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		switch {
		case x == '/':
			return -1
		case y == '/':
			return 1
		case x < y:
			return -1
		}
		return 1
	}
	return len(a) - len(b)
}

// set replaces the topic's retained message, stored at the Unix
// millisecond stored, whatever the budget; an empty payload clears it and
// is itself not retained [MQTT-3.3.1-6] [MQTT-3.3.1-7].
func (r *retainedStore) set(m *Message, stored int64) { r.setWithin(m, stored, retainedBudget{}) }

// setWithin is set unless the message would take the retained messages of
// clients past b, and reports whether it kept (or cleared) the message. A
// new topic, or a larger message for a topic, that does not fit is
// refused; a message no larger than the one it replaces, and a clear,
// always pass, over budget too (after restoring more than a lowered
// budget, say): they never add.
func (r *retainedStore) setWithin(m *Message, stored int64, b retainedBudget) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.topics[m.Topic]
	size := m.size()
	if len(m.Payload) > 0 && (b.msgs > 0 || b.bytes > 0) && !r.fits(e, size, b) {
		return false
	}
	own := ownTopic(m.Topic)
	if e != nil {
		r.bytes -= e.m.size()
		if own {
			r.ownBytes -= e.m.size()
		}
	}
	switch {
	case len(m.Payload) == 0:
		if e != nil {
			delete(r.topics, m.Topic)
			r.tree.delete(m.Topic)
			if own {
				r.own--
			}
		}
		return true
	case e != nil:
		e.m, e.stored = m, stored
		// Assigning an existing string key stores the new one, so the map
		// keeps no reference to the replaced message's topic.
		r.topics[m.Topic] = e
	default:
		e = &retainedEntry{m: m, stored: stored}
		r.topics[m.Topic] = e
		r.tree.set(e)
		if own {
			r.own++
		}
	}
	r.bytes += size
	if own {
		r.ownBytes += size
	}
	return true
}

// fits reports whether a message of size bytes may replace e (nil: a new
// topic) within b; r.mu is held.
func (r *retainedStore) fits(e *retainedEntry, size int64, b retainedBudget) bool {
	var old int64
	if e != nil {
		old = e.m.size()
		if size <= old {
			return true
		}
	}
	if e == nil && b.msgs > 0 && len(r.topics)-r.own >= b.msgs {
		return false
	}
	return b.bytes <= 0 || r.bytes-r.ownBytes-old+size <= b.bytes
}

// ownTopic reports a topic of the broker's own retained messages, which
// the retained budget leaves out (persistRetained: not in the store
// either).
func ownTopic(topic string) bool { return strings.HasPrefix(topic, "$SYS/") }

// clientCounts returns how many retained messages, and bytes, count
// against the budget: all but the broker's own.
func (r *retainedStore) clientCounts() (int, int64) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.topics) - r.own, r.bytes - r.ownBytes
}

// counts returns how many retained messages clients keep, how many the
// broker keeps under $ topics ($SYS), and the bytes of all of them. The $
// topics sort together (compareTopics), so they are counted in
// logarithmic time.
func (r *retainedStore) counts() (user, broker int, bytes int64) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	broker = r.countPrefix("$")
	return len(r.topics) - broker, broker, r.bytes
}

func (r *retainedStore) get(topic string) (*Message, time.Time, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if e := r.topics[topic]; e != nil {
		return e.m, storedTime(e.stored), true
	}
	return nil, time.Time{}, false
}

// storedTime turns a Unix millisecond into a time; 0 is unknown (zero).
func storedTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// mayMatch reports whether a retained message may match filter: the
// topic's, for a filter without wildcards; any at all, for one with.
func (r *retainedStore) mayMatch(filter string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !codec.HasWildcard(unsafeBytes(filter)) {
		return r.topics[filter] != nil
	}
	return len(r.topics) > 0
}

// readExamine bounds the topics one read examines, and so how long it
// holds the lock, whatever the filter skips.
const readExamine = 4096

// read appends to out up to max unexpired retained messages whose topic
// matches filter and comes after the topic after ("" from the first), in
// topic order, visiting only the branches that can match. next is where
// the following read resumes (the last topic read or passed over); done
// reports that no later topic matches. A read that examined readExamine
// topics returns what it found, possibly none, and is not done.
func (r *retainedStore) read(filter, after string, max int, now time.Time, out []*Message) (_ []*Message, next string, done bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !codec.HasWildcard(unsafeBytes(filter)) {
		if e := r.topics[filter]; after == "" && e != nil && !e.m.expired(now) {
			out = append(out, e.m)
		}
		return out, filter, true
	}
	next = after
	full := false
	last, done := r.walk(retainedScan{filter: filter, after: after, budget: readExamine}, func(e *retainedEntry) bool {
		if full = len(out) == max; full {
			return false // walk counts it examined; next stays before it
		}
		if !e.m.expired(now) {
			out = append(out, e.m)
		}
		next = e.m.Topic
		return true
	})
	if !full && last != "" {
		next = last // every topic examined was read or passed over
	}
	return out, next, done
}

// retainedScan is what one walk visits, in topic order.
type retainedScan struct {
	filter string // an MQTT topic filter; "" is every topic, $ topics included
	prefix string // only topics starting with prefix
	after  string // only topics after this one; "" from the first
	budget int    // stop after examining this many topics; 0: no bound
}

// Results of classify.
const (
	scanMatch = iota // the topic matches
	scanSkip         // it does not; the next match is at the returned key or later
	scanEnd          // no later topic matches
)

// walk calls visit, in topic order, with each entry that q selects,
// until visit returns false or q.budget topics have been examined. It
// returns the last topic examined, from which a later walk can resume,
// and whether the walk reached the end. r.mu is held (either way).
//
// Each topic examined either matches or tells, through classify, the
// smallest key a later match can have; walk seeks there. So the topics
// examined are the matches plus at most one per branch that a wildcard
// level passes through and one per literal level tried.
func (r *retainedStore) walk(q retainedScan, visit func(*retainedEntry) bool) (last string, done bool) {
	var levels []string
	if q.filter != "" {
		levels = strings.Split(q.filter, "/")
	}
	var buf [128]byte // seek keys, built without allocating
	var it osIter[*retainedEntry]
	if q.after != "" && compareTopics(q.after, q.prefix) >= 0 {
		if it = r.tree.seek(q.after); it.valid() && it.item().m.Topic == q.after {
			it.next()
		}
	} else {
		it = r.tree.seek(q.prefix)
	}
	for steps := 0; it.valid(); steps++ {
		e := it.item()
		m := e.m
		if !strings.HasPrefix(m.Topic, q.prefix) {
			return last, true
		}
		if q.budget > 0 && steps == q.budget {
			return last, false
		}
		last = m.Topic
		act, key := scanMatch, buf[:0]
		if levels != nil {
			act, key = classify(levels, m.Topic, key)
		}
		switch act {
		case scanMatch:
			if !visit(e) {
				return last, false
			}
			it.next()
		case scanSkip:
			it = r.tree.seek(unsafeString(key))
		case scanEnd:
			return last, true
		}
	}
	return last, true
}

// classify matches topic against the filter's levels. When it does not
// match, classify appends to buf the smallest key (in compareTopics
// order, and above topic) that a later match can have, or reports that
// none can follow.
func classify(levels []string, topic string, buf []byte) (int, []byte) {
	if topic[0] == '$' && (levels[0] == "+" || levels[0] == "#") {
		// A leading wildcard matches no $ topic [MQTT-4.7.2-1]: skip past
		// them all ("%" is the byte after "$").
		return scanSkip, append(buf, '$'+1)
	}
	pos, plusEnd := 0, -1 // start of the current level; end of the last level matched by +
	for i, f := range levels {
		if f == "#" {
			return scanMatch, buf
		}
		end := strings.IndexByte(topic[pos:], '/')
		if end < 0 {
			end = len(topic)
		} else {
			end += pos
		}
		if f == "+" {
			plusEnd = end
		} else if c := strings.Compare(topic[pos:end], f); c < 0 {
			// Levels hold no '/', so plain order agrees with compareTopics:
			// the next candidate has this level equal to f.
			return scanSkip, append(append(buf, topic[:pos]...), f...)
		} else if c > 0 {
			return nextBranch(topic, plusEnd, buf)
		}
		last := i == len(levels)-1
		if end == len(topic) {
			if last || i == len(levels)-2 && levels[i+1] == "#" { // a/# matches a
				return scanMatch, buf
			}
			// The topic is shorter than the filter: try its subtopics.
			buf = append(append(buf, topic...), '/')
			if next := levels[i+1]; next != "+" {
				buf = append(buf, next...)
			}
			return scanSkip, buf
		}
		if last { // the topic is longer than the filter
			return nextBranch(topic, plusEnd, buf)
		}
		pos = end + 1
	}
	return scanEnd, buf // unreachable: the loop returns at the last level
}

// nextBranch skips the rest of the branch that the deepest + level is in:
// the levels below it are literals that no later topic of the branch can
// match. Without a + level, no later topic matches at all.
func nextBranch(topic string, plusEnd int, buf []byte) (int, []byte) {
	if plusEnd < 0 {
		return scanEnd, buf
	}
	// topic[:plusEnd] followed by any level separator or end sorts below
	// the byte 1 (compareTopics puts '/' lowest), and a longer level value
	// sorts above it.
	return scanSkip, append(append(buf, topic[:plusEnd]...), 1)
}

// prefixEnd appends to buf the smallest key above every topic that starts
// with prefix, in compareTopics order; ok is false when there is none.
func prefixEnd(prefix string, buf []byte) (_ []byte, ok bool) {
	for i := len(prefix) - 1; i >= 0; i-- {
		switch b := prefix[i]; {
		case b == '/':
			return append(append(buf, prefix[:i]...), 1), true
		case b < 0xff:
			b++
			if b == '/' { // '/' sorts lowest: the byte above '.' is '0'
				b++
			}
			return append(append(buf, prefix[:i]...), b), true
		}
	}
	return buf, false
}

// countPrefix returns how many topics start with prefix; r.mu is held.
func (r *retainedStore) countPrefix(prefix string) int {
	var buf [128]byte
	end, ok := prefixEnd(prefix, buf[:0])
	hi := r.tree.len()
	if ok {
		hi = r.tree.rank(unsafeString(end))
	}
	return hi - r.tree.rank(prefix)
}

// countMatching returns how many topics match filter ("" any) and start
// with prefix, and false when counting them would examine more than
// budget topics. No filter, a prefix, or a filter of literal levels with
// or without a final # is counted in logarithmic time from the subtree
// sizes; a filter with + is walked (within budget). r.mu is held.
func (r *retainedStore) countMatching(filter, prefix string, budget int) (int, bool) {
	switch {
	case filter == "" && prefix == "":
		return len(r.topics), true
	case filter == "":
		return r.countPrefix(prefix), true
	case prefix != "":
		// Both: walk the filter within the prefix.
	case filter == "#":
		return r.tree.len() - r.countPrefix("$"), true
	case !codec.HasWildcard(unsafeBytes(filter)):
		return b2i(r.topics[filter] != nil), true
	default:
		if base, ok := strings.CutSuffix(filter, "/#"); ok && !codec.HasWildcard(unsafeBytes(base)) {
			// a/# matches a, and every topic under a/.
			return b2i(r.topics[base] != nil) + r.countPrefix(filter[:len(base)+1]), true
		}
	}
	n := 0
	_, done := r.walk(retainedScan{filter: filter, prefix: prefix, budget: budget}, func(*retainedEntry) bool {
		n++
		return true
	})
	return n, done
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
