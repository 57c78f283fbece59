package core

import (
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/xmq-io/xmq/codec"
)

// client is one network connection speaking MQTT. Whoever holds the
// reading state (pstate: a reader goroutine, or none while the connection
// is parked) reads and handles its packets; whoever holds writing (a writer
// job running writeLoop, or a reader writing in place, inline.go) is the
// only one that writes to conn. doc.go has the goroutine model, LOCKS.md
// the locks.
//
// Its size is on purpose. The fields are grouped below by who may touch
// them (set at CONNECT, reader-owned, writer-owned, atomics, c.mu); each
// group is read on every packet, so none goes behind a pointer of its own
// (a chase per packet), and the few fields few connections use already do
// (clientExtra). Its methods are the connection's jobs, each in its file:
// reading and writing (client.go), parking (park.go), writing in place
// (inline.go), held acknowledgements (acks.go), PUBLISH's stages
// (publish.go), SUBSCRIBE (subscribe.go), authentication (auth.go).
type client struct {
	srv      *Server
	conn     net.Conn
	listener string
	r        *codec.Reader
	// raw reads and writes the socket with raw system calls
	// (rawio_linux.go) and waits for readability without a read buffer;
	// nil unless conn offers its socket (syscall.Conn) on Linux. A conn
	// offers it only when using the socket is the same as its Read and
	// Write: plain TCP, through any listener option, never TLS or
	// WebSocket.
	raw syscall.RawConn

	// Set once during CONNECT, read-only afterwards. (Fields are ordered
	// so that small ones share words: a client is allocated per connection.)
	id          string
	username    string
	keepAlive   time.Duration
	window      int // outbound inflight limit: min(MaxInflight, client's Receive Maximum)
	sess        *session
	connectedAt int64  // Unix nanoseconds
	maxOut      uint32 // client's Maximum Packet Size, 0 = none
	aliasMaxOut uint16 // client's Topic Alias Maximum
	version     byte
	// extra holds what few connections use; nil for the others
	// (clientExtra).
	extra *clientExtra
	// takenElsewhere is set when a connection on another node took the
	// client id over (Server.TakeOver): the client is back, so a will
	// waiting for its delay is not sent [MQTT-3.1.3-9].
	takenElsewhere atomic.Bool
	// bridge marks a 3.1/3.1.1 client that set Mosquitto's bridge bit
	// (codec.BridgeBit): its subscriptions get No Local and Retain As
	// Published, as an MQTT 5 bridge asks for them.
	bridge bool
	// inPlace marks a conn without a raw socket that can write in place
	// all the same (NowWriter: WebSocket over TCP); set by newClient.
	inPlace bool

	// Reader-owned: by whoever holds the reading state (pstate, park.go).
	peek      [1]byte      // waitReadable's MSG_PEEK target
	parkable  bool         // past CONNECT on a raw socket with a poller: reads never wait, the reader parks
	resumed   bool         // woken from a park on an IdleSocket: read before parking again
	shortRead bool         // the last read did not fill the buffer: it emptied the socket
	burst     int          // packets handled since the reader last could wait (inline.go)
	dirty     []*client    // subscribers given deliveries in this burst (inline.go)
	padded    bool         // the socket is in the poller's epoll set
	pslot     int32        // the poller slot, -1 before the first park
	pgen      int32        // the slot's generation when it was taken
	kaAdded   bool         // in the keepalive wheel (keepalive.go)
	needSync  bool         // this connection wrote to the store since its last Sync
	limiter   *rateLimiter // nil without MaxMessageRate and MaxByteRate
	matches   []match
	acks      []pendingAck // acknowledgements waiting for a store Sync (acks.go)
	// syncQueued counts this connection's batches with the syncer; while
	// any is, later acknowledgements queue behind them to keep their order.
	syncQueued atomic.Int32
	// msgsIn and bytesIn count the PUBLISH packets and bytes read, for the
	// admin views; only the reader adds to them (one uncontended add each),
	// views load them.
	msgsIn, bytesIn atomic.Int64

	// Writer-owned.
	subID      [1]uint32
	outAliases map[string]uint16
	ws         *writeScratch // while a writer runs; nil when idle (getScratch)
	// msgsOut and bytesOut count the PUBLISH packets and bytes written,
	// for the admin views; only the writer adds to them.
	msgsOut, bytesOut atomic.Int64

	// Flags rather than channels: three channels were 288 bytes of every
	// idle connection.
	pending     atomic.Bool   // the writer has work (wake)
	flushQueued atomic.Bool   // a reader will write or wake for c at its burst's end (inline.go)
	closing     atomic.Bool   // set by close: the writer flushes and shuts the conn
	done        chan struct{} // made by close, closed when the last writer has exited
	writing     atomic.Bool   // a writer goroutine runs (startWriter)
	pstate      atomic.Int32  // reading or parked (park.go)
	kaDue       atomic.Int64  // the keepalive wheel's tick after which a parked connection is closed
	kaSlot      int32         // the wheel slot holding c, -1 none; guarded by the wheel's mu
	kaPos       int32         // c's index in that slot; guarded by the wheel's mu

	mu        sync.Mutex // guards ctrl, reason and connected
	reason    CloseReason
	connected bool
	ctrl      []byte // encoded control packets waiting for the writer
	closeOnce sync.Once

	// trace is nil unless a running trace follows this connection
	// (trace.go); set at CONNECT and when a trace starts or stops.
	trace atomic.Pointer[tracer]
}

