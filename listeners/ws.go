package listeners

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/zap"
)

// wsListener serves MQTT over WebSocket (ws) and over WebSocket on TLS
// (wss). A streamListener accepts the TCP connections (PROXY header, TLS
// handshake, MaxConnections); an http.Server reads each request; the
// handler checks path, subprotocol and origin, upgrades, hands the conn to
// Accept and returns, so the HTTP server keeps nothing of it.
type wsListener struct {
	inner     *streamListener
	transport string
	o         Options
	srv       *http.Server
	h         *handoff
	upgrader  websocket.Upgrader
	origins   *originPolicy
	trusted   prefixes
	log       *zap.Logger
	closeOnce sync.Once
	closeErr  error
	serveDone chan struct{}
}

// connKey keys the accepted net.Conn in a request's context.
type connKey struct{}

func listenWS(o Options) (Listener, error) {
	var tlsConf *tls.Config
	if o.Transport == TransportWSS {
		tlsConf = withALPN(o.TLS, ALPNHTTP)
	}
	inner, err := newStream(o, o.Transport, tlsConf)
	if err != nil {
		return nil, err
	}
	trusted, _ := parsePrefixes(o.TrustedProxies)
	l := &wsListener{
		inner: inner, transport: o.Transport, o: o, h: newHandoff(), origins: newOriginPolicy(&o), trusted: trusted,
		log: o.Log, serveDone: make(chan struct{}),
	}
	l.upgrader = websocket.Upgrader{
		Subprotocols: Subprotocols,
		// gorilla reads frames through the hijacked reader, which
		// hijacker makes ours: 512 bytes rather than the HTTP server's
		// 4 KiB (larger payloads are read straight into the caller's
		// buffer anyway), and one whose Buffered the conn can ask
		// (IdleSocket). The write buffer comes from a pool for each
		// message, so an idle conn holds none.
		WriteBufferPool: &sync.Pool{},
		// The 101 response is written under a deadline, like every write.
		HandshakeTimeout: o.HandshakeTimeout,
		// ServeHTTP has checked the origin, with a refusal that says what
		// to configure.
		CheckOrigin: func(*http.Request) bool { return true },
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			l.refuse(w, r, FailWSRequest, status, reason.Error())
		},
	}
	l.srv = &http.Server{
		Handler:           l,
		ReadHeaderTimeout: o.HandshakeTimeout,
		// Refusals are written under a deadline too: a client that sends
		// requests and reads no answer cannot hold a handler.
		WriteTimeout:   o.HandshakeTimeout,
		IdleTimeout:    o.HandshakeTimeout,
		MaxHeaderBytes: 16 << 10,
		ErrorLog:       zap.NewStdLog(o.Log.WithOptions(zap.IncreaseLevel(zap.WarnLevel))),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	go func() {
		defer close(l.serveDone)
		_ = l.srv.Serve(wsNetListener{inner})
	}()
	return l, nil
}

func (l *wsListener) Transport() string { return l.transport }
func (l *wsListener) Addr() net.Addr    { return l.inner.Addr() }

// HandshakeFailures counts the connections refused or lost before Accept:
// the TCP side's (connection limit, PROXY header, TLS) and the HTTP
// requests that did not become a WebSocket.
func (l *wsListener) HandshakeFailures() map[string]int64 { return l.inner.HandshakeFailures() }

// Accept returns the next upgraded WebSocket connection.
func (l *wsListener) Accept() (net.Conn, error) {
	return l.h.take(l.transport, l.inner.Addr())
}

// Close stops accepting: the HTTP server, the TCP listener and every
// connection not yet returned by Accept (mid-request or upgraded). Conns
// returned by Accept belong to the caller. Idempotent.
func (l *wsListener) Close() error {
	l.closeOnce.Do(func() {
		l.h.stop(closedError(l.transport, l.inner.Addr()))
		l.closeErr = l.srv.Close()
		_ = l.inner.Close()
		<-l.serveDone
	})
	return l.closeErr
}

