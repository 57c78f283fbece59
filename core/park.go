package core

import "syscall"

// Parking: a connection whose socket the server can watch itself (plain
// TCP on Linux: client.parkable) keeps no goroutine while it waits for its
// next packet. Its reader reads without ever blocking; finding the socket
// empty, it parks — arms the socket in the poller (poller_linux.go), starts
// the keepalive timer — and its goroutine ends. Whatever comes first then
// takes the connection over, exactly once, by moving pstate from parked to
// reading:
//   - the poller, when bytes or a hang-up arrive: a new reader goroutine;
//   - close (takeover, admin, shutdown, a writer's error): finish;
//   - the keepalive wheel (keepalive.go): close for keepalive, then finish.
// Only the holder of the reading state touches the reader-owned fields.

const (
	reading int32 = iota // a goroutine reads, or the connection is finishing
	parked               // no goroutine: the poller, close or the timer resumes it
)

// parking is where connections park (Server.parking): poller watches the
// sockets of parked connections, nil where there is none (not Linux:
// every reader keeps its goroutine); wheel keeps their keepalive, with
// poller.
type parking struct {
	poller *poller
	wheel  *kaWheel
}

// parkResult is what readLoop does after park.
type parkResult uint8

const (
	parkDone    parkResult = iota // parked: the goroutine ends
	parkRetry                     // could not park: read again (the read reports why)
	parkClosing                   // the connection is closing: finish
)

// park gives the read buffer back (unless a partial packet is in it) and
// waits for the socket without a goroutine.
func (c *client) park() parkResult { return c.parkOn(c.raw) }

// idleSocket returns the socket a connection that reads through its
// conn's buffers (IdleSocket: WebSocket) may park on now, or nil. Right
// after a wake-up it is nil: the socket has bytes, which the conn reads.
func (c *client) idleSocket() syscall.RawConn {
	if c.srv.parking.poller == nil {
		return nil
	}
	if c.resumed {
		c.resumed = false
		return nil
	}
	if s, ok := c.conn.(IdleSocket); ok {
		return s.IdleSocket()
	}
	return nil
}

// parkOn parks the reader on rc, the connection's socket.
func (c *client) parkOn(rc syscall.RawConn) parkResult {
	if c.isClosing() {
		return parkClosing
	}
	c.r.Release()
	c.burst = 0
	if cap(c.matches) > 64 {
		c.matches = nil // a burst to many subscribers grew it; idle, it would stay
	}
	if d := c.keepAliveDeadline(); d > 0 {
		w := c.srv.parking.wheel
		due := w.due(d)
		c.kaDue.Store(due)
		if !c.kaAdded {
			c.kaAdded = true
			w.add(c, due)
		}
	}
	// Everything the arming needs of c is taken first; parked before
	// armed, since an event right after arming must find it so; and from
	// parked on, c belongs to whoever takes the reading state.
	a := c.srv.parking.poller.prepare(c)
	c.pstate.Store(parked)
	if err := c.srv.parking.poller.arm(rc, a); err != nil {
		// The socket is closed or broken: the next read says how — unless
		// the close that closed it took the connection over meanwhile.
		if c.pstate.CompareAndSwap(parked, reading) {
			return parkRetry
		}
		return parkDone
	}
	// A close that came before pstate said parked could not unpark us.
	if c.isClosing() && c.pstate.CompareAndSwap(parked, reading) {
		return parkClosing
	}
	return parkDone
}

// resume reads on after the poller saw bytes (or a hang-up) on a parked
// connection; the poller gave it the reading state.
func (c *client) resume() {
	c.resumed = true
	c.guard(c.readLoop)
}

// unpark finishes a parked connection that is closing: nothing else would.
func (c *client) unpark() {
	if c.pstate.CompareAndSwap(parked, reading) {
		go c.finish()
	}
}

// stopParking undoes what parking set up, once the connection has ended
// and its socket is closed (finish).
func (c *client) stopParking() {
	if c.kaAdded {
		c.srv.parking.wheel.remove(c)
	}
	if c.pslot >= 0 {
		c.srv.parking.poller.release(c)
	}
}
