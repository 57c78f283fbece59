package loadtest

import "sync"

// trackerSet holds one seqTracker per publisher in [lo, lo+len(t)) for one
// receiver. A subscriber's own set is used by its read loop alone; a shared
// subscription group's set is used by every member's read loop, so each
// tracker then has a lock.
type trackerSet struct {
	lo uint32
	t  []seqTracker
	mu []sync.Mutex // nil unless shared
}

func newTrackerSet(lo, n int, shared bool) *trackerSet {
	s := &trackerSet{lo: uint32(lo), t: make([]seqTracker, n)}
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
		return s.t[i].observe(seq), true
	}
	s.mu[i].Lock()
	r := s.t[i].observe(seq)
	s.mu[i].Unlock()
	return r, true
}