// clientExtra is the part of a client that few connections use: a will,
// enhanced authentication, incoming topic aliases, a login that ends, a
// cluster claim. It is made during CONNECT (more), when a connection needs
// one of them, and fixed afterwards, so the other goroutines read it as
// they read the rest of what CONNECT set. Without it a client is 448 bytes
// rather than 576 (the allocation size classes): most idle connections
// need none of it.
type clientExtra struct {
	will       *Message
	willExpiry time.Duration // the will's Message Expiry Interval, 0 = none
	willDelay  uint32
	willStored bool   // the will is in the store while connected (attach)
	reauthing  bool   // a re-authentication exchange is under way (reader-owned)
	authMethod string // MQTT 5 enhanced authentication method agreed at CONNECT
	reauth     any    // enhanced-auth state during re-authentication (reader-owned)
	inAliases  []string
	// claim is this connection's hold on its client id cluster-wide
	// (Cluster.Claim), 0 without a cluster.
	claim uint64
	// expiry closes the connection when its login ends
	// (LoginAuthenticator); nil for a login without an end.
	expiry *time.Timer
}

// more is c.extra, made on first use; only during CONNECT.
func (c *client) more() *clientExtra {
	if c.extra == nil {
		c.extra = new(clientExtra)
	}
	return c.extra
}

// noExtra is what rare reads for a client without extra: never written.
var noExtra clientExtra

// rare is c.extra, or a zero one without it, for reading only: writes go
// through more.
func (c *client) rare() *clientExtra {
	if c.extra == nil {
		return &noExtra
	}
	return c.extra
}

func newClient(srv *Server, conn net.Conn, listener string) *client {
	c := &client{
		srv: srv, conn: conn, listener: listener, pslot: -1, kaSlot: -1,
	}
	c.raw = rawConnOf(conn)
	if nw, ok := conn.(NowWriter); ok && c.raw == nil {
		c.inPlace = nw.WritesNow()
	}
	c.r = codec.NewPooledReader(countingReader{c}, &srv.bufs.read, srv.opts.MaxPacketSize)
	c.r.MaxUserProperties = srv.opts.MaxUserProperties
	return c
}

// remoteAddr is the peer's address for logs and views; not kept as a
// string, which would cost every connection its bytes.
func (c *client) remoteAddr() string {
	if a := c.conn.RemoteAddr(); a != nil {
		return a.String()
	}
	return ""
}

