package web

import (
	"sync"
	"time"

	"github.com/xmq-io/xmq/core"
)

// History is what the overview's charts can show: one sample a second for
// the last hour, in memory (about 300 KB), lost at restart. Longer
// history belongs to Prometheus (/metrics).
const (
	historySpan    = time.Hour
	sampleInterval = time.Second
	historySamples = int(historySpan/sampleInterval) + 1 // the rates of an hour need its two ends
)

// sample is one reading of the broker's counters.
type sample struct {
	t                     time.Time
	connected, connects   int64
	msgsIn, msgsOut       int64
	bytesIn, bytesOut     int64
	dropped, authFailures int64
	// queueDropped (queue_full and quota_exceeded) and storeErrors
	// (store_error) are the drops the XMQMessagesDropped and
	// XMQStoreErrors alarms watch.
	queueDropped, storeErrors int64
}

// point is one step of the overview's history: the gauges at its end and
// the counters' rates over the step.
type point struct {
	T            int64   `json:"t"` // Unix milliseconds
	Connected    int64   `json:"connected"`
	MsgsInRate   float64 `json:"messages_in_rate"`
	MsgsOutRate  float64 `json:"messages_out_rate"`
	DroppedRate  float64 `json:"dropped_rate"`
	BytesInRate  float64 `json:"bytes_in_rate"`
	BytesOutRate float64 `json:"bytes_out_rate"`
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
// handlers read, mu guards ring, next and n.
type sampler struct {
	b        Broker
	interval time.Duration
	tick     func(time.Time) // after each sample (the alarms); nil: none
	done     chan struct{}
	stopOnce sync.Once

	mu   sync.Mutex
	ring []sample // fixed size; the n newest samples end at next-1, wrapping
	next int
	n    int
}

func newSampler(b Broker, interval time.Duration, size int, tick func(time.Time)) *sampler {
	s := &sampler{b: b, interval: interval, tick: tick, done: make(chan struct{}), ring: make([]sample, size)}
	s.take()
	return s
}

// start runs the sampler until stop; apart from newSampler so that the
// tick's owner can hold the sampler before the first tick.
func (s *sampler) start() { go s.loop() }

func (s *sampler) loop() {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			s.take()
			if s.tick != nil {
				s.tick(now)
			}
		case <-s.done:
			return
		}
	}
}

func (s *sampler) stop() { s.stopOnce.Do(func() { close(s.done) }) }

// sampleOf reads the counters of a snapshot taken at t.
func sampleOf(st core.Snapshot, t time.Time) sample {
	return sample{t: t, connected: st.Connected, connects: st.Connects, msgsIn: st.MessagesIn,
		msgsOut: st.MessagesOut, bytesIn: st.BytesIn, bytesOut: st.BytesOut, dropped: st.TotalDropped(),
		authFailures: st.AuthFailures, queueDropped: st.Dropped["queue_full"] + st.Dropped["quota_exceeded"],
		storeErrors: st.Dropped["store_error"]}
}

func (s *sampler) take() {
	smp := sampleOf(s.b.Stats(), time.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ring[s.next] = smp
	s.next = (s.next + 1) % len(s.ring)
	s.n = min(s.n+1, len(s.ring))
}

// at returns the i-th newest sample (0 the newest); i < s.n. s.mu is held.
func (s *sampler) at(i int) *sample {
	return &s.ring[(s.next-1-i+2*len(s.ring))%len(s.ring)]
}

// rates returns the counters' rates over the last window (or what the ring
// holds), measured up to now's snapshot cur.
func (s *sampler) rates(cur sample, window time.Duration) rates {
	s.mu.Lock()
	defer s.mu.Unlock()
	var base *sample
	for i := 0; i < s.n; i++ {
		base = s.at(i)
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

// history returns up to n points of step samples each, oldest first: the
// last n*step samples' gauges at the end of each step and rates over it.
func (s *sampler) history(n, step int) []point {
	s.mu.Lock()
	defer s.mu.Unlock()
	step = max(step, 1)
	n = min(n, (s.n-1)/step)
	out := make([]point, 0, max(n, 0))
	for k := n - 1; k >= 0; k-- {
		b, a := s.at(k*step), s.at((k+1)*step)
		dt := b.t.Sub(a.t).Seconds()
		if dt <= 0 {
			continue
		}
		per := func(x, y int64) float64 { return float64(max(x-y, 0)) / dt }
		out = append(out, point{T: b.t.UnixMilli(), Connected: b.connected,
			MsgsInRate: per(b.msgsIn, a.msgsIn), MsgsOutRate: per(b.msgsOut, a.msgsOut), DroppedRate: per(b.dropped, a.dropped),
			BytesInRate: per(b.bytesIn, a.bytesIn), BytesOutRate: per(b.bytesOut, a.bytesOut)})
	}
	return out
}

// drops returns how many messages were dropped for full queues and for
// store errors over the window up to now, as the alert rules' rate(...[5m])
// sees them: between the newest sample and the newest one at least window
// older (or the oldest held).
func (s *sampler) drops(now time.Time, window time.Duration) (queue, store int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n < 2 {
		return 0, 0
	}
	cur, base := s.at(0), s.at(0)
	for i := 1; i < s.n; i++ {
		base = s.at(i)
		if now.Sub(base.t) >= window {
			break
		}
	}
	return max(cur.queueDropped-base.queueDropped, 0), max(cur.storeErrors-base.storeErrors, 0)
}
