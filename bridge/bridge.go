package bridge

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/listeners"
)

// State is what a bridge is doing.
type State string

// States of a bridge.
const (
	StateConnecting State = "connecting" // trying the addresses
	StateConnected  State = "connected"  // a link is up
	StateBackoff    State = "backoff"    // waiting before the next try
	StateStopped    State = "stopped"    // stopped by an operator (or disabled in the configuration)
)

// stableAfter is how long a link must stay up for the next failure to
// start the backoff over: a remote that accepts and drops the bridge at
// once keeps it growing.
const stableAfter = 10 * time.Second

// Drop causes: why the bridge did not forward a message.
const (
	dropRemoteRefused = iota // the remote acknowledged it with an error code
	dropLocalRefused         // the local broker did (a full session queue)
	dropTooLarge             // larger than the remote's Maximum Packet Size
	dropNoRule               // no rule forwards its topic (a subscription of an older configuration)
	dropSetup                // QoS 0 beyond maxHeldQoS0 while the link was being set up
	dropCauses
)

var dropNames = [dropCauses]string{"remote_refused", "local_refused", "too_large", "no_rule", "setup"}

// Causes of failed connection attempts.
const (
	failDial      = iota // no connection: refused, unreachable, timeout
	failTLS              // the TLS handshake or the TLS files
	failAuth             // the remote refused the credentials or the client id
	failRefused          // the remote refused the CONNECT for another reason
	failProtocol         // the remote closed or answered nonsense before CONNACK
	failLocal            // the local broker refused the bridge's session
	failSubscribe        // subscribing at the remote failed
	failCauses
)

var failNames = [failCauses]string{"dial", "tls", "auth", "refused", "protocol", "local", "subscribe"}

// counters are a bridge's statistics, kept across links and reloads of
// an unchanged configuration.
type counters struct {
	msgsOut, msgsIn   atomic.Int64 // PUBLISH forwarded out and in
	bytesOut, bytesIn atomic.Int64 // bytes written to and read from the remote
	links             atomic.Int64 // links established
	reconnects        atomic.Int64 // connection rounds after the first
	loops             atomic.Int64 // messages from the remote recognised as the bridge's own (origin tracking)
	subRefused        atomic.Int64 // filters a SUBACK refused
	inflightTimeouts  atomic.Int64 // links closed because an exchange in flight waited past inflight_timeout
	failures          [failCauses]atomic.Int64
	drops             [dropCauses]atomic.Int64
}

// Bridge is one configured bridge: it keeps a link up while it runs.
type Bridge struct {
	cfg     Config
	m       *Manager
	log     *zap.Logger
	c       *counters
	localID string

	mu        sync.Mutex // guards the fields below
	state     State
	address   string // the address of the link, or the last one tried
	since     time.Time
	lastErr   string
	lastErrAt time.Time
	backoff   time.Duration
	loopsBy   string          // how loops are prevented on the current link
	link      *link           // the link being served, for its exchanges in flight; nil: none
	noBit     map[string]bool // addresses that refused Mosquitto's bridge bit
	stale     []string        // remote filters of a replaced configuration, unsubscribed by the next link
	// localNew: prepareLocal made the local session, and no link has used
	// it yet; it holds no history, as if its CONNACK said not present.
	localNew bool
	stop     chan struct{} // nil while stopped
	done     chan struct{}
	warnAt   time.Time
}

func newBridge(m *Manager, cfg Config, c *counters) *Bridge {
	return &Bridge{cfg: cfg, m: m, c: c, localID: UserPrefix + cfg.Name, state: StateStopped,
		log: m.log.With(zap.String("bridge", cfg.Name)), noBit: map[string]bool{}}
}

// start runs the bridge unless it runs already.
func (b *Bridge) start() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stop != nil {
		return
	}
	b.stop, b.done = make(chan struct{}), make(chan struct{})
	b.state = StateConnecting
	go b.run(b.stop, b.done)
}

// halt stops the bridge and waits for its link to close.
func (b *Bridge) halt() {
	b.mu.Lock()
	stop, done := b.stop, b.done
	b.stop = nil
	b.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-done
}

func (b *Bridge) running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stop != nil
}