// ServeHTTP checks and upgrades one request.
func (l *wsListener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != l.o.Path && l.o.Path != AnyPath {
		l.refuse(w, r, FailWSPath, http.StatusNotFound, fmt.Sprintf("no MQTT endpoint at %s (try %s)", r.URL.Path, l.o.Path))
		return
	}
	if !websocket.IsWebSocketUpgrade(r) {
		l.refuse(w, r, FailWSRequest, http.StatusBadRequest, "this is an MQTT over WebSocket endpoint: open a WebSocket with subprotocol mqtt")
		return
	}
	if !offersSubprotocol(r) {
		l.refuse(w, r, FailWSSubprotocol, http.StatusBadRequest, fmt.Sprintf("WebSocket subprotocol %q refused: want mqtt or mqttv3.1 [MQTT-6.0.0-3]",
			strings.Join(websocket.Subprotocols(r), ", ")))
		return
	}
	origin := r.Header.Get("Origin")
	cross, ok := l.origins.check(origin, r.Host)
	if !ok {
		hint := fmt.Sprintf("add %q to allowed_origins of listener %s", origin, l.o.Name)
		l.inner.fails.add(FailWSOrigin)
		if ce := l.log.Check(zap.WarnLevel, "refusing websocket request: origin not allowed"); ce != nil {
			ce.Write(zap.String("remote", r.RemoteAddr), zap.String("origin", origin), zap.String("host", r.Host),
				zap.Strings("allowed_origins", l.o.AllowedOrigins), zap.String("to_allow", hint))
		}
		writeRefusal(w, http.StatusForbidden, fmt.Sprintf("origin %s not allowed: %s", origin, hint))
		return
	}
	hj := &hijacker{ResponseWriter: w}
	ws, err := l.upgrader.Upgrade(hj, r, nil)
	if err != nil {
		return // Upgrade answered the client and Error logged it
	}
	raw, _ := r.Context().Value(connKey{}).(net.Conn)
	nc, _ := raw.(*wsNetConn)
	if nc == nil {
		_ = ws.Close() // not served by wsNetListener: cannot happen
		return
	}
	nc.frames()
	c := newWSConn(ws, nc, l.clientAddr(r, ws.RemoteAddr()), l.log)
	c.br = hj.br
	// Without TLS between, the socket carries the frames as gorilla reads
	// them: the broker may wait on it while nothing is buffered.
	if sc, ok := nc.Conn.(syscall.Conn); ok && hj.br != nil {
		if rc, err := sc.SyscallConn(); err == nil {
			c.sock = rc
		}
	} else if ts, ok := nc.Conn.(socketIdler); ok && hj.br != nil {
		// Under wss, TLS between: the socket is idle when the TLS conn
		// says nothing is held above it.
		c.tlsIdle = ts
	}
	c.cross = cross
	// The TCP side's conn carries what TLS learned.
	if ts, ok := nc.Conn.(TLSStater); ok {
		c.tls = ts
	}
	if ci, ok := nc.Conn.(CertIdentifier); ok {
		c.identity = ci.CertIdentity()
	}
	if !l.h.give(c) {
		_ = c.Close()
	}
}

// hijacker gives gorilla, in place of the HTTP server's 4 KiB reader, a
// 512-byte one the conn keeps (wsConn.br). gorilla refuses a connection
// whose hijacked reader holds bytes (sent before the handshake finished),
// so nothing is lost in the swap.
type hijacker struct {
	http.ResponseWriter
	br *bufio.Reader
}

func (h *hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := h.ResponseWriter.(http.Hijacker).Hijack()
	if err != nil || brw.Reader.Buffered() > 0 {
		return conn, brw, err // gorilla refuses it
	}
	h.br = bufio.NewReaderSize(conn, 512)
	return conn, bufio.NewReadWriter(h.br, brw.Writer), nil
}

// refuse answers a request that does not become a WebSocket, counts it
// under reason and logs why.
func (l *wsListener) refuse(w http.ResponseWriter, r *http.Request, reason string, status int, why string) {
	l.inner.fails.add(reason)
	if ce := l.log.Check(zap.InfoLevel, "refusing websocket request"); ce != nil {
		ce.Write(zap.String("remote", r.RemoteAddr), zap.String("path", r.URL.Path), zap.Int("status", status),
			zap.String("why", why), zap.String("origin", r.Header.Get("Origin")))
	}
	writeRefusal(w, status, why)
}

// writeRefusal answers a request that does not become a WebSocket.
func writeRefusal(w http.ResponseWriter, status int, why string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, "xmq: "+why+"\n")
}

// offersSubprotocol reports whether the client asked for an MQTT subprotocol.
func offersSubprotocol(r *http.Request) bool {
	for _, p := range websocket.Subprotocols(r) {
		if contains(Subprotocols, p) {
			return true
		}
	}
	return false
}

