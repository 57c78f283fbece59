package listeners

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"go.uber.org/zap"
)

// QUIC application error codes xmq closes connections with.
const (
	quicCodeNormal  quic.ApplicationErrorCode = 0x0 // the MQTT connection ended
	quicCodeRefused quic.ApplicationErrorCode = 0x1 // max connections, no stream in time, shutdown
)

// quicLinger bounds how long a closed conn waits for the peer to take the
// last bytes and close its side before the QUIC connection is closed.
const quicLinger = 2 * time.Second

// quicListener serves MQTT over QUIC: one MQTT connection per QUIC
// connection, on the first bidirectional stream the client opens (ALPN
// "mqtt", the single-stream mode of EMQX clients). Each QUIC connection
// waits for its stream on its own goroutine, under HandshakeTimeout.
type quicListener struct {
	ql        *quic.Listener
	o         Options
	log       *zap.Logger
	h         *handoff
	fails     *failures
	live      atomic.Int64
	ctx       context.Context // cancelled by Close: ends the stream waits
	cancel    context.CancelFunc
	closeOnce sync.Once
	closeErr  error
	loopDone  chan struct{}
}

// quicConfig is the QUIC configuration of both sides. Peers heard from in
// none of idle are gone; keepalive PINGs every idle/2 keep a live peer's
// connection open however long its MQTT keepalive.
func quicConfig(idle, handshake time.Duration) *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout:  handshake,
		MaxIdleTimeout:        idle,
		KeepAlivePeriod:       idle / 2,
		MaxIncomingStreams:    1,  // the MQTT stream
		MaxIncomingUniStreams: -1, // none
		Allow0RTT:             false,
	}
}