// log writes one log line with the connection's remote address, listener
// and, once known, client id. The fields are added per line rather than
// with a zap clone kept per connection (about 2 KB each): most connections
// log only when they start and end.
func (c *client) log(lvl zapcore.Level, msg string, fields ...zap.Field) {
	ce := c.srv.log.Check(lvl, msg)
	if ce == nil {
		return
	}
	fields = append(fields, zap.String("remote", c.remoteAddr()), zap.String("listener", c.listener))
	if c.id != "" && !slices.ContainsFunc(fields, func(f zap.Field) bool { return f.Key == "client_id" }) {
		fields = append(fields, zap.String("client_id", c.id))
	}
	ce.Write(fields...)
}

// waitReadable gives the read buffer back to the pool and waits until the
// socket has bytes (or EOF, an error or the read deadline), so an idle
// connection holds no read buffer: on a socket through Go's poller, on a
// conn that can wait itself (ReadWaiter: WebSocket) through it. It is
// called only with nothing buffered.
func (c *client) waitReadable() error {
	if c.raw == nil {
		if w, ok := c.conn.(ReadWaiter); ok {
			c.r.Release()
			return w.WaitReadable()
		}
		return nil
	}
	return c.waitRawReadable() // rawio_linux.go
}

// countingReader counts received bytes for $SYS; on plain TCP it reads
// with a raw system call (rawio_linux.go), which on a parkable connection never
// waits: an empty socket is codec.ErrWouldBlock, and the reader parks.
type countingReader struct{ c *client }

func (r countingReader) Read(p []byte) (n int, err error) {
	c := r.c
	switch {
	case c.parkable:
		n, err = rawReadNow(c.raw, p)
		c.shortRead = n < len(p)
	case c.raw != nil:
		n, err = rawRead(c.raw, p)
	default:
		n, err = c.conn.Read(p)
	}
	c.srv.stats.bytesIn.Add(int64(n))
	c.bytesIn.Add(int64(n))
	return n, err
}

// wake tells the writer there is work, starting one if none runs.
func (c *client) wake() {
	c.pending.Store(true)
	c.startWriter()
}

// bufPools are the server's buffers that connections borrow.
type bufPools struct {
	// read holds the connections' read buffers (*bufio.Reader of
	// Options.ReadBufferSize): a TCP connection waiting for its next
	// packet gives its buffer back (client.waitReadable).
	read sync.Pool
	// write holds writers' scratch (*writeScratch), lent to a connection
	// while it writes (client.getScratch).
	write sync.Pool
}

// writeScratch is what a writer works with: the write buffer, the batch of
// deliveries taken from the session, and the PUBLISH value it encodes them
// with. It is lent from srv.bufs.write while a writer runs, so an idle
// connection keeps none of it — nor the sizes a burst grew it to.
type writeScratch struct {
	buf      []byte
	tail     []byte // of buf, what an in-place write left for a writer (inline.go)
	batch    []outMsg
	retained []*Message // a batch of a retained stream (stream.go), cleared after use
	pub      codec.Publish
}

// getScratch lends c its writer's scratch. Writer only (whoever holds
// c.writing).
func (c *client) getScratch() *writeScratch {
	if c.ws == nil {
		c.ws = c.srv.bufs.write.Get().(*writeScratch)
	}
	return c.ws
}

// putScratch gives the scratch back; a buffer grown past maxPooledWbuf by
// a large burst is left to the GC. Writer only.
func (c *client) putScratch() {
	ws := c.ws
	if ws == nil {
		return
	}
	c.ws = nil
	if cap(ws.buf) > maxPooledWbuf {
		ws.buf = nil
	}
	ws.buf, ws.batch, ws.tail, ws.retained = ws.buf[:0], ws.batch[:0], nil, ws.retained[:0]
	ws.pub = codec.Publish{}
	c.srv.bufs.write.Put(ws)
}

const maxPooledWbuf = 64 << 10

// startWriter starts the writer goroutine unless one runs. The writer
// exits when it finds nothing to do, so an idle connection has only its
// reader goroutine; writing stays with one goroutine at a time.
func (c *client) startWriter() {
	if c.writing.CompareAndSwap(false, true) {
		c.srv.workers.run(job{c, jobWrite})
	}
}