// clientAddr is the peer, or the client a trusted proxy names in
// Forwarded or X-Forwarded-For: the right-most address that is not itself a
// trusted proxy.
func (l *wsListener) clientAddr(r *http.Request, peer net.Addr) net.Addr {
	if !l.trusted.containsAddr(peer) {
		return peer
	}
	var chain []netip.Addr
	for _, v := range r.Header.Values("Forwarded") {
		for elem := range strings.SplitSeq(v, ",") {
			for pair := range strings.SplitSeq(elem, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if !ok || !strings.EqualFold(k, "for") {
					continue
				}
				if a, ok := parseForwardedAddr(strings.Trim(val, `"`)); ok {
					chain = append(chain, a)
				}
			}
		}
	}
	if len(chain) == 0 {
		for _, v := range r.Header.Values("X-Forwarded-For") {
			for s := range strings.SplitSeq(v, ",") {
				if a, ok := parseForwardedAddr(strings.TrimSpace(s)); ok {
					chain = append(chain, a)
				}
			}
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		if !l.trusted.contains(chain[i]) || i == 0 {
			return net.TCPAddrFromAddrPort(netip.AddrPortFrom(chain[i], 0))
		}
	}
	return peer
}

// parseForwardedAddr reads "192.0.2.1", "[2001:db8::1]", "192.0.2.1:4711"
// or "[2001:db8::1]:4711"; obfuscated names ("unknown", "_hidden") fail.
func parseForwardedAddr(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	return a.Unmap(), err == nil
}

// wsNetListener wraps the TCP side's conns in wsNetConn for the HTTP server.
type wsNetListener struct{ *streamListener }

func (l wsNetListener) Accept() (net.Conn, error) {
	c, err := l.streamListener.Accept()
	if err != nil {
		return nil, err
	}
	nc := &wsNetConn{Conn: c}
	if sc, ok := c.(syscall.Conn); ok && rawSocketIO {
		if rc, err := sc.SyscallConn(); err == nil {
			nc.sock = rc
		}
	}
	return nc, nil
}

// wsNetConn is the net.Conn under a websocket.Conn. Until the upgrade it
// is the HTTP server's, deadlines and all. From then on (framed) gorilla
// sets a write deadline before every frame it writes: its own field for
// data frames, which wsNetConn keeps zero because it is not safe to change
// while a write is in progress, and a short one for the control frames it
// writes by itself (pongs, close replies). The conn's owner sets the real
// write deadline with setOwnerWriteDeadline, from any goroutine. The
// socket gets the earlier of the two, so every write has a deadline: a
// peer that sends pings and reads nothing cannot hold the reader, which
// answers them, in a pong write past controlWriteTimeout.
type wsNetConn struct {
	net.Conn
	sock syscall.RawConn // plain TCP on Linux: read and written with raw system calls (wsnow_linux.go)

	mu      sync.Mutex // guards the fields below
	framed  bool       // upgraded: gorilla's SetWriteDeadline is per frame
	owner   time.Time  // the owner's write deadline
	frame   time.Time  // gorilla's deadline for the frame it writes next
	applied time.Time  // the socket's write deadline, once framed
}

func (c *wsNetConn) Read(p []byte) (int, error) {
	if c.sock != nil {
		return readSocket(c.sock, p)
	}
	return c.Conn.Read(p)
}

func (c *wsNetConn) Write(p []byte) (int, error) {
	if c.sock != nil {
		return writeSocket(c.sock, p)
	}
	return c.Conn.Write(p)
}

// frames marks the upgrade done: from now on SetWriteDeadline is gorilla's,
// per frame.
func (c *wsNetConn) frames() {
	c.mu.Lock()
	c.framed = true
	c.mu.Unlock()
}

func (c *wsNetConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.framed {
		return c.Conn.SetWriteDeadline(t)
	}
	c.frame = t
	return c.applyLocked()
}

func (c *wsNetConn) SetDeadline(t time.Time) error {
	return errors.Join(c.Conn.SetReadDeadline(t), c.SetWriteDeadline(t))
}

// setOwnerWriteDeadline sets the write deadline of the conn's owner (core).
func (c *wsNetConn) setOwnerWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owner = t
	return c.applyLocked()
}

// applyLocked gives the socket the earlier of the owner's and the frame's
// deadline (zero is none). It skips the call when the socket has it
// already, which is the common case: one data frame after another under
// the same owner deadline.
func (c *wsNetConn) applyLocked() error {
	d := c.owner
	if d.IsZero() || (!c.frame.IsZero() && c.frame.Before(d)) {
		d = c.frame
	}
	if d.Equal(c.applied) {
		return nil
	}
	c.applied = d
	return c.Conn.SetWriteDeadline(d)
}

