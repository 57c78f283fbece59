package web

import (
	"testing"
	"time"
)

// fill puts n samples a second apart in s's ring, msgsIn growing by 10 and
// connected by 1 a second, as take would.
func fill(s *sampler, t0 time.Time, n int) {
	for i := range n {
		s.ring[s.next] = sample{t: t0.Add(time.Duration(i) * time.Second), connected: int64(i), msgsIn: int64(10 * i)}
		s.next = (s.next + 1) % len(s.ring)
		s.n = min(s.n+1, len(s.ring))
	}
}

// TestSamplerHistory: the ring keeps the newest samples, wrapping, and the
// history is read in steps of several samples, newest last.
func TestSamplerHistory(t *testing.T) {
	if want := 3601; historySamples != want {
		t.Fatalf("historySamples = %d, want %d: an hour at one a second, ends included", historySamples, want)
	}
	s := &sampler{ring: make([]sample, 10)}
	t0 := time.Unix(1_800_000_000, 0)
	fill(s, t0, 25) // wraps twice: holds seconds 15 to 24
	if got := s.history(100, 1); len(got) != 9 {
		t.Fatalf("%d points at step 1 from 10 samples, want 9", len(got))
	}
	got := s.history(3, 3)
	if len(got) != 3 {
		t.Fatalf("%d points at step 3, want 3", len(got))
	}
	for i, p := range got {
		end := t0.Add(time.Duration(24-3*(2-i)) * time.Second)
		if p.T != end.UnixMilli() || p.Connected != int64(24-3*(2-i)) || p.MsgsInRate != 10 {
			t.Errorf("point %d = %+v, want the sample of %v with 10 messages/s", i, p, end)
		}
	}
	if got := s.history(5, 3); len(got) != 3 {
		t.Errorf("%d points asked past the ring, want the 3 it holds", len(got))
	}
	cur := sample{t: t0.Add(26 * time.Second), msgsIn: 260}
	if r := s.rates(cur, 5*time.Second); r.MessagesIn != 10 || r.Window != 5 {
		t.Errorf("rates %+v, want 10/s over 5 s", r)
	}
}