// send queues a control packet for the writer.
func (c *client) send(p codec.Packet) {
	c.mu.Lock()
	c.ctrl = p.Append(c.ctrl, c.version)
	c.mu.Unlock()
	c.srv.stats.ctrlOut.Add(1)
	c.wake()
}

// close starts closing the connection for reason. For an MQTT 5 client
// past CONNECT a non-zero rc is sent in a DISCONNECT first [MQTT-4.13.2-1].
// Safe from any goroutine; only the first call counts.
func (c *client) close(reason CloseReason, rc codec.ReasonCode) { c.closeWhy(reason, rc, "") }

// closeWhy is close with a Reason String for the MQTT 5 DISCONNECT, which
// may carry one whatever Request Problem Information says [MQTT-3.1.2-29].
func (c *client) closeWhy(reason CloseReason, rc codec.ReasonCode, why string) {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.reason = reason
		if rc != 0 && c.connected && c.version == codec.V5 {
			d := &codec.Disconnect{ReasonCode: rc}
			d.Props.ReasonString = []byte(why)
			c.ctrl = d.Append(c.ctrl, c.version)
			c.srv.stats.ctrlOut.Add(1)
		}
		// A writer stuck on a full socket gives up soon instead of at
		// WriteTimeout. Both happen under c.mu, where flush sets its own
		// deadline only while closing is open, so it cannot undo this one.
		_ = c.conn.SetWriteDeadline(time.Now().Add(time.Second))
		c.done = make(chan struct{}) // before closing is seen set
		c.closing.Store(true)
		c.mu.Unlock()
		c.startWriter() // for the last flush, closing conn and done
		c.unpark()      // a parked reader has no goroutine to notice
	})
}

func (c *client) closeReason() CloseReason {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// serve runs the connection: CONNECT on this goroutine, then the packet
// loop on a fresh one, which ends the connection. The handshake (auth,
// store, session) grows a goroutine's stack to several KiB, and a stack
// shrinks only at a GC; a new goroutine waiting for its next packet keeps
// the starting 2 KiB, which matters for 100,000 idle connections — and a
// parkable connection keeps none while it waits (park.go).
func (c *client) serve() {
	if c.guard(c.handshake) {
		c.r.DropConnect() // read once; an idle connection should not keep it
		c.parkable = c.raw != nil && c.srv.parking.poller != nil
		if c.parkable || c.keepAlive == 0 {
			// No read deadline from here: keepalive 0 is no limit, and a
			// parkable connection's keepalive is a timer (park.go).
			_ = c.conn.SetReadDeadline(time.Time{})
		}
		c.srv.workers.run(job{c, jobRead})
	}
}

// guard runs f; when f returns false or panics, it ends the connection.
func (c *client) guard(f func() bool) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			c.log(zap.ErrorLevel, "panic serving connection", zap.Any("panic", v), zap.Stack("stack"))
			c.close(CloseProtocolError, codec.ImplementationSpecificError)
			ok = false
		}
		if !ok {
			c.finish()
		}
	}()
	return f()
}