// wsConn carries MQTT bytes over a WebSocket: Read continues across
// binary messages (a packet may span messages, a message may hold many
// packets), each Write is one binary message.
//
// It diverges from a TCP conn in what gorilla/websocket cannot undo: after
// a read deadline passes, or a write fails, that direction stays broken.
// MQTT needs neither: core closes the connection on either.
type wsConn struct {
	ws       *websocket.Conn
	nc       *wsNetConn // for deadlines
	remote   net.Addr
	log      *zap.Logger
	tls      TLSStater // the TLS conn under wss, else nil
	identity string
	cross    string // the Origin of a foreign page, else ""

	rmu     sync.Mutex      // one reader at a time; guards r and readErr
	r       io.Reader       // the message being read, nil between messages
	readErr error           // gorilla's reads fail for good after an error: the first one, kept
	br      *bufio.Reader   // gorilla's frame reader (hijacker), nil if gorilla made its own
	sock    syscall.RawConn // the TCP socket under ws; nil under wss (TLS buffers)
	tlsIdle socketIdler     // the TLS conn under wss, which tells when its socket is idle; nil under ws

	// wmu: one writer at a time, gorilla's and the in-place frames'
	// (wsnow.go). Guards the frame a WriteNow left unfinished: the rest of
	// its header and how many payload bytes the next Write owes it.
	wmu         sync.Mutex
	owedHeader  []byte
	owedPayload int

	closeOnce sync.Once
}

func newWSConn(ws *websocket.Conn, nc *wsNetConn, remote net.Addr, log *zap.Logger) *wsConn {
	c := &wsConn{ws: ws, nc: nc, remote: remote, log: log}
	ws.SetPingHandler(c.answerPing)
	// gorilla's own answer to a close frame, through wmu as every write.
	ws.SetCloseHandler(func(code int, _ string) error {
		_ = c.writeControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), controlWriteTimeout)
		return nil
	})
	return c
}

// errWriterBusy is a control frame not sent because a write held the conn.
var errWriterBusy = errors.New("listeners: websocket writer busy")

// controlWriteTimeout bounds the write of a pong, which the reader sends
// on its own. (The conn's write deadline bounds it too, when that is
// earlier; see wsNetConn. gorilla's close reply has a second of its own.)
const controlWriteTimeout = time.Second

// errPongStalled ends the reads of a peer that sends pings and reads nothing.
var errPongStalled = errors.New("listeners: websocket peer sends pings but takes no pong")

// answerPing answers a ping with a pong, within controlWriteTimeout. A
// pong that found the writer busy with a message is dropped (that write
// has its own deadline); one the socket did not take in time ends the
// connection: the read fails with errPongStalled, not a timeout, so the
// broker does not take it for a keepalive timeout. Runs on the reader.
func (c *wsConn) answerPing(data string) error {
	err := c.writeControl(websocket.PongMessage, []byte(data), controlWriteTimeout)
	var te interface{ Temporary() bool }
	switch {
	case err == nil, errors.Is(err, websocket.ErrCloseSent), errors.Is(err, errWriterBusy):
		return nil // (busy: a message is being written, with its own deadline; no pong this time)
	case errors.As(err, &te) && te.Temporary():
		return nil // gorilla's write lock was busy: no pong this time
	}
	c.log.Info("closing connection: websocket peer takes no pong", zap.Stringer("remote", c.remote), zap.Error(err))
	return fmt.Errorf("%w (%v)", errPongStalled, err) // not %w: a write timeout is no read deadline
}

// socketIdler is a conn that tells when the broker may wait on its socket
// (core.IdleSocket): the TLS conn under wss.
type socketIdler interface{ IdleSocket() syscall.RawConn }

