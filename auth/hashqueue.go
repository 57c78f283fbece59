package auth

import (
	"container/heap"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// hashTurn is what a login gets from the hash queue.
type hashTurn uint8

const (
	turnRun    hashTurn = iota + 1 // a slot is held: check the hash, then release
	turnLocked                     // the source was locked out before its turn
	turnBusy                       // the queue was full or the wait ran out
)

// hashQueue schedules password hash checks: at most slots run at once, and
// the logins waiting for one are served fairly between source addresses
// (sourceKey), each source's in the order they came.
//
// Fairness: the sources with a login waiting are served in rounds: first
// those that have started the fewest checks since they last had none
// waiting or running (served). Within a round, a source with fewer logins
// waiting goes first, so a backlog never delays another source's first
// check; then the one whose last check started longest ago (a source
// without one yet first), then the first to arrive. A source that appears
// joins the round of the least served source waiting: the next free slot
// goes to it unless other sources have no more waiting than it and have
// not had their turn in that round either.
//
// Bound per source: a source runs at most budget(key) checks at once,
// the failures it may still have before its lockout. So checks in progress
// never add up to more failures than the limit, and once a failure locks a
// source out, the logins it has waiting are refused without a check.
//
// Each login waits in its own goroutine (the connection's); the queue only
// hands out turns.
type hashQueue struct {
	perSource, total int // bounds on waiting logins
	budget           func(key netip.Addr) (n int, locked bool)

	mu       sync.Mutex // guards everything below; budget is called with it held
	free     int        // slots not running a check
	queued   int        // logins waiting, all sources
	sources  map[netip.Addr]*hashSource
	ready    sourceHeap // sources with a waiting login, next to serve first
	seq      uint64     // numbers the checks started
	arrivals uint64     // numbers the sources as they appear
}

// hashSource is one source address's logins waiting and running.
type hashSource struct {
	key     netip.Addr
	waiting []*hashWaiter // in arrival order
	running int
	served  uint64 // checks started since the source appeared
	last    uint64 // seq of its last check started; 0: none yet
	arrival uint64 // when the source appeared, numbered
	index   int    // in hashQueue.ready; -1 when not there
}

// hashWaiter is one login waiting for its turn; the turn is sent once.
type hashWaiter struct{ turn chan hashTurn }

func newHashQueue(slots, perSource, total int, budget func(netip.Addr) (int, bool)) *hashQueue {
	return &hashQueue{perSource: perSource, total: total, budget: budget, free: max(slots, 1),
		sources: map[netip.Addr]*hashSource{}}
}

// acquire waits up to wait for a turn to check a hash for a login from
// key. After turnRun the caller must call release(key).
func (q *hashQueue) acquire(key netip.Addr, wait time.Duration) hashTurn {
	q.mu.Lock()
	n, locked := q.budget(key)
	if locked {
		q.mu.Unlock()
		return turnLocked
	}
	s := q.sources[key]
	// With a slot free no waiting login can start (dispatch would have
	// started it), so starting this one passes nobody over.
	if q.free > 0 && (s == nil || len(s.waiting) == 0 && s.running < n) {
		q.startLocked(q.sourceLocked(key))
		q.mu.Unlock()
		return turnRun
	}
	if q.queued >= q.total || s != nil && len(s.waiting) >= q.perSource {
		q.mu.Unlock()
		return turnBusy
	}
	s = q.sourceLocked(key)
	w := &hashWaiter{turn: make(chan hashTurn, 1)}
	s.waiting = append(s.waiting, w)
	q.queued++
	switch {
	case s.index >= 0:
		heap.Fix(&q.ready, s.index) // one more waiting: later in its round
	case s.running < n:
		heap.Push(&q.ready, s)
	}
	q.dispatchLocked()
	q.mu.Unlock()

	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case turn := <-w.turn:
		return turn
	case <-t.C:
	}
	q.mu.Lock()
	if i := slices.Index(s.waiting, w); i >= 0 {
		s.waiting = slices.Delete(s.waiting, i, i+1)
		q.queued--
		q.settleLocked(s)
		q.mu.Unlock()
		return turnBusy
	}
	q.mu.Unlock()
	return <-w.turn // its turn came as the wait ran out
}