// readLoop reads packets until the connection ends, and returns false; on
// a parkable connection it returns true instead once the socket is empty
// and the reader has parked (park.go).
func (c *client) readLoop() bool {
	deadline := c.keepAliveDeadline()
	for {
		if (len(c.acks) > 0 || c.needSync || len(c.dirty) > 0) && !c.r.Complete() {
			// The next read may wait: this burst's acknowledgements (with
			// one Sync for all its messages, or noted to be written now),
			// then the deliveries it routed (inline.go), the reader's own
			// answers last.
			c.releaseAcks()
			if len(c.dirty) > 0 {
				c.flushDirty()
			}
		}
		if !c.parkable && c.r.Buffered() == 0 {
			c.burst = 0
			if deadline > 0 {
				_ = c.conn.SetReadDeadline(time.Now().Add(deadline))
			}
			if rc := c.idleSocket(); rc != nil {
				switch c.parkOn(rc) {
				case parkDone:
					return true
				case parkClosing:
					return false
				}
			}
			if err := c.waitReadable(); err != nil {
				c.readError(err)
				return false
			}
		}
		var p codec.Packet
		var err error
		if c.parkable && c.burst == 1 && c.shortRead && c.r.Buffered() == 0 {
			// A wake-up that brought one packet, read by a read that
			// emptied the socket: a quiet client's. It parks without the
			// read that would find the socket empty — one system call of
			// about six per message at low rates; the poller's arming is
			// level-triggered, so bytes that came meanwhile wake it at once.
			err = codec.ErrWouldBlock
		} else {
			p, err = c.r.ReadPacket()
		}
		if t := c.trace.Load(); t != nil && err == nil {
			t.in(c, p)
		}
		if err != nil {
			if c.parkable && errors.Is(err, codec.ErrWouldBlock) {
				switch c.park() {
				case parkDone:
					return true
				case parkRetry:
					continue
				}
				return false // closing
			}
			c.readError(err)
			return false
		}
		c.burst++
		if !c.handle(p) {
			return false
		}
	}
}

// keepAliveDeadline is how long the connection may stay silent: 1.5 times
// its keepalive [MQTT-3.1.2-22]; 0 is no limit.
func (c *client) keepAliveDeadline() time.Duration { return c.keepAlive + c.keepAlive/2 }

// readError classifies why reading stopped and closes accordingly.
func (c *client) readError(err error) {
	var ce *codec.Error
	switch {
	case errors.As(err, &ce):
		reason := CloseMalformed
		switch ce.Code {
		case codec.PacketTooLarge:
			reason = ClosePacketTooLarge
		case codec.ProtocolError, codec.TopicAliasInvalid:
			reason = CloseProtocolError
		}
		c.log(zap.WarnLevel, "closing connection: bad packet", zap.String("client_id", c.id), zap.Error(err))
		c.closeWhy(reason, ce.Code, ce.Msg)
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.close(CloseKeepAlive, codec.KeepAliveTimeout)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		c.close(ClosePeerGone, 0)
	default:
		c.close(ClosePeerGone, 0)
	}
}

// protocolError closes the connection for a protocol violation.
func (c *client) protocolError(msg string, rc codec.ReasonCode) bool {
	c.log(zap.WarnLevel, "closing connection: protocol violation", zap.String("client_id", c.id), zap.String("error", msg))
	c.closeWhy(CloseProtocolError, rc, msg)
	return false
}

// handle dispatches one packet; false ends the connection.
func (c *client) handle(p codec.Packet) bool {
	if p.Type() != codec.PUBLISH {
		c.srv.stats.ctrlIn.Add(1) // $SYS counts packets of every type
	}
	switch p := p.(type) {
	case *codec.Publish:
		return c.handlePublish(p)
	case *codec.Ack:
		return c.handleAck(p)
	case *codec.Subscribe:
		return c.handleSubscribe(p)
	case *codec.Unsubscribe:
		return c.handleUnsubscribe(p)
	case *codec.Pingreq:
		c.reply(&codec.Pingresp{})
		return true
	case *codec.Disconnect:
		c.releaseAcksWait() // before the writer's last flush
		return c.handleDisconnect(p)
	case *codec.Connect:
		return c.protocolError("second CONNECT [MQTT-3.1.0-2]", codec.ProtocolError)
	case *codec.Auth:
		return c.handleAuth(p)
	default:
		return c.protocolError(p.Type().String()+" is not sent by clients", codec.ProtocolError)
	}
}

