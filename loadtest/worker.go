package loadtest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
)

// Job is one worker's share of one case: the whole Options, which case, and
// which publishers, subscribers or connections are this worker's. The
// controller makes one Job per agent (or one for itself) and sends it as
// JSON.
type Job struct {
	Options Options `json:"options"`
	Case    string  `json:"case"`
	Payload int     `json:"payload"`
	// conn mode: this worker opens Target connections numbered from First.
	Target int `json:"target,omitempty"`
	First  int `json:"first,omitempty"`
	// Publishers [PubLo, PubHi) and subscribers [SubLo, SubHi), global numbers.
	PubLo int `json:"pub_lo"`
	PubHi int `json:"pub_hi"`
	SubLo int `json:"sub_lo"`
	SubHi int `json:"sub_hi"`
	// Token names this run's client ids; messages sent before NotBefore
	// (Unix ns) are leftovers of earlier runs.
	Token     string `json:"token"`
	NotBefore int64  `json:"not_before"`
	Agent     int    `json:"agent"`
	// Alone is true when this worker runs every publisher and subscriber,
	// so it knows exactly how many deliveries to wait for.
	Alone bool `json:"alone"`
}

// Progress is a worker's running totals, for the live line.
type Progress struct {
	Phase     string  `json:"phase"`
	Elapsed   float64 `json:"elapsed_s"`
	Connected int64   `json:"connected"`
	Failed    int64   `json:"failed"`
	Published uint64  `json:"published"`
	Delivered uint64  `json:"delivered"`
	Errors    uint64  `json:"errors"`
}

func (p *Progress) add(q Progress) {
	p.Connected += q.Connected
	p.Failed += q.Failed
	p.Published += q.Published
	p.Delivered += q.Delivered
	p.Errors += q.Errors
	p.Elapsed = max(p.Elapsed, q.Elapsed)
	if p.Phase == "" {
		p.Phase = q.Phase
	}
}

// Worker runs one Job: Prepare connects and subscribes, Start measures.
type Worker struct {
	job       Job
	o         Options
	log       *zap.Logger
	d         *dialer
	sd        *dialer // the subscribers' dialer: d, or Options.SubAddr's
	version   byte
	keepAlive time.Duration

	clients []*client
	lat     *Recorder // end-to-end latency
	ack     *Recorder // publish → PUBACK / PUBCOMP
	connRec *Recorder // dial → CONNACK
	errs    errorCounts

	started   atomic.Bool
	pubStop   atomic.Bool
	startCh   chan struct{}
	stopCh    chan struct{}
	stopReq   chan struct{} // closed by Stop: end the publishing phase now
	stopOnce  sync.Once
	closing   chan struct{}
	closeOnce sync.Once
	startTime time.Time // set before startCh closes; read after
	notBefore int64

	phase      atomic.Value // string
	begin      time.Time
	connected  atomic.Int64
	failed     atomic.Int64
	reconnects atomic.Uint64
	serving    sync.WaitGroup
	ctx        context.Context
	cancel     context.CancelFunc
}

// errorCounts counts failures by kind and keeps a few messages.
type errorCounts struct {
	mu      sync.Mutex
	m       map[string]uint64
	samples []string
	total   atomic.Uint64
}

func (e *errorCounts) add(kind string, err error) {
	e.total.Add(1)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]uint64{}
	}
	e.m[kind]++
	if err != nil && len(e.samples) < 5 {
		e.samples = append(e.samples, kind+": "+withTLSHint(err).Error())
	}
}

func (e *errorCounts) snapshot() (map[string]uint64, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := make(map[string]uint64, len(e.m))
	for k, v := range e.m {
		m[k] = v
	}
	return m, append([]string(nil), e.samples...)
}

// shards is how many recorder shards a worker uses.
func shards() int { return min(64, 4*runtime.GOMAXPROCS(0)) }

