package listeners

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// handoff passes finished conns from per-connection goroutines to Accept.
// The channel is unbuffered: a conn is either taken by Accept or, once the
// listener is closed, closed by the goroutine that prepared it.
type handoff struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	err  error // why done was closed; written before close(done)
}

func newHandoff() *handoff {
	return &handoff{ch: make(chan net.Conn), done: make(chan struct{})}
}

// give hands c to Accept; false means the listener is closed and c is the
// caller's to close.
func (h *handoff) give(c net.Conn) bool {
	select {
	case h.ch <- c:
		return true
	case <-h.done:
		return false
	}
}

// take waits for a conn for Accept.
func (h *handoff) take(transport string, addr net.Addr) (net.Conn, error) {
	select {
	case c := <-h.ch:
		return c, nil
	case <-h.done:
		return nil, h.err
	}
}

// stop closes the handoff with err; only the first call counts.
func (h *handoff) stop(err error) bool {
	first := false
	h.once.Do(func() {
		h.err = err
		close(h.done)
		first = true
	})
	return first
}

// closedError is what Accept returns after Close.
func closedError(transport string, addr net.Addr) error {
	return &net.OpError{Op: "accept", Net: transport, Addr: addr, Err: net.ErrClosed}
}

// streamListener serves the TCP-based transports: tcp and tls, and the TCP
// side of ws and wss. Plain TCP without a PROXY header or a connection
// limit is accepted on the caller's goroutine (direct); otherwise one goroutine accepts and each
// connection's PROXY header and TLS handshake run on the connection's own
// goroutine under HandshakeTimeout, and the finished conn reaches Accept
// through the handoff.
type streamListener struct {
	ln        net.Listener
	transport string
	o         Options
	tlsConf   *tls.Config // nil: plain TCP
	trusted   prefixes
	log       *zap.Logger
	direct    bool
	h         *handoff
	live      atomic.Int64 // open conns, handshakes included, when MaxConnections > 0
	closeOnce sync.Once
	closeErr  error
	loopDone  chan struct{}
}

// listenStream starts a tcp or tls listener.
func listenStream(o Options) (Listener, error) {
	var tlsConf *tls.Config
	if o.Transport == TransportTLS {
		tlsConf = withALPN(o.TLS, ALPNMQTT)
	}
	return newStream(o, o.Transport, tlsConf)
}

func newStream(o Options, transport string, tlsConf *tls.Config) (*streamListener, error) {
	ln, err := net.Listen("tcp", o.Address)
	if err != nil {
		return nil, fmt.Errorf("listeners: %s: %w", o.Transport, err)
	}
	trusted, _ := parsePrefixes(o.TrustedProxies) // Validate checked them
	if tlsConf != nil && o.IdentityAsUsername != IdentityNone {
		tlsConf = tlsConf.Clone()
		mode := o.IdentityAsUsername
		// Refuse in the handshake, with an alert the client can report, a
		// certificate that carries no identity to use as the username.
		tlsConf.VerifyConnection = func(cs tls.ConnectionState) error {
			if certIdentity(&cs, mode) == "" {
				return fmt.Errorf("listeners: a client certificate with a %s identity is required", mode)
			}
			return nil
		}
	}
	l := &streamListener{
		ln: ln, transport: transport, o: o, tlsConf: tlsConf, trusted: trusted, log: o.Log,
		// With a limit, the accept loop refuses the excess at once, whether
		// or not the caller is in Accept.
		direct: tlsConf == nil && !o.ProxyProtocol && o.MaxConnections == 0,
	}
	if !l.direct {
		l.h = newHandoff()
		l.loopDone = make(chan struct{})
		go l.acceptLoop()
	}
	return l, nil
}

func (l *streamListener) Transport() string { return l.transport }
func (l *streamListener) Addr() net.Addr    { return l.ln.Addr() }

// Accept returns the next connection, ready to carry MQTT bytes.
func (l *streamListener) Accept() (net.Conn, error) {
	if !l.direct {
		return l.h.take(l.transport, l.ln.Addr())
	}
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return nil, err
		}
		if c = l.admit(c); c != nil {
			return c, nil
		}
	}
}

// Close stops accepting; conns already returned by Accept stay open. The
// first call reports the result, later calls return nil.
func (l *streamListener) Close() error {
	l.closeOnce.Do(func() {
		// Mark the listener done before closing the socket, so the accept
		// loop sees a closed listener, not an accept error to log.
		if !l.direct {
			l.h.stop(closedError(l.transport, l.ln.Addr()))
		}
		l.closeErr = l.ln.Close()
		if !l.direct {
			<-l.loopDone
		}
	})
	return l.closeErr
}

