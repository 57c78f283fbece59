package loadtest

import "sync"

// trackerSet holds one seqTracker per publisher in [lo, lo+len(t)) for one
// receiver. A subscriber's own set is used by its read loop alone; a shared
// subscription group's set is used by every member's read loop, so each
// tracker then has a lock.
type trackerSet struct {
	lo     uint32
	t      []seqTracker
	counts []seqCounts  // by publisher, for the per-publisher figures
	mu     []sync.Mutex // nil unless shared
}

func newTrackerSet(lo, n int, shared bool) *trackerSet {
	s := &trackerSet{lo: uint32(lo), t: make([]seqTracker, n), counts: make([]seqCounts, n)}
	if shared {
		s.mu = make([]sync.Mutex, n)
	}
	return s
}

// observe records seq from publisher pub; ok is false for a publisher
// outside the set.
func (s *trackerSet) observe(pub, seq uint32) (seqResult, bool) {
	i := pub - s.lo
	if pub < s.lo || int(i) >= len(s.t) {
		return 0, false
	}
	if s.mu == nil {
		r := s.t[i].observe(seq)
		s.counts[i].add(r)
		return r, true
	}
	s.mu[i].Lock()
	r := s.t[i].observe(seq)
	s.counts[i].add(r)
	s.mu[i].Unlock()
	return r, true
}

// addTo adds the set's per-publisher counts to pp.
func (s *trackerSet) addTo(pp *PerPublisher) {
	for i, c := range s.counts {
		p := int(s.lo) + i
		pp.Unique[p] += c.Unique
		pp.Duplicates[p] += c.Duplicates
		pp.Reordered[p] += c.Reordered
	}
}