// newWorker resolves a job's options into a worker with nothing connected.
func newWorker(ctx context.Context, job Job, log *zap.Logger) (*Worker, error) {
	o := job.Options
	o.token = job.Token
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	v, _ := o.Version()
	us, _, err := o.URLs()
	if err != nil {
		return nil, err
	}
	tc, err := o.TLSConfig()
	if err != nil {
		return nil, err
	}
	src, err := ParseSrcIPs(strings.Join(o.SrcIPs, ","))
	if err != nil {
		return nil, err
	}
	if _, t, _ := o.URL(); len(src) > 0 && t == "quic" {
		return nil, errNoSrcIPs // QUIC dials do not bind source addresses
	}
	w := &Worker{
		job: job, o: o, log: log, d: &dialer{urls: us, tls: tc, src: src}, version: v, keepAlive: o.KeepAlive,
		lat: NewRecorder(shards()), ack: NewRecorder(shards()), connRec: NewRecorder(shards()),
		startCh: make(chan struct{}), stopCh: make(chan struct{}), stopReq: make(chan struct{}), closing: make(chan struct{}),
		notBefore: job.NotBefore, begin: time.Now(),
	}
	w.sd = w.d
	if o.SubAddr != "" {
		sus, _, err := o.SubURLs()
		if err != nil {
			return nil, err
		}
		w.sd = &dialer{urls: sus, tls: tc, src: src}
	}
	w.ctx, w.cancel = context.WithCancel(context.WithoutCancel(ctx))
	w.phase.Store("connecting")
	return w, nil
}

// Prepare connects a job's clients, subscribers first, and waits for every
// SUBACK, so that nothing published after Start can miss a subscriber. It
// fails if any client cannot connect or subscribe, naming the reasons.
func Prepare(ctx context.Context, job Job, log *zap.Logger) (*Worker, error) {
	w, err := newWorker(ctx, job, log)
	if err != nil {
		return nil, err
	}
	if w.o.Mode == ModeConn {
		w.phase.Store("ready")
		return w, nil
	}
	w.build()
	var subs, pubs []*client
	for _, c := range w.clients {
		if c.sub != nil {
			subs = append(subs, c) // loop clients subscribe before anyone publishes
		} else {
			pubs = append(pubs, c)
		}
	}
	for _, group := range [][]*client{subs, pubs} {
		if err := w.connectAll(ctx, group); err != nil {
			w.Close()
			return nil, err
		}
	}
	w.phase.Store("ready")
	return w, nil
}

// build creates the job's clients (unconnected).
func (w *Worker) build() {
	o, j := &w.o, &w.job
	payload := j.Payload
	groups := map[string]*trackerSet{}
	newSub := func(filter string, trackers *trackerSet) *subRole {
		return &subRole{filter: []byte(filter), qos: byte(o.QoS), trackers: trackers}
	}
	subRange := func(j int) *trackerSet { // which publishers subscriber j hears
		if o.Mode == ModeP2P {
			return newTrackerSet(j, 1, false)
		}
		filter := o.SubFilter(j)
		if codec.IsShared([]byte(filter)) {
			if g := groups[filter]; g != nil {
				return g
			}
			g := newTrackerSet(0, o.Pubs, true)
			groups[filter] = g
			return g
		}
		return newTrackerSet(0, o.Pubs, false)
	}
	if o.hasSubscribers() && !o.Loop {
		for i := j.SubLo; i < j.SubHi; i++ {
			c := w.newClient(o.ClientID('s', i))
			c.sub = newSub(o.SubFilter(i), subRange(i))
			w.clients = append(w.clients, c)
		}
	}
	for i := j.PubLo; i < j.PubHi; i++ {
		c := w.newClient(o.ClientID('p', i))
		c.clean = o.Clean || !o.Loop // only loop clients keep a publisher's session
		c.pub = w.newPub(i, payload)
		if o.Loop {
			c.sub = newSub(o.PubTopic(i), newTrackerSet(i, 1, false))
		}
		w.clients = append(w.clients, c)
	}
}

func (w *Worker) newClient(id string) *client {
	c := &client{w: w, slot: len(w.clients), id: id, clean: w.o.Clean, notify: make(chan struct{}, 1),
		suback: make(chan error, 1)}
	c.timer = time.NewTimer(time.Hour)
	c.timer.Stop()
	c.ctl = make([]byte, 0, 256)
	c.spare = make([]byte, 0, 256)
	return c
}