// admit applies MaxConnections to a new raw conn: it returns the conn,
// wrapped so that closing it frees its place, or nil after closing it.
func (l *streamListener) admit(c net.Conn) net.Conn {
	max := l.o.MaxConnections
	if max == 0 {
		return c
	}
	if n := l.live.Add(1); n > int64(max) {
		l.live.Add(-1)
		_ = c.Close()
		if ce := l.log.Check(zap.WarnLevel, "refusing connection: max connections reached"); ce != nil {
			ce.Write(zap.Stringer("remote", c.RemoteAddr()), zap.Int("max_connections", max))
		}
		return nil
	}
	return &countedConn{Conn: c, release: func() { l.live.Add(-1) }}
}

// acceptLoop accepts raw connections and prepares each on its own goroutine.
func (l *streamListener) acceptLoop() {
	defer close(l.loopDone)
	var delay time.Duration
	for {
		c, err := l.ln.Accept()
		if err != nil {
			select {
			case <-l.h.done:
				return
			default:
			}
			if isTemporary(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				l.log.Warn("accept error; retrying", zap.Error(err), zap.Duration("delay", delay))
				select {
				case <-time.After(delay):
				case <-l.h.done:
					return
				}
				continue
			}
			l.log.Error("accept failed; listener stopped", zap.Error(err))
			l.h.stop(err)
			return
		}
		delay = 0
		if c = l.admit(c); c != nil {
			go l.prepare(c)
		}
	}
}

// prepare reads the PROXY header and runs the TLS handshake of c under
// HandshakeTimeout, then hands the conn to Accept. A conn that fails is
// closed and logged; nothing else waits for it.
func (l *streamListener) prepare(c net.Conn) {
	conn, err := l.handshake(c)
	if err != nil {
		_ = c.Close()
		if ce := l.log.Check(zap.InfoLevel, "refusing connection: handshake failed"); ce != nil {
			ce.Write(zap.Stringer("remote", c.RemoteAddr()), zap.Error(err))
		}
		return
	}
	if conn == nil {
		_ = c.Close() // an ACME challenge, answered
		return
	}
	if !l.h.give(conn) {
		_ = conn.Close()
	}
}

// handshake does the per-connection work before MQTT: the PROXY header from
// a trusted proxy, the TLS handshake. It returns nil, nil for an ACME
// TLS-ALPN-01 challenge, which carries no MQTT.
func (l *streamListener) handshake(c net.Conn) (net.Conn, error) {
	_ = c.SetDeadline(time.Now().Add(l.o.HandshakeTimeout))
	conn := c
	if l.o.ProxyProtocol && l.trusted.containsAddr(c.RemoteAddr()) {
		pc, err := readProxyHeader(c)
		if err != nil {
			return nil, err
		}
		conn = pc
	}
	if l.tlsConf != nil {
		tc := tls.Server(conn, l.tlsConf)
		if err := tc.Handshake(); err != nil {
			if isTimeout(err) {
				return nil, fmt.Errorf("TLS handshake not finished within %v: %w", l.o.HandshakeTimeout, err)
			}
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		state := tc.ConnectionState()
		if state.NegotiatedProtocol == alpnACME {
			return nil, nil
		}
		conn = &tlsConn{Conn: tc, identity: certIdentity(&state, l.o.IdentityAsUsername)}
	}
	_ = c.SetDeadline(time.Time{})
	return conn, nil
}

// countedConn frees its place under MaxConnections when closed.
type countedConn struct {
	net.Conn
	release func()
	once    sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// tlsConn is a server-side TLS conn with the client certificate's identity.
type tlsConn struct {
	*tls.Conn
	identity string
}

// CertIdentity returns the client certificate's identity when the listener
// uses it as the username, else "".
func (c *tlsConn) CertIdentity() string { return c.identity }

// Close sends close_notify when it can and closes the connection. Failing
// to tell a peer that is gone already is no error; closing twice is.
func (c *tlsConn) Close() error {
	if err := c.Conn.Close(); errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// isTemporary reports accept errors that pass: timeouts and running out of
// file descriptors.
func isTemporary(err error) bool {
	return isTimeout(err) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ECONNABORTED)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
