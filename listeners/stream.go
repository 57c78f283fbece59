package listeners

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
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
	fails     *failures // the handshake failures of this listener (and of a ws or wss listener around it)
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
		// The handshake fails with errNoIdentity, which prepare counts.
		tlsConf.VerifyConnection = requireIdentity(o.IdentityAsUsername, nil)
	}
	l := &streamListener{
		ln: ln, transport: transport, o: o, tlsConf: tlsConf, trusted: trusted, log: o.Log,
		fails: newFailures(transport, o.ProxyProtocol),
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

// HandshakeFailures counts the connections refused or lost before Accept.
func (l *streamListener) HandshakeFailures() map[string]int64 { return l.fails.snapshot() }

// Accept returns the next connection, ready to carry MQTT bytes.
func (l *streamListener) Accept() (net.Conn, error) {
	if !l.direct {
		return l.h.take(l.transport, l.ln.Addr())
	}
	// Direct: no handshake and no limit, so the socket itself is the conn.
	return l.ln.Accept()
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

// admit applies MaxConnections to a new socket: false means the listener
// is full and c is closed. An admitted conn holds its place until the conn
// made of it (tcpConn, tlsConn) is closed, or its handshake fails.
func (l *streamListener) admit(c net.Conn) bool {
	max := l.o.MaxConnections
	if max == 0 {
		return true
	}
	if n := l.live.Add(1); n > int64(max) {
		l.live.Add(-1)
		_ = c.Close()
		l.fails.add(FailMaxConnections)
		if ce := l.log.Check(zap.WarnLevel, "refusing connection: max connections reached"); ce != nil {
			ce.Write(zap.Stringer("remote", c.RemoteAddr()), zap.Int("max_connections", max))
		}
		return false
	}
	return true
}

// slot is what a conn frees on Close: its place under MaxConnections, if
// there is a limit.
func (l *streamListener) slot() *atomic.Int64 {
	if l.o.MaxConnections == 0 {
		return nil
	}
	return &l.live
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
		if l.admit(c) {
			go l.prepare(c.(*net.TCPConn))
		}
	}
}

// prepare reads the PROXY header and runs the TLS handshake of c under
// HandshakeTimeout, then hands the conn to Accept. A conn that fails is
// closed and logged; nothing else waits for it.
func (l *streamListener) prepare(c *net.TCPConn) {
	conn, err := l.handshake(c)
	if err != nil || conn == nil {
		_ = c.Close()
		if slot := l.slot(); slot != nil {
			slot.Add(-1)
		}
		if err == nil {
			return // an ACME challenge, answered
		}
		reason := handshakeFailure(err)
		l.fails.add(reason)
		if ce := l.log.Check(zap.InfoLevel, "refusing connection: handshake failed"); ce != nil {
			fields := []zap.Field{zap.Stringer("remote", c.RemoteAddr()), zap.String("reason", reason), zap.Error(err)}
			if h := handshakeHint(err); h != "" {
				fields = append(fields, zap.String("hint", h))
			}
			ce.Write(fields...)
		}
		return
	}
	if !l.h.give(conn) {
		_ = conn.Close()
	}
}

// handshake does the per-connection work before MQTT: the PROXY header from
// a trusted proxy, the TLS handshake. It returns the conn the listener
// hands out — a tcpConn or a tlsConn, built around the socket in one step
// — or nil, nil for an ACME TLS-ALPN-01 challenge, which carries no MQTT.
func (l *streamListener) handshake(c *net.TCPConn) (net.Conn, error) {
	_ = c.SetDeadline(time.Now().Add(l.o.HandshakeTimeout))
	var remote, local net.Addr
	if l.o.ProxyProtocol && l.trusted.containsAddr(c.RemoteAddr()) {
		src, dst, err := readProxyHeader(c)
		if err != nil {
			return nil, err
		}
		remote, local = src, dst
	}
	if l.tlsConf == nil {
		_ = c.SetDeadline(time.Time{})
		tc := &tcpConn{TCPConn: c}
		tc.meta.init(remote, local, l.slot())
		return tc, nil
	}
	sock := &tlsSocket{TCPConn: c}
	tc := tls.Server(sock, l.tlsConf)
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
	_ = c.SetDeadline(time.Time{})
	conn := &tlsConn{Conn: tc, sock: sock, identity: certIdentity(&state, l.o.IdentityAsUsername)}
	if rc, err := c.SyscallConn(); err == nil {
		conn.raw = rc
	}
	conn.meta.init(remote, local, l.slot())
	return conn, nil
}

// The conns a stream listener hands out. Each is built around the socket
// (or crypto/tls's conn over it) in one step, never a wrapper around
// another wrapper, and carries what the listener's options add — the
// addresses of a PROXY header, the place under MaxConnections — in its
// meta. So an option can never hide a capability the broker looks for
// behind a wrapper that forgets to forward it: tcpConn keeps every method
// of *net.TCPConn (SyscallConn: core's raw I/O and idle read-buffer
// release), tlsConn every method of *tls.Conn (ConnectionState) and its
// CertIdentity. Plain TCP without options is the bare *net.TCPConn.

// connMeta is what a listener's options add to a stream conn.
type connMeta struct {
	remote, local net.Addr      // from a PROXY header; nil: the socket's own
	slot          *atomic.Int64 // the listener's count under MaxConnections; nil: no limit
	freed         atomic.Bool
}

func (m *connMeta) init(remote, local net.Addr, slot *atomic.Int64) {
	m.remote, m.local, m.slot = remote, local, slot
}

// release frees the conn's place under MaxConnections, once.
func (m *connMeta) release() {
	if m.slot != nil && m.freed.CompareAndSwap(false, true) {
		m.slot.Add(-1)
	}
}

func (m *connMeta) addr(own, proxied net.Addr) net.Addr {
	if proxied != nil {
		return proxied
	}
	return own
}

// tcpConn is a plain TCP conn with what listener options add. It reads and
// writes the socket itself — the PROXY header was read to its last byte
// and no further (readProxyHeader) — so offering the socket to core
// (SyscallConn, promoted) is the same as using Read and Write.
type tcpConn struct {
	*net.TCPConn
	meta connMeta
}

func (c *tcpConn) RemoteAddr() net.Addr { return c.meta.addr(c.TCPConn.RemoteAddr(), c.meta.remote) }
func (c *tcpConn) LocalAddr() net.Addr  { return c.meta.addr(c.TCPConn.LocalAddr(), c.meta.local) }

// Close closes the socket and frees the conn's place.
func (c *tcpConn) Close() error {
	err := c.TCPConn.Close()
	c.meta.release()
	return err
}

// tlsConn is a server-side TLS conn with the client certificate's identity
// and what listener options add. It offers no socket for reads and writes
// (syscall.Conn): the socket carries TLS records, not MQTT bytes; but it
// offers it to wait on while idle (core.IdleSocket).
type tlsConn struct {
	*tls.Conn
	sock     *tlsSocket
	raw      syscall.RawConn // the TCP socket, for IdleSocket; nil if it has none
	identity string
	meta     connMeta
	peek     peeker
}

// WaitReadable waits until the peer sends something, without the caller
// holding a buffer meanwhile (core.ReadWaiter): crypto/tls cannot wait
// without reading, so it reads one byte, which the next Read returns.
func (c *tlsConn) WaitReadable() error { return c.peek.wait(c.Conn) }

func (c *tlsConn) Read(p []byte) (int, error) { return c.peek.read(c.Conn, p) }

// IdleSocket returns the TCP socket when no byte of the peer's is held
// above it, so the broker may wait on the socket instead of a goroutine
// waiting in crypto/tls (core.IdleSocket); nil otherwise. Nothing is held
// when the peeker holds no byte, the record reader under crypto/tls holds
// none and stands at a record boundary, and the last read of crypto/tls
// did not fill its buffer: crypto/tls then returned all it had decrypted,
// and it never received a byte past the record it decrypted
// (recordReader).
func (c *tlsConn) IdleSocket() syscall.RawConn {
	if c.raw == nil || !c.peek.drained() || !c.sock.rec.idle() {
		return nil
	}
	return c.raw
}

func (c *tlsConn) RemoteAddr() net.Addr { return c.meta.addr(c.Conn.RemoteAddr(), c.meta.remote) }
func (c *tlsConn) LocalAddr() net.Addr  { return c.meta.addr(c.Conn.LocalAddr(), c.meta.local) }

// CertIdentity returns the client certificate's identity when the listener
// uses it as the username, else "".
func (c *tlsConn) CertIdentity() string { return c.identity }

// Close sends close_notify if the socket takes it within
// closeWriteTimeout and closes the connection, freeing its place. Failing
// to tell a peer that is gone already is no error; closing twice is.
func (c *tlsConn) Close() error {
	c.sock.closing.Store(true)
	err := c.Conn.Close()
	c.meta.release()
	if errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// closeWriteTimeout bounds the courtesy writes of a close: TLS's
// close_notify, a WebSocket close frame. A peer whose socket takes nothing
// in this time is told nothing, and the socket is closed.
const closeWriteTimeout = 100 * time.Millisecond

// tlsSocket is the socket under a server-side TLS conn. crypto/tls writes
// close_notify under a write deadline of 5 seconds, which would hold a
// conn to a peer that reads nothing open that long after the broker closed
// it; once the conn is closing, tlsSocket cuts every write deadline to
// closeWriteTimeout.
//
// It also reads the socket for crypto/tls through a recordReader, never
// past the current record, so that an idle conn holds nothing above the
// socket (tlsConn.IdleSocket).
type tlsSocket struct {
	*net.TCPConn
	closing atomic.Bool
	rec     recordReader // the reader's only
}

func (s *tlsSocket) Read(p []byte) (int, error) { return s.rec.read(s.TCPConn, p) }

func (s *tlsSocket) SetWriteDeadline(t time.Time) error {
	if s.closing.Load() {
		if limit := time.Now().Add(closeWriteTimeout); t.IsZero() || t.After(limit) {
			t = limit
		}
	}
	return s.TCPConn.SetWriteDeadline(t)
}

// peeker lets a conn wait for bytes by reading one, for a reader that
// gives its buffer back while it waits (core.ReadWaiter). Its methods are
// the conn's reader's only: one reader at a time, as net.Conn allows.
type peeker struct {
	b    [1]byte
	have bool
	full bool // the last read of r filled its buffer: r may hold more
}

// wait reads one byte from r into the peeker, unless it holds one.
func (k *peeker) wait(r io.Reader) error {
	if k.have {
		return nil
	}
	n, err := r.Read(k.b[:])
	k.have = n == 1
	k.full = k.have
	if k.have {
		return nil
	}
	return err
}

// read returns the byte wait read, if any, else reads from r. It does not
// read on after the byte: that could wait while the byte is held back.
func (k *peeker) read(r io.Reader, p []byte) (int, error) {
	if k.have && len(p) > 0 {
		p[0], k.have = k.b[0], false
		return 1, nil
	}
	n, err := r.Read(p)
	k.full = n == len(p) && n > 0
	return n, err
}

// drained reports whether the peeker holds no byte and r, as far as the
// peeker's reads tell, returned all it had: its last read did not fill its
// buffer. (A read that failed returned nothing: crypto/tls fails only
// while it holds no decrypted byte, and a record it read in part is the
// record reader's to tell.)
func (k *peeker) drained() bool { return !k.have && !k.full }

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