func (w *Worker) newPub(i, size int) *pubRole {
	o := &w.o
	p := &pubRole{num: uint32(i), qos: byte(o.QoS), version: w.version, payload: make([]byte, size),
		rate: o.Rate, done: make(chan struct{})}
	for k := headerLen; k < size; k++ {
		p.payload[k] = 'x'
	}
	p.pkt = codec.Publish{QoS: p.qos, Topic: []byte(o.PubTopic(i)), Payload: p.payload}
	if p.qos > 0 {
		p.pkt.PacketID = 1
	}
	p.size = p.pkt.Len(w.version)
	if p.rate > 0 {
		// Spread publishers over the first interval, so 50,000 publishers at
		// 1 msg/s make a steady 50,000 msg/s, not one burst a second.
		n := max(w.o.Pubs, 1)
		p.phase = time.Duration(float64(i%n) / float64(n) / p.rate * float64(time.Second))
	}
	return p
}

// bufSizes is the read and write buffer of a client's connection: small
// when there are many connections, so the generator's memory stays low.
func (w *Worker) bufSizes(c *client) (r, wr int) {
	many := w.o.clientCount(0) > 1000
	switch {
	case many:
		return 4 << 10, 4 << 10
	case c.pub != nil && c.sub == nil:
		return 4 << 10, 64 << 10
	default:
		return 32 << 10, 8 << 10
	}
}

// connectAll connects and starts clients with bounded concurrency (and
// ConnRate), then returns an error naming every failure reason.
func (w *Worker) connectAll(ctx context.Context, cs []*client) error {
	if len(cs) == 0 {
		return nil
	}
	var next atomic.Int64
	var mu sync.Mutex
	fails := map[string]int{}
	var first error
	start := time.Now()
	rate := w.o.ConnRate
	var wg sync.WaitGroup
	for range min(w.o.DialConcurrency, len(cs)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(cs) || ctx.Err() != nil {
					return
				}
				if rate > 0 {
					if d := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); d > 0 {
						time.Sleep(d)
					}
				}
				if err := w.start(ctx, cs[i]); err != nil {
					w.failed.Add(1)
					mu.Lock()
					fails[Classify(err)]++
					if first == nil {
						first = fmt.Errorf("%s: %w", cs[i].id, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(fails) == 0 {
		return nil
	}
	n := 0
	var parts []string
	for k, v := range fails {
		n += v
		parts = append(parts, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(parts)
	return fmt.Errorf("loadtest: %d of %d clients failed to connect (%s); first: %w", n, len(cs),
		strings.Join(parts, ", "), withTLSHint(first))
}

// start connects one client, starts its loops and, for a subscriber
// without a session, subscribes and waits for SUBACK.
func (w *Worker) start(ctx context.Context, c *client) error {
	m, took, err := w.connect(ctx, c)
	if err != nil {
		return err
	}
	w.connRec.Record(c.slot, int64(took))
	c.conns++
	if c.pub != nil && c.pub.qos > 0 {
		n := min(w.o.Inflight, m.recvMax, 65535)
		c.pub.inflight, c.pub.lowWater = int64(n), int64(max(1, n/4))
		c.pub.sentAt = make([]atomic.Int64, min(2*n, 65535)+1)
	}
	w.serving.Add(1)
	go w.serve(c, m)
	if c.sub == nil {
		return nil
	}
	return c.subscribe(m)
}

func (w *Worker) connect(ctx context.Context, c *client) (*mconn, time.Duration, error) {
	rb, wb := w.bufSizes(c)
	d := w.d
	if c.pub == nil {
		d = w.sd
	}
	return connectMQTT(ctx, d, c.slot+w.job.PubLo+w.job.SubLo, connectSpec{
		id: c.id, clean: c.clean, version: w.version, keepAlive: w.keepAlive, user: w.o.User, pass: w.o.Pass,
		timeout: w.o.ConnectTimeout, rbuf: rb, wbuf: wb,
	})
}

// subscribe sends SUBSCRIBE (unless the session already has it) and waits
// for the SUBACK, which the read loop passes on.
func (c *client) subscribe(m *mconn) error {
	if m.sessionPresent && !c.clean {
		return nil
	}
	s := codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: c.sub.filter, QoS: c.sub.qos}}}
	c.queue(s.Append(nil, c.w.version))
	t := time.NewTimer(c.w.o.ConnectTimeout)
	defer t.Stop()
	select {
	case err := <-c.suback:
		return err
	case <-t.C:
		return fmt.Errorf("no SUBACK within %s: %w", c.w.o.ConnectTimeout, context.DeadlineExceeded)
	case <-c.w.closing:
		return errStopped
	}
}

var (
	errChurn = errors.New("loadtest: churn")
	errDead  = errors.New("loadtest: connection ended")
)

// serve runs a client's connection until the run stops; with -churn a
// subscriber leaves and comes back (same session when -clean=false).
func (w *Worker) serve(c *client, m *mconn) {
	defer w.serving.Done()
	defer func() {
		if c.pub != nil {
			c.pub.finish()
		}
	}()
	for {
		var churn <-chan time.Time
		var churnTimer *time.Timer
		if w.o.Churn > 0 && c.pub == nil {
			// The first departure falls at a scattered point of the first
			// period, so subscribers do not all leave at once.
			d := w.o.Churn
			if c.conns == 1 {
				d = max(time.Duration(uint64(c.slot)*2654435761%1000)*w.o.Churn/1000, w.o.Churn/10)
			}
			churnTimer = time.NewTimer(d)
			churn = churnTimer.C
		}
		w.connected.Add(1)
		err := c.runConn(w.ctx, m, churn)
		w.connected.Add(-1)
		if churnTimer != nil {
			churnTimer.Stop()
		}
		switch {
		case errors.Is(err, errStopped):
			return
		case errors.Is(err, errChurn):
		default:
			if !w.isClosing() {
				w.errs.add("disconnected: "+Classify(err), err)
			}
			return
		}
		// Offline for a fifth of the period, then back with the same id.
		if !w.sleep(max(w.o.Churn/5, 50*time.Millisecond)) {
			return
		}
		if m, err = w.reconnect(c); err != nil {
			w.errs.add("reconnect: "+Classify(err), err)
			return
		}
		w.reconnects.Add(1)
		go func(m *mconn) { // the SUBACK comes through the read loop runConn starts
			if err := c.subscribe(m); err != nil && !errors.Is(err, errStopped) {
				w.errs.add("resubscribe: "+Classify(err), err)
			}
		}(m)
	}
}

// sleep waits d unless the run closes first; false means it closed.
func (w *Worker) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.closing:
		return false
	}
}