// release ends a check that acquire allowed. The caller records a failure
// (failureLimiter.fail) before, so that the source's budget is current.
func (q *hashQueue) release(key netip.Addr) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.free++
	s := q.sources[key]
	if s == nil {
		return // cannot happen: a source with a check running is kept
	}
	s.running--
	switch n, locked := q.budget(key); {
	case locked:
		q.refuseLocked(s)
	case len(s.waiting) > 0 && s.index < 0 && s.running < n:
		heap.Push(&q.ready, s) // it was held back by its budget
	}
	q.settleLocked(s)
	q.dispatchLocked()
}

// sourceLocked returns key's state, creating it level with the least
// served source waiting.
func (q *hashQueue) sourceLocked(key netip.Addr) *hashSource {
	if s := q.sources[key]; s != nil {
		return s
	}
	q.arrivals++
	s := &hashSource{key: key, index: -1, arrival: q.arrivals}
	if len(q.ready) > 0 {
		s.served = q.ready[0].served
	}
	q.sources[key] = s
	return s
}

// startLocked counts a check of s as started.
func (q *hashQueue) startLocked(s *hashSource) {
	q.free--
	q.seq++
	s.running++
	s.served++
	s.last = q.seq
	if s.index >= 0 {
		if len(s.waiting) == 0 {
			heap.Remove(&q.ready, s.index)
		} else {
			heap.Fix(&q.ready, s.index)
		}
	}
}

// dispatchLocked gives free slots to waiting logins, least served source
// first.
func (q *hashQueue) dispatchLocked() {
	for q.free > 0 && len(q.ready) > 0 {
		s := q.ready[0]
		n, locked := q.budget(s.key)
		if locked {
			q.refuseLocked(s)
			q.settleLocked(s)
			continue
		}
		if s.running >= n {
			heap.Remove(&q.ready, s.index) // back in when one of its checks ends
			continue
		}
		w := s.waiting[0]
		s.waiting[0] = nil
		s.waiting = s.waiting[1:]
		q.queued--
		q.startLocked(s)
		w.turn <- turnRun
	}
}

// refuseLocked answers every login s has waiting with turnLocked.
func (q *hashQueue) refuseLocked(s *hashSource) {
	for _, w := range s.waiting {
		w.turn <- turnLocked
	}
	q.queued -= len(s.waiting)
	s.waiting = nil
	if s.index >= 0 {
		heap.Remove(&q.ready, s.index)
	}
}

// settleLocked takes s out of the ready heap when nothing of it waits and
// forgets it when nothing of it runs either.
func (q *hashQueue) settleLocked(s *hashSource) {
	if len(s.waiting) > 0 {
		if s.index >= 0 {
			heap.Fix(&q.ready, s.index) // fewer waiting
		}
		return
	}
	s.waiting = nil // drop the backing array a long queue left behind
	if s.index >= 0 {
		heap.Remove(&q.ready, s.index)
	}
	if s.running == 0 && q.sources[s.key] == s {
		delete(q.sources, s.key)
	}
}

// waiting counts the logins waiting for a turn.
func (q *hashQueue) waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queued
}

// sourceHeap orders sources as hashQueue serves them: by checks started,
// logins waiting, last check started, arrival.
type sourceHeap []*hashSource

func (h sourceHeap) Len() int { return len(h) }
func (h sourceHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	switch {
	case a.served != b.served:
		return a.served < b.served
	case len(a.waiting) != len(b.waiting):
		return len(a.waiting) < len(b.waiting)
	case a.last != b.last:
		return a.last < b.last
	}
	return a.arrival < b.arrival
}
func (h sourceHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *sourceHeap) Push(x any) {
	s := x.(*hashSource)
	s.index = len(*h)
	*h = append(*h, s)
}
func (h *sourceHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	s.index = -1
	return s
}
