package web

import (
	"sync"
	"time"
)

// sample is one reading of the broker's counters.
type sample struct {
	t                     time.Time
	connected, connects   int64
	msgsIn, msgsOut       int64
	bytesIn, bytesOut     int64
	dropped, authFailures int64
}

// point is one step of the overview's history: the gauges then and the
// counters' rates over the step.
type point struct {
	T           int64   `json:"t"` // Unix milliseconds
	Connected   int64   `json:"connected"`
	MsgsInRate  float64 `json:"messages_in_rate"`
	MsgsOutRate float64 `json:"messages_out_rate"`
	DroppedRate float64 `json:"dropped_rate"`
}

// rates are per-second rates of the counters.
type rates struct {
	MessagesIn  float64 `json:"messages_in"`
	MessagesOut float64 `json:"messages_out"`
	BytesIn     float64 `json:"bytes_in"`
	BytesOut    float64 `json:"bytes_out"`
	Connects    float64 `json:"connects"`
	Dropped     float64 `json:"dropped"`
	Window      float64 `json:"window_seconds"`
}

// sampler reads Stats every interval into a ring; one goroutine writes,
// handlers read, mu guards ring.
type sampler struct {
	b        Broker
	interval time.Duration
	done     chan struct{}
	stopOnce sync.Once

	mu   sync.Mutex
	ring []sample // oldest first, at most cap entries
	max  int
}

func newSampler(b Broker, interval time.Duration, max int) *sampler {
	s := &sampler{b: b, interval: interval, done: make(chan struct{}), max: max}
	s.take()
	go s.loop()
	return s
}

func (s *sampler) loop() {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.take()
		case <-s.done:
			return
		}
	}
}

func (s *sampler) stop() { s.stopOnce.Do(func() { close(s.done) }) }

func (s *sampler) take() {
	st := s.b.Stats()
	smp := sample{t: time.Now(), connected: st.Connected, connects: st.Connects, msgsIn: st.MessagesIn,
		msgsOut: st.MessagesOut, bytesIn: st.BytesIn, bytesOut: st.BytesOut, dropped: st.TotalDropped(),
		authFailures: st.AuthFailures}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ring) == s.max {
		copy(s.ring, s.ring[1:])
		s.ring = s.ring[:len(s.ring)-1]
	}
	s.ring = append(s.ring, smp)
}

// rates returns the counters' rates over the last window (or what the ring
// holds), measured up to now's snapshot cur.
func (s *sampler) rates(cur sample, window time.Duration) rates {
	s.mu.Lock()
	defer s.mu.Unlock()
	var base *sample
	for i := len(s.ring) - 1; i >= 0; i-- {
		base = &s.ring[i]
		if cur.t.Sub(base.t) >= window {
			break
		}
	}
	if base == nil {
		return rates{}
	}
	dt := cur.t.Sub(base.t).Seconds()
	if dt < 0.2 {
		return rates{}
	}
	per := func(a, b int64) float64 { return float64(max(a-b, 0)) / dt }
	return rates{
		MessagesIn: per(cur.msgsIn, base.msgsIn), MessagesOut: per(cur.msgsOut, base.msgsOut),
		BytesIn: per(cur.bytesIn, base.bytesIn), BytesOut: per(cur.bytesOut, base.bytesOut),
		Connects: per(cur.connects, base.connects), Dropped: per(cur.dropped, base.dropped), Window: dt,
	}
}

// history returns up to n points, oldest first.
func (s *sampler) history(n int) []point {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := max(len(s.ring)-n-1, 0)
	out := make([]point, 0, len(s.ring)-start)
	for i := start + 1; i < len(s.ring); i++ {
		a, b := s.ring[i-1], s.ring[i]
		dt := b.t.Sub(a.t).Seconds()
		if dt <= 0 {
			continue
		}
		out = append(out, point{T: b.t.UnixMilli(), Connected: b.connected,
			MsgsInRate: float64(max(b.msgsIn-a.msgsIn, 0)) / dt, MsgsOutRate: float64(max(b.msgsOut-a.msgsOut, 0)) / dt,
			DroppedRate: float64(max(b.dropped-a.dropped, 0)) / dt})
	}
	return out
}
