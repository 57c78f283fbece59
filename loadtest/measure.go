package loadtest

import (
	"context"
	"fmt"
	"time"
)

// Start runs the measured phase of the job and returns the worker's
// figures; the worker is closed when it returns. In conn mode it opens the
// connections; otherwise Prepare has, and Start publishes for the duration,
// waits for the broker to acknowledge, drains the subscribers and leaves.
func (w *Worker) Start(ctx context.Context) (*CaseResult, error) {
	defer w.Close()
	cpu0 := processCPU()
	var res *CaseResult
	if w.o.Mode == ModeConn {
		res = w.runConnLevel(ctx)
	} else {
		res = w.runTraffic(ctx)
	}
	cpu := processCPU().Sub(cpu0)
	res.Generator = GenStats{CPUSeconds: cpu.cpu.Seconds(), WallSeconds: cpu.wall.Seconds(), MaxRSS: cpu.maxRSS,
		Processes: 1, GOMAXPROCS: w.procs()}
	res.Errors, res.ErrorSamples = w.errs.snapshot()
	res.Reconnects = w.reconnects.Load()
	return res, ctx.Err()
}

func (w *Worker) procs() int { return goMaxProcs() }

// newCase fills the fields every case shares.
func (w *Worker) newCase() *CaseResult {
	o := &w.o
	r := &CaseResult{Name: w.job.Case, Mode: o.Mode, QoS: o.QoS, Payload: w.job.Payload, Pubs: o.Pubs,
		Subs: o.subCount(), Rate: o.Rate, Latency: &Histogram{}, AckLatency: &Histogram{}, Connect: &Histogram{}}
	if o.Mode == ModeConn {
		r.Target = w.job.Target
	}
	return r
}

// runTraffic is the measured phase of every mode but conn.
func (w *Worker) runTraffic(ctx context.Context) *CaseResult {
	res := w.newCase()
	w.phase.Store("running")
	w.startTime = time.Now()
	w.started.Store(true)
	close(w.startCh)
	for _, c := range w.clients {
		if c.pub != nil {
			c.wake()
		}
	}

	series := newSeriesRecorder(w)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var endC <-chan time.Time // -duration 0: until Stop
	if w.o.Duration > 0 {
		end := time.NewTimer(w.o.Duration)
		defer end.Stop()
		endC = end.C
	}
	stopPublishing := func() {
		if !w.pubStop.Load() {
			w.pubStop.Store(true)
			close(w.stopCh)
			res.SendNs = int64(time.Since(w.startTime))
			w.phase.Store("draining")
		}
	}
	for !w.pubStop.Load() {
		select {
		case <-tick.C:
			series.sample()
		case <-endC:
			stopPublishing()
		case <-w.stopReq:
			stopPublishing()
		case <-ctx.Done():
			stopPublishing()
		}
	}

	// Publishers end when the broker has acknowledged their last message
	// and answered their barrier PINGREQ; subscribers when the deliveries
	// stop coming (or, alone, when every expected one is in).
	drainEnd := time.Now().Add(w.o.Drain)
	fan := newFanout(&w.o)
	var lastUnique uint64
	lastChange := time.Now()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	pubsDone := false
	for time.Now().Before(drainEnd) && ctx.Err() == nil {
		if !pubsDone {
			pubsDone = true
			for _, c := range w.clients {
				if c.pub != nil {
					select {
					case <-c.pub.done:
					default:
						pubsDone = false
					}
				}
			}
			if pubsDone {
				for _, c := range w.clients {
					if c.pub != nil {
						res.PubNs = max(res.PubNs, c.pub.doneAt.Load()-w.startTime.UnixNano())
					}
				}
			}
		}
		unique, expected := w.uniqueTotal(), w.expected(fan)
		if unique != lastUnique {
			lastUnique, lastChange = unique, time.Now()
		}
		quiet := time.Since(lastChange) > time.Second || !w.o.hasSubscribers()
		if pubsDone && (w.job.Alone && unique >= expected || !w.job.Alone && quiet || !w.o.hasSubscribers()) {
			break
		}
		select {
		case <-poll.C:
		case <-tick.C:
			series.sample()
		case <-ctx.Done():
		}
	}
	if res.PubNs == 0 {
		res.PubNs = int64(time.Since(w.startTime))
		w.errs.add("drain timeout: publishers not acknowledged", fmt.Errorf("after %s", w.o.Drain))
	}
	series.sample()
	w.phase.Store("closing")
	w.closeOnce.Do(func() { close(w.closing) })
	w.serving.Wait()

	// Every loop has ended: the counters are the read loops' no longer.
	res.Expected = w.expected(fan)
	var pp *PerPublisher
	if w.o.hasSubscribers() {
		pp = newPerPublisher(w.o.Pubs)
		res.PerPub = pp
	}
	sets := map[*trackerSet]bool{} // a shared group's set once
	for _, c := range w.clients {
		if p := c.pub; p != nil {
			n := p.published.Load()
			res.Published += n
			res.Acked += p.acked.Load()
			if pp != nil {
				pp.Published[p.num] = n
				pp.Expected[p.num] = n * uint64(fan.of(int(p.num)))
			}
		}
		if s := c.sub; s != nil {
			if !sets[s.trackers] {
				sets[s.trackers] = true
				s.trackers.addTo(pp)
			}
			res.Received += s.counts.Received
			res.Unique += s.counts.Unique
			res.Duplicates += s.counts.Duplicates
			res.Reordered += s.counts.Reordered
			res.Stale += s.stale
			res.Foreign += s.foreign
			res.Skew += s.skew
			if last := s.lastNs.Load(); last > 0 {
				res.DeliverNs = max(res.DeliverNs, last-w.startTime.UnixNano())
			}
		}
	}
	if w.o.Mode == ModePub {
		res.Expected = 0
	}
	w.lat.SnapshotInto(res.Latency)
	w.ack.SnapshotInto(res.AckLatency)
	w.connRec.SnapshotInto(res.Connect)
	res.Established = int(res.Connect.Count())
	res.Series = series.points
	return res
}

