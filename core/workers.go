package core

import "sync/atomic"

// workers runs the connections' short jobs — a reader resumed by the
// poller, a writer started for a delivery — on goroutines that outlive the
// job. A goroutine made for each job starts on a 2 KiB stack and grows it
// (copying it) on the deep paths those jobs take: at low message rates that
// copying was a quarter of the broker's own CPU. A worker that finishes
// waits for the next job with its stack grown, as long as no more than
// maxIdle already wait; a burst of jobs beyond the waiting workers gets new
// goroutines, which end when they find enough workers idle.
type workers struct {
	jobs    chan job // unbuffered: a send succeeds only into a waiting worker
	stop    chan struct{}
	idle    atomic.Int32
	maxIdle int32
}

// job is one connection's work; by value, so handing it over allocates
// nothing.
type job struct {
	c    *client
	kind jobKind
}

type jobKind uint8

const (
	jobResume jobKind = iota // the poller saw bytes on a parked connection
	jobWrite                 // the connection has something to write
	jobRead                  // the reader's first goroutine after CONNECT
)

func newWorkers(maxIdle int) *workers {
	return &workers{jobs: make(chan job), stop: make(chan struct{}), maxIdle: int32(maxIdle)}
}

// close ends the waiting workers (Shutdown); a job run afterwards still
// runs, on a goroutine of its own.
func (w *workers) close() { close(w.stop) }

// run has j done: by a waiting worker, or a new goroutine.
func (w *workers) run(j job) {
	select {
	case w.jobs <- j:
	default:
		go w.work(j)
	}
}

func (w *workers) work(j job) {
	for {
		switch j.kind {
		case jobResume:
			j.c.resume()
		case jobWrite:
			j.c.writeLoop()
		case jobRead:
			j.c.guard(j.c.readLoop)
		}
		j = job{}
		if w.idle.Add(1) > w.maxIdle {
			w.idle.Add(-1)
			return
		}
		select {
		case j = <-w.jobs:
			w.idle.Add(-1)
		case <-w.stop:
			w.idle.Add(-1)
			return
		}
	}
}

// workerIdle is how many workers may wait for a job: enough for the jobs
// that run at once at low rates (they are short), small enough that a
// storm of them leaves few stacks behind.
const workerIdle = 64