func (c *client) handleAck(p *codec.Ack) bool {
	switch p.Kind {
	case codec.PUBACK:
		if c.sess.ack(p.PacketID, 1) {
			c.deferWake(c) // the window has room again
		}
	case codec.PUBREC:
		if p.ReasonCode.IsError() {
			// The receiver refused the message: the flow ends here (4.3.3).
			if c.sess.inflightQoS(p.PacketID) == 2 {
				c.sess.dropInflight(p.PacketID)
				c.wake()
				return true
			}
		}
		rc := codec.Success
		ok, stored := c.sess.pubrec(p.PacketID)
		if !ok {
			rc = codec.PacketIdentifierNotFound
		}
		// PUBREL goes once the store knows only PUBREL is owed.
		c.needSync = c.needSync || stored
		c.ackAfterSync(codec.PUBREL, p.PacketID, rc)
	case codec.PUBREL:
		rc := codec.Success
		found, stored := c.sess.releaseInbound(p.PacketID)
		if !found {
			rc = codec.PacketIdentifierNotFound
		}
		// PUBCOMP goes once the store has forgotten the packet id: the
		// publisher may reuse it as soon as it has PUBCOMP.
		c.needSync = c.needSync || stored
		c.ackAfterSync(codec.PUBCOMP, p.PacketID, rc)
	case codec.PUBCOMP:
		if c.sess.ack(p.PacketID, 2) {
			c.deferWake(c)
		}
	}
	return true
}

func (c *client) handleDisconnect(p *codec.Disconnect) bool {
	if c.version == codec.V5 && p.Props.Has(codec.PropSessionExpiry) {
		s := c.sess
		s.mu.Lock()
		wasZero := s.expiry == 0
		if !wasZero {
			s.expiry = c.srv.capExpiry(p.Props.SessionExpiry)
		}
		s.mu.Unlock()
		if wasZero && p.Props.SessionExpiry != 0 {
			return c.protocolError("session expiry set on DISCONNECT after 0 at CONNECT [MQTT-3.14.2-2]", codec.ProtocolError)
		}
	}
	if p.ReasonCode == codec.DisconnectWithWillMessage {
		c.close(CloseDisconnectWill, 0)
	} else {
		c.close(CloseNormal, 0) // the will is discarded [MQTT-3.1.2-10]
	}
	return false
}

// writeLoop is the connection's only writer while it runs (startWriter).
// Each round it takes the queued control packets and a batch of
// deliveries, encodes them into one buffer and writes it with one call.
// With nothing left to do it exits; once the connection is closing it
// stays for the last flush, then closes conn and done.
func (c *client) writeLoop() {
	for {
		if c.closing.Load() {
			c.flush(true)
			c.putScratch()
			_ = c.conn.Close()
			close(c.done)
			return
		}
		if c.pending.Swap(false) {
			for c.flush(false) {
			}
			continue
		}
		c.putScratch()
		c.writing.Store(false)
		// A wake between the Swap and the Store saw a writer running and
		// started none: take its work, unless a new writer has already
		// started and will.
		if !c.pending.Load() && !c.closing.Load() {
			return
		}
		if !c.writing.CompareAndSwap(false, true) {
			return
		}
	}
}

func (c *client) isClosing() bool { return c.closing.Load() }

// flush writes what is waiting and reports whether it wrote anything:
// first what an in-place write left (writeScratch.tail), then the queued
// control packets and a batch of deliveries.
func (c *client) flush(final bool) bool {
	if c.closing.Load() {
		final = true // only what is queued for the peer, under close's short deadline
	}
	if ws := c.ws; ws != nil && ws.tail != nil {
		tail := ws.tail
		ws.tail = nil
		if !c.writeOut(tail, final, false) {
			return false
		}
	}
	buf, more := c.collect(final)
	if len(buf) == 0 {
		// A batch that came to nothing (too large for the client) may
		// have more behind it.
		return more
	}
	return c.writeOut(buf, final, false)
}