func listenQUIC(o Options) (Listener, error) {
	tlsConf := withALPN(o.TLS, ALPNMQTT)
	// QUIC cannot answer the ACME TLS-ALPN-01 challenge: only MQTT here.
	tlsConf.NextProtos = []string{ALPNMQTT}
	tlsConf.MinVersion = tls.VersionTLS13
	fails := newFailures(TransportQUIC, false)
	if o.IdentityAsUsername != IdentityNone {
		// quic-go reports no handshake error to the listener: the hook
		// counts its refusals itself.
		tlsConf.VerifyConnection = requireIdentity(o.IdentityAsUsername, func() { fails.add(FailClientCertificate) })
	}
	ql, err := quic.ListenAddr(o.Address, tlsConf, quicConfig(o.IdleTimeout, o.HandshakeTimeout))
	if err != nil {
		return nil, fmt.Errorf("listeners: quic: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &quicListener{ql: ql, o: o, log: o.Log, h: newHandoff(), fails: fails, ctx: ctx, cancel: cancel, loopDone: make(chan struct{})}
	go l.acceptLoop()
	return l, nil
}

func (l *quicListener) Transport() string { return TransportQUIC }
func (l *quicListener) Addr() net.Addr    { return l.ql.Addr() }

// HandshakeFailures counts the QUIC connections refused or lost before
// Accept: over MaxConnections, no MQTT stream in time or the peer gone
// first, and client certificates without the identity IdentityAsUsername
// needs. Other TLS failures happen inside quic-go, which reports them only
// to a qlog tracer (a cost on every packet), so they are not counted.
func (l *quicListener) HandshakeFailures() map[string]int64 { return l.fails.snapshot() }

// Accept returns the next QUIC connection's MQTT stream.
func (l *quicListener) Accept() (net.Conn, error) {
	return l.h.take(TransportQUIC, l.ql.Addr())
}

// Close stops accepting. QUIC connections not yet returned by Accept are
// closed; the ones returned stay open on the UDP socket until their owner
// closes them. Idempotent.
func (l *quicListener) Close() error {
	l.closeOnce.Do(func() {
		l.h.stop(closedError(TransportQUIC, l.ql.Addr()))
		l.cancel()
		l.closeErr = l.ql.Close()
		<-l.loopDone
	})
	return l.closeErr
}

func (l *quicListener) acceptLoop() {
	defer close(l.loopDone)
	for {
		qc, err := l.ql.Accept(l.ctx)
		if err != nil {
			select {
			case <-l.h.done:
			default:
				l.log.Error("accept failed; listener stopped", zap.Error(err))
				l.h.stop(err)
			}
			return
		}
		release := func() {}
		if max := l.o.MaxConnections; max > 0 {
			if n := l.live.Add(1); n > int64(max) {
				l.live.Add(-1)
				_ = qc.CloseWithError(quicCodeRefused, "max connections reached")
				l.fails.add(FailMaxConnections)
				l.log.Warn("refusing connection: max connections reached", zap.Stringer("remote", qc.RemoteAddr()),
					zap.Int("max_connections", max))
				continue
			}
			release = func() { l.live.Add(-1) }
		}
		go l.prepare(qc, release)
	}
}

// prepare waits for the connection's first stream and hands it to Accept.
func (l *quicListener) prepare(qc *quic.Conn, release func()) {
	ctx, cancel := context.WithTimeout(l.ctx, l.o.HandshakeTimeout)
	defer cancel()
	st, err := qc.AcceptStream(ctx)
	if err != nil {
		_ = qc.CloseWithError(quicCodeRefused, "no MQTT stream opened in time")
		release()
		switch {
		case l.ctx.Err() != nil: // the listener is closing
		case errors.Is(err, context.DeadlineExceeded):
			l.fails.add(FailTimeout)
		default:
			l.fails.add(FailClosed)
		}
		if ce := l.log.Check(zap.InfoLevel, "refusing connection: no stream"); ce != nil {
			ce.Write(zap.Stringer("remote", qc.RemoteAddr()), zap.Error(err))
		}
		return
	}
	state := qc.ConnectionState().TLS
	c := newQUICConn(qc, st, release)
	c.identity = certIdentity(&state, l.o.IdentityAsUsername)
	if !l.h.give(c) {
		_ = c.Close()
	}
}

// quicConn is one QUIC connection's MQTT stream as a net.Conn. Close ends
// both directions of the stream and then the QUIC connection, after the
// peer closed its side or quicLinger passed, so the last bytes written
// (a refusal, a DISCONNECT) still arrive.
type quicConn struct {
	qc       *quic.Conn
	st       *quic.Stream
	identity string
	release  func()

	wmu    sync.Mutex // guards closed; held by Write, which quic-go forbids beside Close
	closed bool

	rmu  sync.Mutex // held by Read; Close's drain takes it after the last Read
	peek peeker     // guarded by rmu

	// peerDone is set once the peer ended the stream (FIN or reset): it
	// needs nothing more from us, so Close closes the connection at once.
	peerDone atomic.Bool

	closeOnce sync.Once
}

func newQUICConn(qc *quic.Conn, st *quic.Stream, release func()) *quicConn {
	if release == nil {
		release = func() {}
	}
	return &quicConn{qc: qc, st: st, release: release}
}

// WaitReadable waits until the peer sends something, without the caller
// holding a buffer meanwhile (core.ReadWaiter): it reads one byte, which the
// next Read returns.
func (c *quicConn) WaitReadable() error {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return c.peek.wait(quicStreamReader{c})
}

// quicStreamReader reads c's stream with Read's error handling; rmu is held.
type quicStreamReader struct{ c *quicConn }

func (r quicStreamReader) Read(p []byte) (int, error) { return r.c.read(p) }

func (c *quicConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return c.peek.read(quicStreamReader{c}, p)
}

// read reads the stream; c.rmu is held.
func (c *quicConn) read(p []byte) (int, error) {
	n, err := c.st.Read(p)
	if err != nil {
		err = quicError(err)
		if errors.Is(err, io.EOF) || isRemote(err) {
			c.peerDone.Store(true)
		}
	}
	return n, err
}

func (c *quicConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	n, err := c.st.Write(p)
	if err != nil {
		err = quicError(err)
		if isRemote(err) {
			c.peerDone.Store(true)
		}
	}
	return n, err
}

// isRemote reports an error the peer caused: a stream reset or stop, or
// its closing the connection.
func isRemote(err error) bool {
	var se *quic.StreamError
	var ae *quic.ApplicationError
	return errors.As(err, &se) && se.Remote || errors.As(err, &ae) && ae.Remote
}

// quicError maps the peer's orderly close to io.EOF.
func quicError(err error) error {
	var ae *quic.ApplicationError
	if errors.As(err, &ae) && ae.Remote && ae.ErrorCode == quicCodeNormal {
		return io.EOF
	}
	var se *quic.StreamError
	if errors.As(err, &se) && se.Remote && se.ErrorCode == 0 {
		return io.EOF
	}
	return err
}

// Close ends the stream in both directions and then the QUIC connection,
// as a lingering TCP close does: it sends FIN after what was written,
// unblocks a pending Read, and reads on until the peer's side ends (the
// peer took everything and closed) or quicLinger passes; only then is the
// connection closed, so a CONNECTION_CLOSE never overtakes the last bytes.
func (c *quicConn) Close() error {
	c.closeOnce.Do(func() {
		if c.wmu.TryLock() {
			c.closed = true
			_ = c.st.Close() // FIN after what was written
			c.wmu.Unlock()
		} else {
			c.st.CancelWrite(0) // a Write is stuck: abort it
			c.wmu.Lock()
			c.closed = true
			c.wmu.Unlock()
		}
		c.release()
		if c.peerDone.Load() {
			c.st.CancelRead(0)
			_ = c.qc.CloseWithError(quicCodeNormal, "")
			return
		}
		_ = c.st.SetReadDeadline(time.Now()) // unblock a pending Read
		go func() {
			c.rmu.Lock() // the last Read has returned
			defer c.rmu.Unlock()
			_ = c.st.SetReadDeadline(time.Now().Add(quicLinger))
			buf := make([]byte, 512)
			for {
				if _, err := c.st.Read(buf); err != nil {
					break
				}
			}
			c.st.CancelRead(0)
			_ = c.qc.CloseWithError(quicCodeNormal, "")
		}()
	})
	return nil
}

func (c *quicConn) LocalAddr() net.Addr                { return c.qc.LocalAddr() }
func (c *quicConn) RemoteAddr() net.Addr               { return c.qc.RemoteAddr() }
func (c *quicConn) SetDeadline(t time.Time) error      { return c.st.SetDeadline(t) }
func (c *quicConn) SetReadDeadline(t time.Time) error  { return c.st.SetReadDeadline(t) }
func (c *quicConn) SetWriteDeadline(t time.Time) error { return c.st.SetWriteDeadline(t) }

// CertIdentity returns the client certificate's identity when the listener
// uses it as the username, else "".
func (c *quicConn) CertIdentity() string { return c.identity }

// ConnectionState returns the TLS state of the QUIC handshake.
func (c *quicConn) ConnectionState() tls.ConnectionState { return c.qc.ConnectionState().TLS }