// reconnect connects c again, up to five attempts 200ms apart.
func (w *Worker) reconnect(c *client) (*mconn, error) {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		var m *mconn
		var took time.Duration
		if m, took, err = w.connect(w.ctx, c); err == nil {
			w.connRec.Record(c.slot, int64(took))
			c.conns++
			return m, nil
		}
		if !w.sleep(200 * time.Millisecond) {
			return nil, errStopped
		}
	}
	return nil, err
}

func (w *Worker) isClosing() bool {
	select {
	case <-w.closing:
		return true
	default:
		return false
	}
}

// runConn runs the read and write loops of one connection until either
// ends, says goodbye when the run stops or the subscriber churns, closes
// the connection and returns why it ended.
func (c *client) runConn(ctx context.Context, m *mconn, churn <-chan time.Time) error {
	dead := make(chan struct{})
	var rerr error
	go func() {
		rerr = c.readLoop(m)
		close(dead)
	}()
	werr := c.writeLoop(ctx, m, dead, churn)
	if errors.Is(werr, errStopped) || errors.Is(werr, errChurn) {
		_ = m.nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
		_ = c.writeCtl(m.bw)
		_, _ = m.bw.Write(disconnect[:])
		_ = m.bw.Flush()
	}
	_ = m.nc.Close()
	<-dead
	if errors.Is(werr, errDead) {
		return rerr
	}
	return werr
}

// Close stops every client and waits for their goroutines.
// Stop ends the publishing phase of a running Start now, as its duration
// would: the publishers stop, the broker's acknowledgements and the
// deliveries are drained, and Start returns its figures. It is what
// -duration 0 waits for (Ctrl-C); calling it again does nothing.
func (w *Worker) Stop() { w.stopOnce.Do(func() { close(w.stopReq) }) }

func (w *Worker) Close() {
	w.closeOnce.Do(func() { close(w.closing) })
	w.serving.Wait()
	w.cancel()
}

// Progress reports the worker's running totals.
func (w *Worker) Progress() Progress {
	p := Progress{Phase: w.phase.Load().(string), Connected: w.connected.Load(), Failed: w.failed.Load(),
		Errors: w.errs.total.Load()}
	if w.started.Load() {
		p.Elapsed = time.Since(w.startTime).Seconds()
	}
	for _, c := range w.clients {
		if c.pub != nil {
			p.Published += c.pub.published.Load()
		}
		if c.sub != nil {
			p.Delivered += c.sub.unique.Load()
		}
	}
	return p
}