// run connects, serves links and backs off until stop closes.
func (b *Bridge) run(stop, done chan struct{}) {
	defer close(done)
	if err := b.prepareLocal(); err != nil {
		b.log.Error("bridge cannot subscribe its local session; it will when the remote is reached", zap.Error(err))
	}
	var backoff time.Duration
	for round := 0; ; round++ {
		if round > 0 {
			b.c.reconnects.Add(1)
		}
		b.setState(StateConnecting, 0)
		up, err := b.connectRound(stop)
		select {
		case <-stop:
			b.setState(StateStopped, 0)
			b.log.Info("bridge stopped")
			return
		default:
		}
		if up >= stableAfter {
			backoff = 0
		}
		backoff = nextBackoff(backoff, b.cfg.BackoffMin, b.cfg.BackoffMax)
		delay := jitter(backoff)
		b.setState(StateBackoff, delay)
		if up > 0 {
			b.log.Warn("bridge link down", zap.Error(err), zap.Duration("connected_for", up), zap.Duration("retry_in", delay))
		}
		t := time.NewTimer(delay)
		select {
		case <-stop:
			t.Stop()
			b.setState(StateStopped, 0)
			b.log.Info("bridge stopped")
			return
		case <-t.C:
		}
	}
}

// nextBackoff doubles the backoff between min and max.
func nextBackoff(cur, lo, hi time.Duration) time.Duration {
	if cur <= 0 {
		return lo
	}
	return min(2*cur, hi)
}

// jitter spreads a delay over [d/2, d], so bridges of many brokers that
// lost the same remote do not come back at the same instant.
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// setState records what the bridge does. The backoff shown is the last
// wait, kept while the bridge tries again, so that it shows in metrics.
func (b *Bridge) setState(s State, backoff time.Duration) {
	b.mu.Lock()
	b.state = s
	if s == StateBackoff || s == StateStopped {
		b.backoff = backoff
	}
	if s != StateConnected {
		b.loopsBy = ""
	}
	b.mu.Unlock()
}

// connectRound tries the addresses in turn; the first link made is served
// until it ends. It returns how long the link was up (0: none was made)
// and why it ended or why the last address failed.
func (b *Bridge) connectRound(stop <-chan struct{}) (time.Duration, error) {
	var last error
	for _, addr := range b.cfg.Addresses {
		b.mu.Lock()
		b.address = addr
		b.mu.Unlock()
		l, err := b.connect(addr, stop)
		if err != nil {
			last = err
			b.failed(addr, err)
			select {
			case <-stop:
				return 0, err
			default:
			}
			continue
		}
		start := time.Now()
		b.c.links.Add(1)
		b.mu.Lock()
		b.state, b.since, b.loopsBy, b.backoff, b.link = StateConnected, start, l.loopPrevention(), 0, l
		b.mu.Unlock()
		b.log.Info("bridge connected", zap.String("address", addr), zap.String("protocol", b.cfg.Protocol),
			zap.String("client_id", b.cfg.ClientID), zap.Bool("remote_session_present", l.remoteSession),
			zap.Bool("local_session_present", l.localSession), zap.String("loop_prevention", l.loopPrevention()),
			zap.Int("inflight_window", l.caps.recvMax))
		err = l.serve(stop)
		b.mu.Lock()
		b.link = nil
		b.mu.Unlock()
		up := max(time.Since(start), 1)
		if !errors.Is(err, errStopped) {
			b.recordErr(err)
		}
		return up, err
	}
	return 0, last
}

func (b *Bridge) recordErr(err error) {
	b.mu.Lock()
	b.lastErr, b.lastErrAt = err.Error(), time.Now()
	b.mu.Unlock()
}

// connectError is a failed connection attempt with its cause.
type connectError struct {
	cause int
	err   error
}

