package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/core"
)

// History is what the overview's charts can show: one sample a second for
// the last hour, in memory (about 300 KB), and one point a minute for the
// last day, downsampled from them and kept in Options.HistoryFile across
// restarts (about 200 KB). Longer history belongs to Prometheus (/metrics).
const (
	historySpan    = time.Hour
	sampleInterval = time.Second
	historySamples = int(historySpan/sampleInterval) + 1 // the rates of an hour need its two ends
	minuteSpan     = 24 * time.Hour
	minutePoints   = int(minuteSpan / time.Minute)
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

	file   string      // where the minutes are kept; "": memory only
	log    *zap.Logger // says when they cannot be
	saveMu sync.Mutex  // serializes writing file

	mu   sync.Mutex
	ring []sample // fixed size; the n newest samples end at next-1, wrapping
	next int
	n    int
	// minutes are the last day's one-minute points, oldest first: the
	// counters' rates averaged over the minute (their difference over its
	// length, so a burst is neither lost nor exaggerated) and connected the
	// minute's highest (a spike between two samples' ends still shows).
	// minStart is the first sample of the minute being summed, minMax its
	// highest connected so far.
	minutes  []point
	minStart sample
	minMax   int64
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
			if s.take() {
				if err := s.save(); err != nil { // once a minute
					s.log.Warn("overview history not saved", zap.Error(err))
				}
			}
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

// take reads a sample into the ring and, at each new minute, closes the
// last minute's point; it reports whether it did.
func (s *sampler) take() bool {
	return s.add(sampleOf(s.b.Stats(), time.Now()))
}

func (s *sampler) add(smp sample) (minuteDone bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ring[s.next] = smp
	s.next = (s.next + 1) % len(s.ring)
	s.n = min(s.n+1, len(s.ring))
	if s.minStart.t.IsZero() {
		s.minStart, s.minMax = smp, smp.connected
		return false
	}
	s.minMax = max(s.minMax, smp.connected)
	if smp.t.Truncate(time.Minute).Equal(s.minStart.t.Truncate(time.Minute)) {
		return false
	}
	a := s.minStart
	if dt := smp.t.Sub(a.t).Seconds(); dt > 0 {
		per := func(x, y int64) float64 { return float64(max(x-y, 0)) / dt }
		s.minutes = append(s.minutes, point{T: smp.t.UnixMilli(), Connected: s.minMax,
			MsgsInRate: per(smp.msgsIn, a.msgsIn), MsgsOutRate: per(smp.msgsOut, a.msgsOut), DroppedRate: per(smp.dropped, a.dropped),
			BytesInRate: per(smp.bytesIn, a.bytesIn), BytesOutRate: per(smp.bytesOut, a.bytesOut)})
		s.minutes = dropOld(s.minutes, smp.t)
	}
	s.minStart, s.minMax = smp, smp.connected
	return true
}

// dropOld removes the points more than minuteSpan before now (and beyond
// minutePoints), in place.
func dropOld(ps []point, now time.Time) []point {
	cut := now.Add(-minuteSpan).UnixMilli()
	i := 0
	for i < len(ps) && (ps[i].T < cut || len(ps)-i > minutePoints) {
		i++
	}
	return append(ps[:0], ps[i:]...)
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

// minuteHistory returns up to n points of step minutes each from the
// minutes, oldest first: rates averaged over the step, connected its
// highest.
func (s *sampler) minuteHistory(n, step int) []point {
	s.mu.Lock()
	defer s.mu.Unlock()
	step = max(step, 1)
	n = min(n, len(s.minutes)/step)
	out := make([]point, 0, max(n, 0))
	for k := n - 1; k >= 0; k-- {
		end := len(s.minutes) - k*step
		group := s.minutes[end-step : end]
		p := group[len(group)-1]
		for _, q := range group[:len(group)-1] {
			p.Connected = max(p.Connected, q.Connected)
			p.MsgsInRate += q.MsgsInRate
			p.MsgsOutRate += q.MsgsOutRate
			p.DroppedRate += q.DroppedRate
			p.BytesInRate += q.BytesInRate
			p.BytesOutRate += q.BytesOutRate
		}
		f := float64(len(group))
		p.MsgsInRate, p.MsgsOutRate, p.DroppedRate = p.MsgsInRate/f, p.MsgsOutRate/f, p.DroppedRate/f
		p.BytesInRate, p.BytesOutRate = p.BytesInRate/f, p.BytesOutRate/f
		out = append(out, p)
	}
	return out
}

// historyFile is the JSON of Options.HistoryFile.
type historyFile struct {
	Version int     `json:"version"` // 1
	Minutes []point `json:"minutes"`
}

// load reads the minutes kept by a previous run, dropping those older
// than a day; a missing file is an empty history.
func (s *sampler) load(now time.Time) error {
	if s.file == "" {
		return nil
	}
	b, err := os.ReadFile(s.file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("web: history: %w", err)
	}
	var h historyFile
	if err := json.Unmarshal(b, &h); err != nil || h.Version != 1 {
		return fmt.Errorf("web: history %s: not a version 1 history file (%v)", s.file, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.minutes = dropOld(h.Minutes, now)
	return nil
}

// save writes the minutes to the file atomically (a temporary file renamed
// over it), so a crash leaves the old history or the new, never half.
func (s *sampler) save() error {
	if s.file == "" {
		return nil
	}
	s.mu.Lock()
	b, err := json.Marshal(historyFile{Version: 1, Minutes: s.minutes})
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if err := writeFileAtomic(s.file, b, 0o600); err != nil {
		return fmt.Errorf("web: history: %w", err)
	}
	return nil
}