// collect encodes what is waiting into the scratch buffer: the control
// packets, then a batch of deliveries (none when final: only what is owed
// to the peer before a close). more reports that deliveries may be left:
// the batch is full, or a retained stream gave some. Writer only.
func (c *client) collect(final bool) (_ []byte, more bool) {
	// Deliveries are taken before the control packets and written after
	// them: a control packet the reader queued before a delivery it caused
	// (SUBACK before the retained messages, CONNACK before the session's
	// messages) is then always in this round's control bytes, ahead of it.
	c.mu.Lock()
	connected := c.connected
	c.mu.Unlock()
	now := time.Now()
	ws := c.getScratch()
	ws.batch = ws.batch[:0]
	if connected && !final {
		var sync, held, stream bool
		ws.batch, sync, held, stream = c.sess.take(c, ws.batch, c.window, now)
		if n := len(ws.batch); stream {
			var ssync, sheld bool
			ws.batch, ssync, sheld = c.streamRetained(ws.batch, now)
			sync, held, more = sync || ssync, sheld, len(ws.batch) > n
		}
		more = more || len(ws.batch) == maxBatch
		if sync {
			// A QoS 2 packet id or a QoS 2 PUBLISH's receipt was just
			// recorded: on disk before the subscriber can see the message.
			if err := c.srv.syncStore(); err != nil {
				c.srv.storeError("store: sync before delivery failed", err, zap.String("client_id", c.id))
			}
		}
		if held {
			// Its publisher is recording it; releaseHeld wakes us, and this
			// catches a delivery it does not know about (a retained stream).
			time.AfterFunc(time.Millisecond, c.wake)
		}
	}
	c.mu.Lock()
	buf := append(ws.buf[:0], c.ctrl...)
	c.ctrl = c.ctrl[:0]
	c.mu.Unlock()
	for i := range ws.batch {
		buf = c.encode(buf, &ws.batch[i], now)
		ws.batch[i] = outMsg{}
	}
	if t := c.trace.Load(); t != nil && len(buf) > 0 {
		t.out(c, buf)
	}
	ws.buf = buf[:0] // kept while the writer runs (putScratch)
	return buf, more
}

// writeOut writes buf. With now set it never waits: what a full socket
// does not take is left in c.ws.tail for a writer. It reports false when
// the write failed, and the connection is then closing. Writer only.
func (c *client) writeOut(buf []byte, final, now bool) bool {
	var n int
	var err error
	if c.raw != nil {
		// Most writes fit the socket at once: they need no deadline, and
		// setting one per write cost a timer update and a clock read.
		n, err = rawWriteNow(c.raw, buf) // rawio_linux.go
		if err == nil && n < len(buf) {
			if now {
				c.ws.tail = buf[n:]
			} else {
				c.setWriteDeadline(final)
				var m int
				m, err = rawWrite(c.raw, buf[n:])
				n += m
			}
		}
	} else if now && c.inPlace {
		n, err = c.conn.(NowWriter).WriteNow(buf)
		if err == nil && n < len(buf) {
			c.ws.tail = buf[n:]
		}
	} else {
		c.setWriteDeadline(final)
		n, err = c.conn.Write(buf)
	}
	c.srv.stats.bytesOut.Add(int64(n))
	c.bytesOut.Add(int64(n))
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			c.log(zap.WarnLevel, "closing connection: slow consumer", zap.String("client_id", c.id),
				zap.Duration("write_timeout", time.Duration(c.srv.live.writeTimeout.Load())))
			c.close(CloseSlowConsumer, 0)
		} else {
			c.close(ClosePeerGone, 0)
		}
		_ = c.conn.Close() // unblock the reader
		return false
	}
	return true
}

// setWriteDeadline gives a write that may wait WriteTimeout — unless the
// connection is closing (final), whose short deadline must win: both
// happen under c.mu, and close sets its deadline with closing.
func (c *client) setWriteDeadline(final bool) {
	if final {
		return
	}
	c.mu.Lock()
	if !c.closing.Load() {
		_ = c.conn.SetWriteDeadline(time.Now().Add(time.Duration(c.srv.live.writeTimeout.Load())))
	}
	c.mu.Unlock()
}