func (e *connectError) Error() string { return e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

func failure(cause int, format string, a ...any) error {
	return &connectError{cause: cause, err: fmt.Errorf(format, a...)}
}

// failed logs a failed attempt once, with what to do about it, and counts it.
func (b *Bridge) failed(addr string, err error) {
	cause := failDial
	var ce *connectError
	if errors.As(err, &ce) {
		cause = ce.cause
	}
	b.c.failures[cause].Add(1)
	b.recordErr(err)
	fields := []zap.Field{zap.String("address", addr), zap.String("cause", failNames[cause]), zap.Error(err)}
	switch cause {
	case failAuth:
		b.log.Error("bridge refused by the remote: check username, password and client_id; retrying with backoff", fields...)
	case failTLS:
		b.log.Error("bridge cannot set up TLS with the remote: check tls.ca_file, tls.server_name and the certificate; retrying with backoff", fields...)
	case failLocal:
		b.log.Error("bridge refused by the local broker", fields...)
	default:
		b.log.Warn("bridge cannot connect", fields...)
	}
}

// warnRarely logs at most one warning every 10 seconds for a bridge, for
// conditions that may repeat with every message.
func (b *Bridge) warnRarely(msg string, fields ...zap.Field) {
	b.mu.Lock()
	now := time.Now()
	ok := now.Sub(b.warnAt) >= 10*time.Second
	if ok {
		b.warnAt = now
	}
	b.mu.Unlock()
	if ok {
		b.log.Warn(msg, fields...)
	}
}

// connect makes a link over addr: the remote connection and its
// subscriptions first, then the local session and its subscriptions.
func (b *Bridge) connect(addr string, stop <-chan struct{}) (*link, error) {
	cfg := &b.cfg
	deadline := time.Now().Add(cfg.ConnectTimeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	tlsConf, err := cfg.tlsConfig()
	if err != nil {
		return nil, failure(failTLS, "%w", err)
	}
	l := &link{b: b, cfg: cfg, rules: newRules(cfg.Topics), addr: addr, log: b.log, rv: cfg.version(),
		caps: remoteCaps{maxQoS: 2, retainOK: true, subIDs: cfg.version() == codec.V5, recvMax: cfg.MaxInflight},
		in:   newFlows(), out: newFlows(), localReady: make(chan struct{}), closed: make(chan struct{}),
		wd: watchClock{tick: max(cfg.InflightTimeout/inflightTicks, time.Millisecond)}}
	b.mu.Lock()
	useBit := l.rv == codec.V311 && !cfg.PlainProtocol && !b.noBit[addr]
	b.mu.Unlock()
	ack, err := b.connectRemote(ctx, l, addr, tlsConf, deadline, useBit)
	var cerr *ConnackError
	if useBit && (errors.As(err, &cerr) && cerr.Code == codec.UnsupportedProtocolVersion || errors.Is(err, errEOFBeforeConnack)) {
		// Mosquitto's answer when a remote refuses the bit (try_private):
		// once more without it, and never again with it at this address.
		b.log.Info("the remote refused Mosquitto's bridge bit; connecting as a plain MQTT 3.1.1 client",
			zap.String("address", addr), zap.Error(err))
		b.mu.Lock()
		b.noBit[addr] = true
		b.mu.Unlock()
		useBit = false
		ack, err = b.connectRemote(ctx, l, addr, tlsConf, deadline, false)
	}
	if err != nil {
		return nil, err
	}
	l.caps.bridgeBit = useBit
	l.remoteSession = ack.SessionPresent
	if l.rv == codec.V5 {
		if q, ok := ack.Props.Num(codec.PropMaximumQoS); ok {
			l.caps.maxQoS = byte(q)
		}
		if r, ok := ack.Props.Num(codec.PropRetainAvailable); ok && r == 0 {
			l.caps.retainOK = false
		}
		if ack.Props.MaximumPacketSize > 0 {
			l.caps.maxPacket = int(ack.Props.MaximumPacketSize)
		}
		if s, ok := ack.Props.Num(codec.PropSubIDAvailable); ok && s == 0 {
			l.caps.subIDs = false
		}
		if rm, ok := ack.Props.Num(codec.PropReceiveMaximum); ok && int(rm) < l.caps.recvMax {
			l.caps.recvMax = int(rm)
		}
	}
	if l.rv == codec.V311 && !useBit && l.rules.loopable() {
		l.origin = newOriginTracker()
	}
	closeRemote := func() { _ = l.remote.conn.Close(); l.remote.s.wait() }
	l.remote.s = newSender(l.remote.conn, l.rv, &b.c.bytesOut)
	b.mu.Lock()
	stale := b.stale
	b.mu.Unlock()
	if err := l.subscribeRemote(stale, deadline); err != nil {
		closeRemote()
		return nil, failure(failSubscribe, "%w", err)
	}
	if err := b.connectLocal(l, deadline); err != nil {
		closeRemote()
		return nil, err
	}
	b.mu.Lock()
	b.stale, b.localNew = nil, false
	b.mu.Unlock()
	return l, nil
}

// errEOFBeforeConnack: the remote closed the connection instead of
// answering CONNECT, which is how some brokers refuse a protocol level.
var errEOFBeforeConnack = errors.New("the remote closed the connection before CONNACK")

// connectRemote dials addr and logs in; it leaves l.remote.conn and l.remote.r set.
func (b *Bridge) connectRemote(ctx context.Context, l *link, addr string, tlsConf *tls.Config, deadline time.Time, useBit bool) (*codec.Connack, error) {
	cfg := &b.cfg
	nc, err := listeners.Dial(ctx, addr, tlsConf)
	if err != nil {
		if isTLSError(err) {
			return nil, failure(failTLS, "%w", err)
		}
		return nil, failure(failDial, "%w", err)
	}
	conn := &countingConn{Conn: nc, n: &b.c.bytesIn}
	_ = conn.SetDeadline(deadline)
	cp := &codec.Connect{ProtocolVersion: l.rv, Bridge: useBit, CleanStart: cfg.CleanStart,
		KeepAlive: uint16(cfg.KeepAlive / time.Second), ClientID: []byte(cfg.ClientID)}
	if cfg.Username != "" {
		cp.UsernameFlag, cp.Username = true, []byte(cfg.Username)
	}
	if cfg.Password != "" {
		cp.PasswordFlag, cp.Password = true, []byte(cfg.Password)
	}
	if l.rv == codec.V5 {
		cp.Props.SetNum(codec.PropSessionExpiry, uint32(cfg.SessionExpiry/time.Second))
		cp.Props.SetNum(codec.PropReceiveMaximum, uint32(b.m.opts.ReceiveMaximum))
		if b.m.opts.MaxPacketSize > 0 {
			cp.Props.SetNum(codec.PropMaximumPacketSize, uint32(b.m.opts.MaxPacketSize))
		}
	}
	r, ack, err := handshake(conn, cp, b.m.opts.MaxPacketSize)
	if err != nil {
		_ = conn.Close()
		var cerr *ConnackError
		switch {
		case errors.As(err, &cerr) && cerr.authFailure():
			return nil, &connectError{cause: failAuth, err: err}
		case errors.As(err, &cerr):
			return nil, &connectError{cause: failRefused, err: err}
		case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
			return nil, &connectError{cause: failProtocol, err: fmt.Errorf("%w: %w", errEOFBeforeConnack, err)}
		case isTLSError(err):
			return nil, failure(failTLS, "%w", err)
		case isTimeout(err):
			return nil, failure(failProtocol, "no CONNACK within connect_timeout %v: %w", cfg.ConnectTimeout, err)
		}
		return nil, failure(failProtocol, "%w", err)
	}
	_ = conn.SetDeadline(time.Time{})
	l.remote.conn, l.remote.r = conn, r
	return ack, nil
}

// connectLocal opens the bridge's session at the local broker over an
// in-process pipe, sweeps stale QoS 2 state where one side's session is
// new, and subscribes the out rules.
func (b *Bridge) connectLocal(l *link, deadline time.Time) error {
	ours, theirs := net.Pipe()
	b.m.opts.Local.ServeConn(theirs, ListenerPrefix+b.cfg.Name)
	_ = ours.SetDeadline(deadline)
	r, ack, err := handshake(ours, b.localConnect(l), 0)
	if err != nil {
		_ = ours.Close()
		return failure(failLocal, "%w", err)
	}
	_ = ours.SetDeadline(time.Time{})
	l.local.conn, l.local.r = ours, r
	b.mu.Lock()
	l.localSession = ack.SessionPresent && !b.localNew
	b.mu.Unlock()
	rm := 65535
	if v, ok := ack.Props.Num(codec.PropReceiveMaximum); ok && v > 0 {
		rm = int(v)
	}
	l.slots = make(chan struct{}, rm)
	l.local.s = newSender(ours, codec.V5, nil)
	fail := func(err error) error { _ = ours.Close(); l.local.s.wait(); return failure(failLocal, "%w", err) }
	var session SessionInfo
	if l.localSession {
		session, _ = b.m.opts.Local.Session(b.localID)
	}
	switch {
	case l.localSession && !l.remoteSession && len(session.AwaitingRelease) > 0:
		// The remote forgot the QoS 2 messages in it had not released; the
		// local broker still waits for their PUBREL, and would take new
		// messages with their packet ids for redeliveries.
		l.local.skip = len(session.AwaitingRelease)
		for _, id := range session.AwaitingRelease {
			if err := l.local.s.ack(codec.PUBREL, id, codec.Success); err != nil {
				return fail(err)
			}
		}
	case l.remoteSession && !l.localSession:
		// The other way round; the remote tells nobody which ids it
		// holds, so every one is released.
		l.remote.skip = 65535
		if err := sweep(l.remote.s); err != nil {
			return fail(err)
		}
	}
	if err := l.subscribeLocal(session.Filters); err != nil {
		return fail(err)
	}
	return nil
}

// prepareLocal makes the local session hold the out rules' subscriptions
// before the remote is ever reached, so that what is published while it
// cannot be (a gateway that starts offline, a rule added while the remote
// is away) waits in the session's queue. It connects in-process,
// subscribes and unsubscribes, and leaves; a session that has the right
// subscriptions already is left alone. A delivery the broker makes to
// this short connection is not acknowledged, so it is sent again to the
// next link; only a QoS 0 retained message of a new rule is lost, like any
// QoS 0 message while the link is down.
func (b *Bridge) prepareLocal() error {
	want := newRules(b.cfg.Topics).outFilters()
	sess, ok := b.m.opts.Local.Session(b.localID)
	if ok && sameSet(sess.Filters, want) {
		return nil
	}
	if !ok {
		b.mu.Lock()
		b.localNew = true
		b.mu.Unlock()
	}
	l := &link{b: b, cfg: &b.cfg, rules: newRules(b.cfg.Topics), log: b.log, caps: remoteCaps{recvMax: b.cfg.MaxInflight},
		localReady: make(chan struct{}), closed: make(chan struct{})}
	ours, theirs := net.Pipe()
	defer ours.Close()
	b.m.opts.Local.ServeConn(theirs, ListenerPrefix+b.cfg.Name)
	_ = ours.SetDeadline(time.Now().Add(b.cfg.ConnectTimeout))
	r, _, err := handshake(ours, b.localConnect(l), 0)
	if err != nil {
		return err
	}
	l.local.s = newSender(ours, codec.V5, nil)
	defer l.local.s.wait()
	if err := l.subscribeLocal(sess.Filters); err != nil {
		return err
	}
	for l.localAcks > 0 {
		p, err := r.ReadPacket()
		if err != nil {
			return err
		}
		switch p := p.(type) {
		case *codec.Suback:
			l.subscribed("local", p.PacketID, p.ReasonCodes)
		case *codec.Unsuback:
			l.subscribed("local", p.PacketID, nil)
		}
	}
	_ = l.local.s.send(&codec.Disconnect{})
	l.local.s.finish(time.Second)
	return nil
}

// localConnect is the CONNECT of the bridge's local session.
func (b *Bridge) localConnect(l *link) *codec.Connect {
	cp := &codec.Connect{ProtocolVersion: codec.V5, ClientID: []byte(b.localID),
		UsernameFlag: true, Username: []byte(b.localID), PasswordFlag: true, Password: b.m.secret[:]}
	cp.Props.SetNum(codec.PropSessionExpiry, 0xFFFFFFFF) // the queue while the remote is away: until the bridge is removed
	cp.Props.SetNum(codec.PropReceiveMaximum, uint32(l.caps.recvMax))
	if l.caps.maxPacket > 0 {
		// The local broker drops (and counts) what the remote would refuse.
		cp.Props.SetNum(codec.PropMaximumPacketSize, uint32(l.caps.maxPacket))
	}
	return cp
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// loopPrevention names how the link stops loops.
func (l *link) loopPrevention() string {
	switch {
	case l.rv == codec.V5:
		return "no_local"
	case l.caps.bridgeBit:
		return "bridge_bit"
	case l.origin != nil:
		return "origin_tracking"
	}
	return "none_needed"
}

// tlsConfig builds the client TLS configuration from the files, read at
// every connection so renewed certificates apply; nil without settings.
func (c *Config) tlsConfig() (*tls.Config, error) {
	t := c.TLS
	if t == (TLS{}) {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls ca_file %s: no PEM certificate", t.CAFile)
		}
		conf.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls cert_file/key_file: %w", err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}

func isTLSError(err error) bool {
	var ve *tls.CertificateVerificationError
	var ae tls.AlertError
	var re tls.RecordHeaderError
	var ue x509.UnknownAuthorityError
	var he x509.HostnameError
	return errors.As(err, &ve) || errors.As(err, &ae) || errors.As(err, &re) || errors.As(err, &ue) || errors.As(err, &he)
}

// countingConn counts the bytes read from the remote.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}