// IdleSocket returns the socket when nothing read from it waits in a
// buffer and no message is being read: the broker may then wait on the
// socket itself instead of a reader goroutine waiting in gorilla (the
// next bytes begin a frame). nil otherwise. Under wss, the TLS conn must
// hold nothing either (tlsConn.IdleSocket).
func (c *wsConn) IdleSocket() syscall.RawConn {
	if c.sock == nil && c.tlsIdle == nil {
		return nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.readErr != nil || c.endMessage() != nil || c.r != nil || c.br.Buffered() > 0 {
		return nil
	}
	if c.sock == nil {
		return c.tlsIdle.IdleSocket()
	}
	return c.sock
}

// endMessage forgets a message read to its end: an empty read tells,
// without waiting for a payload byte (it waits only for the header of a
// fragmented message's next frame); c.rmu is held.
func (c *wsConn) endMessage() error {
	if c.r == nil {
		return nil
	}
	if _, err := c.r.Read(nil); errors.Is(err, io.EOF) {
		c.r = nil
	} else if err != nil {
		c.readErr = wsReadError(err)
		return c.readErr
	}
	return nil
}

// WaitReadable waits until a message has begun (or goes on) and has bytes
// to read, without taking any: the broker need not hold a read buffer while
// the peer is silent. It honours the read deadline as Read does.
func (c *wsConn) WaitReadable() error {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.readErr != nil {
		return c.readErr
	}
	// The message may be read to its end without Read having seen io.EOF.
	if err := c.endMessage(); err != nil {
		return err
	}
	return c.nextMessage()
}

// nextMessage starts reading the next message unless one is being read;
// c.rmu is held.
func (c *wsConn) nextMessage() error {
	if c.r != nil {
		return nil
	}
	typ, r, err := c.ws.NextReader()
	if err != nil {
		c.readErr = wsReadError(err)
		return c.readErr
	}
	if typ != websocket.BinaryMessage {
		c.log.Info("closing connection: websocket text frame [MQTT-6.0.0-1]", zap.Stringer("remote", c.remote))
		c.closeWith(websocket.CloseUnsupportedData, "MQTT over WebSocket takes binary frames only")
		c.readErr = ErrTextFrame
		return c.readErr
	}
	c.r = r
	return nil
}

func (c *wsConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.readErr != nil {
		return 0, c.readErr
	}
	for {
		if err := c.nextMessage(); err != nil {
			return 0, err
		}
		n, err := c.r.Read(p)
		if errors.Is(err, io.EOF) {
			c.r = nil // the message ended; the stream goes on
			if n > 0 {
				return n, nil
			}
			continue
		}
		if err != nil {
			c.readErr = wsReadError(err)
			return n, c.readErr
		}
		return n, nil
	}
}

// wsReadError turns a peer's normal close into io.EOF.
func wsReadError(err error) error {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		switch ce.Code {
		case websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived:
			return io.EOF
		}
		return fmt.Errorf("listeners: websocket closed by peer: %w", err)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return io.EOF // the peer closed the TCP connection without a close frame
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		// gorilla hides the deadline error's identity; the broker tells a
		// keepalive timeout by os.ErrDeadlineExceeded, as on TCP.
		return os.ErrDeadlineExceeded
	}
	return err
}

// Write sends p as one binary message, after finishing the frame a
// WriteNow left unfinished (p then begins with what that frame owes).
func (c *wsConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n := 0
	if c.owedPayload > 0 {
		var err error
		if n, err = c.finishFrame(p); err != nil || n == len(p) {
			return n, err
		}
	}
	if err := c.ws.WriteMessage(websocket.BinaryMessage, p[n:]); err != nil {
		return n, err
	}
	return len(p), nil
}

// Close sends a normal close frame if it can at once and closes the
// connection. Failing to tell a peer that is gone already is no error.
func (c *wsConn) Close() error {
	c.closeWith(websocket.CloseNormalClosure, "")
	return nil
}

func (c *wsConn) closeWith(code int, text string) {
	c.closeOnce.Do(func() {
		_ = c.writeControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), closeWriteTimeout)
		_ = c.ws.Close()
	})
}

func (c *wsConn) LocalAddr() net.Addr  { return c.ws.LocalAddr() }
func (c *wsConn) RemoteAddr() net.Addr { return c.remote }

func (c *wsConn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}

func (c *wsConn) SetReadDeadline(t time.Time) error { return c.ws.SetReadDeadline(t) }

func (c *wsConn) SetWriteDeadline(t time.Time) error {
	if c.nc == nil {
		return nil
	}
	return c.nc.setOwnerWriteDeadline(t)
}

// CertIdentity returns the client certificate's identity when the listener
// uses it as the username, else "".
func (c *wsConn) CertIdentity() string { return c.identity }

// ConnectionState returns the TLS state under wss; the zero value under ws.
func (c *wsConn) ConnectionState() tls.ConnectionState {
	if c.tls == nil {
		return tls.ConnectionState{}
	}
	return c.tls.ConnectionState()
}

// CrossOrigin returns the Origin of the browser page that opened the
// connection when that page is foreign, else "" (CrossOriginer).
func (c *wsConn) CrossOrigin() string { return c.cross }

// Subprotocol returns the negotiated WebSocket subprotocol.
func (c *wsConn) Subprotocol() string { return c.ws.Subprotocol() }