// encode appends one delivery as a PUBLISH, with the per-subscriber fields:
// packet id, DUP, subscription identifier, topic alias, remaining expiry.
func (c *client) encode(buf []byte, m *outMsg, now time.Time) []byte {
	if m.pubrel {
		c.srv.stats.ctrlOut.Add(1)
		return (&codec.Ack{Kind: codec.PUBREL, PacketID: m.id}).Append(buf, c.version)
	}
	msg := m.msg
	if m.qos == 0 && c.version != codec.V5 {
		// No per-subscriber field in a 3.1/3.1.1 QoS 0 PUBLISH: encode it
		// once per message and variant, copy the bytes for every subscriber.
		i := 0
		if m.retain {
			i = 1
		}
		c.msgsOut.Add(1)
		c.srv.stats.msgsOutQoS[0].Add(1)
		c.srv.stats.pubBytesOut.Add(int64(len(msg.Payload)))
		if b := msg.enc[i].Load(); b != nil {
			return append(buf, *b...)
		}
		p := codec.Publish{Retain: m.retain, Payload: msg.Payload, Topic: unsafeBytes(msg.Topic)}
		n := len(buf)
		buf = p.Append(buf, c.version)
		b := slices.Clone(buf[n:])
		msg.enc[i].CompareAndSwap(nil, &b)
		return buf
	}
	p := &c.ws.pub
	newAlias := false
	*p = codec.Publish{QoS: m.qos, Retain: m.retain, PacketID: m.id, Dup: m.dup, Payload: msg.Payload,
		Topic: unsafeBytes(msg.Topic)}
	if c.version == codec.V5 {
		if msg.Props != nil {
			p.Props = *msg.Props // read-only: shared by every subscriber
		}
		if !msg.Expires.IsZero() {
			p.Props.SetNum(codec.PropMessageExpiry, msg.remainingExpiry(now))
		}
		if m.subID != 0 {
			c.subID[0] = m.subID
			p.Props.SubscriptionIDs = c.subID[:]
		}
		if c.aliasMaxOut > 0 {
			newAlias = c.applyAlias(p, msg.Topic)
		}
	}
	if c.maxOut > 0 && uint32(p.Len(c.version)) > c.maxOut {
		// Never send more than the client accepts [MQTT-3.1.2-24]; the
		// message is discarded as if delivered [MQTT-3.1.2-25].
		if newAlias {
			delete(c.outAliases, msg.Topic) // the client never learned it
		}
		if m.qos > 0 {
			c.sess.dropInflight(m.id)
		}
		c.sess.dropped(dropTooLarge)
		c.logTooLarge(msg.Topic, p.Len(c.version), m.retain)
		return buf
	}
	c.msgsOut.Add(1)
	c.srv.stats.msgsOutQoS[p.QoS].Add(1)
	c.srv.stats.pubBytesOut.Add(int64(len(msg.Payload)))
	return p.Append(buf, c.version)
}

// logTooLarge logs a delivery dropped for the client's Maximum Packet
// Size, at most once a second. It is kept out of encode: the log fields
// made encode's stack frame 300 bytes larger, which every writer pays
// (a new writer goroutine grew its stack once more for it).
//
//go:noinline
func (c *client) logTooLarge(topic string, size int, retained bool) {
	if rarely(&c.srv.warned.tooLarge) {
		c.log(zap.InfoLevel, "message not sent: larger than the client's Maximum Packet Size", zap.String("topic", topic),
			zap.Int("size", size), zap.Uint32("maximum_packet_size", c.maxOut), zap.Bool("retained", retained))
	}
}

// applyAlias replaces the topic by an alias the client already knows, or
// assigns a new one while aliases are left, and reports whether it did that.
func (c *client) applyAlias(p *codec.Publish, topic string) bool {
	if a, ok := c.outAliases[topic]; ok {
		p.Topic = nil
		p.Props.SetNum(codec.PropTopicAlias, uint32(a))
		return false
	}
	if c.outAliases == nil {
		c.outAliases = map[string]uint16{}
	}
	if len(c.outAliases) < int(c.aliasMaxOut) {
		a := uint16(len(c.outAliases) + 1)
		c.outAliases[topic] = a
		p.Props.SetNum(codec.PropTopicAlias, uint32(a))
		return true
	}
	return false
}
