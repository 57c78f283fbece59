package cluster

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// link is what every part of a node shares (doc.go lists the parts): its
// options, its NATS connection and the broker, the replicated state once
// it exists, and the lifecycle that Close ends. A part holds a *link and
// pointers to the few other parts it asks, never the Cluster: its state
// is its own.
type link struct {
	opts Options // read-only after New
	log  *zap.Logger
	emb  *embedded // nil with an external NATS
	nc   *nats.Conn
	// maxSubject bounds a subject this node publishes or subscribes to.
	maxSubject int
	// local is the broker, set by Start before anything that uses it
	// runs.
	local Local
	// state is the replicated state (state.go), nil until its buckets exist.
	state atomic.Pointer[state]

	stop chan struct{}
	// done counts the goroutines Close waits for; closeMu orders adding
	// to it (goUnlessClosed) with Close's Wait.
	done    sync.WaitGroup
	closeMu sync.RWMutex
	closed  atomic.Bool
	warned  sync.Map // message → *atomic.Int64, Unix nanoseconds it was last logged
}

// warn logs each message at most once every 10 seconds: drops and
// retries come in bursts.
func (l *link) warn(msg string, fields ...zap.Field) {
	now := time.Now().UnixNano()
	v, _ := l.warned.LoadOrStore(msg, new(atomic.Int64))
	at := v.(*atomic.Int64)
	last := at.Load()
	if last != 0 && now-last < int64(10*time.Second) || !at.CompareAndSwap(last, now) {
		return
	}
	l.log.Warn(msg, fields...)
}

// goUnlessClosed runs f on its own goroutine, which Close waits for,
// unless the node is closing.
func (l *link) goUnlessClosed(f func()) {
	l.closeMu.RLock()
	defer l.closeMu.RUnlock()
	if l.closed.Load() {
		return
	}
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		f()
	}()
}

// retry calls f until it succeeds, for up to d (a JetStream stream whose
// leader was on a dead node answers again once its replicas elected
// another: seconds), and returns its last error.
func (l *link) retry(d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	err := f()
	for err != nil && time.Now().Before(deadline) {
		select {
		case <-l.stop:
			return err
		case <-time.After(250 * time.Millisecond):
		}
		err = f()
	}
	return err
}

// awaitAck waits for an asynchronous publish's answer (f nil: it was not
// sent); stopped reports that the node is closing first.
func (l *link) awaitAck(f jetstream.PubAckFuture) (err error, stopped bool) {
	if f == nil {
		return errors.New("not sent"), false
	}
	select {
	case <-f.Ok():
		return nil, false
	case err = <-f.Err():
		return err, false
	case <-l.stop:
		return nil, true
	}
}

// nodeCount counts the cluster's nodes, from the embedded routes (this
// node's own listed route aside) or, with an external NATS, from the
// servers the connection knows.
func (l *link) nodeCount() int {
	n := 1
	if l.emb != nil {
		for _, r := range l.opts.Embedded.Routes {
			if strings.TrimPrefix(r, "nats-route://") != l.opts.Embedded.Listen {
				n++
			}
		}
	} else {
		n = max(1, len(l.nc.Servers()))
	}
	return n
}

// inbox is what routeLoop hands on, in arrival order: the messages of
// this node's NATS subscriptions, the other nodes' session and shared
// group requests, and functions to run in order with them (run).
type inbox struct {
	ch   chan *nats.Msg
	stop <-chan struct{}
	mu   sync.Mutex
	// queued are the functions run put in ch, by their marker message.
	queued map[*nats.Msg]func()
}

// queued marks a function to run on routeLoop (inbox.run).
var queued = new(nats.Subscription)

func newInbox(stop <-chan struct{}) *inbox {
	return &inbox{ch: make(chan *nats.Msg, inboxSize), stop: stop, queued: map[*nats.Msg]func(){}}
}

// run runs f on routeLoop, after the messages in the inbox now, and
// returns its error.
func (q *inbox) run(f func() error) error {
	m := &nats.Msg{Sub: queued}
	done := make(chan error, 1)
	q.mu.Lock()
	q.queued[m] = func() { done <- f() }
	q.mu.Unlock()
	select {
	case q.ch <- m:
	case <-q.stop:
		return errors.New("cluster: closing")
	}
	select {
	case err := <-done:
		return err
	case <-q.stop:
		return errors.New("cluster: closing")
	}
}

// runQueued runs the function run queued as m (on routeLoop).
func (q *inbox) runQueued(m *nats.Msg) {
	q.mu.Lock()
	f := q.queued[m]
	delete(q.queued, m)
	q.mu.Unlock()
	if f != nil {
		f()
	}
}

// put puts m back in the inbox, unless the node is closing.
func (q *inbox) put(m *nats.Msg) {
	select {
	case q.ch <- m:
	case <-q.stop:
	}
}
