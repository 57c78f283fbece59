package loadtest

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// runConnLevel is the conn mode's measured phase for one level: ramp up to
// the job's target with bounded dial concurrency (and -conn-rate), hold,
// check every connection answers PINGREQ, with -wake time waking parked
// connections, then disconnect them all. An open
// connection here is a net.Conn and nothing else: no goroutine, no buffer,
// so the generator's memory stays far below the broker's.
func (w *Worker) runConnLevel(ctx context.Context) *CaseResult {
	res := w.newCase()
	target := w.job.Target
	conns := make([]net.Conn, target)
	var mu sync.Mutex
	fails := map[string]int{}
	var next atomic.Int64
	w.phase.Store("ramping")
	w.startTime = time.Now()
	w.started.Store(true)
	start := w.startTime
	series := newConnSeries(w)
	stopSeries := series.run()

	rate := w.o.ConnRate
	var wg sync.WaitGroup
	for k := range min(w.o.DialConcurrency, target) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= target {
					return
				}
				if rate > 0 {
					if d := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); d > 0 {
						select {
						case <-time.After(d):
						case <-ctx.Done():
							return
						}
					}
				}
				id := w.o.ClientID('c', w.job.First+i)
				m, took, err := connectMQTT(ctx, w.d, w.job.First+i, connectSpec{id: id, clean: w.o.Clean,
					version: w.version, keepAlive: w.keepAlive, user: w.o.User, pass: w.o.Pass, timeout: w.o.ConnectTimeout})
				if err != nil {
					w.failed.Add(1)
					mu.Lock()
					fails[Classify(err)]++
					mu.Unlock()
					w.errs.add("connect: "+Classify(err), err)
					continue
				}
				conns[i] = m.nc
				w.connRec.Record(k, int64(took))
				w.connected.Add(1)
			}
		})
	}
	wg.Wait()
	res.RampNs = int64(time.Since(start))

	// Hold, pinging every half keepalive so the broker keeps us.
	w.phase.Store("holding")
	lost := map[string]int{}
	holdEnd := time.Now().Add(w.o.Hold)
	ka := w.keepAlive / 2
	for ctx.Err() == nil {
		left := time.Until(holdEnd)
		if left <= 0 {
			break
		}
		if ka > 0 && left > ka {
			w.sleepCtx(ctx, ka)
			w.pingAll(ctx, conns, lost)
			continue
		}
		w.sleepCtx(ctx, left)
	}

	// Liveness: every connection must answer PINGREQ.
	w.phase.Store("checking")
	res.Alive = w.pingAll(ctx, conns, lost)
	stopSeries()
	if w.o.Wake > 0 {
		w.phase.Store("waking")
		w.wake(ctx, res, conns, lost)
	}

	w.phase.Store("closing")
	w.forEach(conns, func(c net.Conn) {
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Write(disconnect[:])
		_ = c.Close()
	})
	w.connected.Store(0)
	w.connRec.SnapshotInto(res.Connect)
	res.Established = int(res.Connect.Count())
	res.Failures = fails
	for _, n := range fails {
		res.Failed += n
	}
	if len(lost) > 0 {
		res.Lost = lost
	}
	res.Series = series.points
	return res
}

func (w *Worker) sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// pingAll sends PINGREQ on every open connection and waits up to the
// connect timeout for each PINGRESP; a connection that fails is closed,
// removed and counted in lost by reason. It returns how many answered.
func (w *Worker) pingAll(ctx context.Context, conns []net.Conn, lost map[string]int) int {
	var alive atomic.Int64
	var mu sync.Mutex
	w.forEachIndex(conns, func(i int, c net.Conn) {
		err := ping(c, w.o.ConnectTimeout)
		if err == nil {
			alive.Add(1)
			return
		}
		_ = c.Close()
		conns[i] = nil
		w.connected.Add(-1)
		mu.Lock()
		lost[Classify(err)]++
		mu.Unlock()
	})
	return int(alive.Load())
}

// wake measures what waking a parked connection costs (-wake): Wake
// times, every connection stays quiet for WakeIdle, then one PINGREQ →
// PINGRESP on the next open connection — the first packet after the pause,
// which the broker has to pick up from its poller — and one more right
// after on the same, now busy, connection. Cycling over the connections
// means each measured one has been quiet for at least WakeIdle (since the
// liveness check or its previous turn). Only the first worker measures, so
// that round trips never overlap; the others stay quiet as long, so that
// their closing does not disturb it.
func (w *Worker) wake(ctx context.Context, res *CaseResult, conns []net.Conn, lost map[string]int) {
	if w.job.Agent != 0 {
		w.sleepCtx(ctx, time.Duration(w.o.Wake)*w.o.WakeIdle)
		return
	}
	res.Wake, res.WakeBusy = &Histogram{}, &Histogram{}
	next := 0
	for range w.o.Wake {
		w.sleepCtx(ctx, w.o.WakeIdle)
		if ctx.Err() != nil {
			return
		}
		i := -1
		for k := range conns {
			if j := (next + k) % len(conns); conns[j] != nil {
				i = j
				break
			}
		}
		if i < 0 {
			return // every connection is gone
		}
		next = i + 1
		for _, h := range []*Histogram{res.Wake, res.WakeBusy} {
			took, err := pingTimed(conns[i], w.o.ConnectTimeout)
			if err != nil {
				_ = conns[i].Close()
				conns[i] = nil
				w.connected.Add(-1)
				lost[Classify(err)]++
				w.errs.add("wake: "+Classify(err), err)
				break
			}
			h.Record(int64(took))
		}
	}
}

// ping does one PINGREQ/PINGRESP round trip on a bare connection.
func ping(c net.Conn, timeout time.Duration) error {
	_, err := pingTimed(c, timeout)
	return err
}

// pingTimed is ping that also returns the round trip, from just before
// the write to the end of the read: setting the deadlines is left out.
func pingTimed(c net.Conn, timeout time.Duration) (time.Duration, error) {
	_ = c.SetDeadline(time.Now().Add(timeout))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	start := time.Now()
	if _, err := c.Write(pingreq[:]); err != nil {
		return 0, err
	}
	var b [2]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return 0, err
	}
	took := time.Since(start)
	if b != [2]byte{0xD0, 0} {
		return 0, fmt.Errorf("%w: %#x instead of PINGRESP", errUnexpected, b)
	}
	return took, nil
}

func (w *Worker) forEach(conns []net.Conn, f func(net.Conn)) {
	w.forEachIndex(conns, func(_ int, c net.Conn) { f(c) })
}

// forEachIndex runs f on every non-nil connection, DialConcurrency at a time.
func (w *Worker) forEachIndex(conns []net.Conn, f func(int, net.Conn)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(w.o.DialConcurrency, max(len(conns), 1)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(conns) {
					return
				}
				if c := conns[i]; c != nil {
					f(i, c)
				}
			}
		})
	}
	wg.Wait()
}

// connSeries samples connection counts four times a second in conn mode;
// Errors in its points are failures in the interval.
type connSeries struct {
	w      *Worker
	points []Point
	prevF  int64
}

func newConnSeries(w *Worker) *connSeries { return &connSeries{w: w, points: []Point{{}}} }

// run samples until the returned stop is called.
func (s *connSeries) run() (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		// Four points a second: a ramp often takes less than one.
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s.sample()
			case <-done:
				s.sample()
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}

func (s *connSeries) sample() {
	f := s.w.failed.Load()
	s.points = append(s.points, Point{T: time.Since(s.w.startTime).Seconds(), Connected: s.w.connected.Load(),
		Errors: uint64(f - s.prevF)})
	s.prevF = f
}