// uniqueTotal is the first copies delivered so far.
func (w *Worker) uniqueTotal() uint64 {
	var n uint64
	for _, c := range w.clients {
		if c.sub != nil {
			n += c.sub.unique.Load()
		}
	}
	return n
}

// expected is how many deliveries this worker's publishers should cause:
// each message times the receivers it should reach.
func (w *Worker) expected(fan *fanout) uint64 {
	if !w.o.hasSubscribers() {
		return 0
	}
	var n uint64
	for _, c := range w.clients {
		if c.pub != nil {
			n += c.pub.published.Load() * uint64(fan.of(int(c.pub.num)))
		}
	}
	return n
}

// seriesRecorder turns the worker's counters into one Point a second.
type seriesRecorder struct {
	w                *Worker
	points           []Point
	prevPub, prevDel uint64
	prevErr          uint64
	prevConn         uint64
	cur, prev, iv    Histogram
	last             time.Time
}

func newSeriesRecorder(w *Worker) *seriesRecorder {
	return &seriesRecorder{w: w, last: w.startTime}
}

func (s *seriesRecorder) sample() {
	w := s.w
	now := time.Now()
	if now.Sub(s.last) < 100*time.Millisecond && len(s.points) > 0 {
		return
	}
	s.last = now
	p := w.Progress()
	w.lat.SnapshotInto(&s.cur)
	diffInto(&s.iv, &s.cur, &s.prev)
	s.cur, s.prev = s.prev, s.cur
	pt := Point{T: now.Sub(w.startTime).Seconds(), Connected: p.Connected, Published: p.Published - s.prevPub,
		Delivered: p.Delivered - s.prevDel, Errors: p.Errors - s.prevErr}
	if s.iv.Count() > 0 {
		sp := s.iv.Sparse()
		pt.Lat = &sp
		pt.P50, pt.P99 = s.iv.Quantile(0.5), s.iv.Quantile(0.99)
	}
	s.prevPub, s.prevDel, s.prevErr = p.Published, p.Delivered, p.Errors
	s.points = append(s.points, pt)
}
