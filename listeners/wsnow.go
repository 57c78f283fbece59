package listeners

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Writing WebSocket frames in place. The broker writes a subscriber's
// deliveries on the publisher's goroutine when a burst is small, with a
// write that never waits (core's NowWriter); over plain TCP that saves a
// hand-off to a writer goroutine per delivery. gorilla/websocket writes only
// through its own buffered, blocking writer, so a WebSocket conn frames
// such writes itself: a server's frame is unmasked, a header of 2 to 10
// bytes before the payload. Every write to the socket, the broker's and the
// control frames gorilla sends (pong, close), goes under c.wmu, so a frame
// the socket took only part of is finished (by the next Write) before any
// other frame starts.

// WritesNow reports whether WriteNow can write: over plain TCP, not wss
// (TLS owns the bytes on the socket), on systems with the raw write.
func (c *wsConn) WritesNow() bool { return c.sock != nil && rawSocketIO }

// maxPooledFrame is the largest frame buffer kept for the next in-place
// write: the small messages of a low rate are the case that matters.
const maxPooledFrame = 64 << 10

// wsFrameBufs holds the buffers a frame is assembled in for one write.
var wsFrameBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// WriteNow writes p as one binary frame as far as the socket takes it now,
// never waiting, and returns how much of p went out. Below len(p), the frame
// is begun or not, as the socket decided: either way p[n:] must begin the
// next Write, which finishes it. It writes nothing while another write
// holds the conn.
func (c *wsConn) WriteNow(p []byte) (int, error) {
	if len(p) == 0 || !c.WritesNow() || !c.wmu.TryLock() {
		return 0, nil
	}
	defer c.wmu.Unlock()
	if c.owedPayload > 0 {
		return 0, nil // a frame the next Write finishes: never interleave
	}
	bp := wsFrameBufs.Get().(*[]byte)
	frame := appendFrameHeader((*bp)[:0], len(p))
	hl := len(frame)
	frame = append(frame, p...)
	n, err := writeSocketNow(c.sock, frame)
	if cap(frame) <= maxPooledFrame { // a large message's buffer is not kept
		*bp = frame[:0]
		wsFrameBufs.Put(bp)
	}
	if err != nil || n == 0 {
		return 0, err
	}
	if n < hl { // part of the header: the next Write owes its rest and all of p
		c.owedHeader = append(c.owedHeader[:0], frame[n:hl]...)
		c.owedPayload = len(p)
		return 0, nil
	}
	c.owedPayload = len(p) - (n - hl)
	return n - hl, nil
}

// appendFrameHeader appends the header of a final, unmasked binary frame
// of n payload bytes (RFC 6455, section 5.2).
func appendFrameHeader(b []byte, n int) []byte {
	const finBinary = 0x80 | websocket.BinaryMessage
	switch {
	case n <= 125:
		return append(b, finBinary, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, finBinary, 126), uint16(n))
	default:
		return binary.BigEndian.AppendUint64(append(b, finBinary, 127), uint64(n))
	}
}

// finishFrame writes what a WriteNow left of its frame: the rest of the
// header, then as much of p as the frame still owes, waiting under the
// write deadline. It returns the bytes of p written; c.wmu is held.
func (c *wsConn) finishFrame(p []byte) (int, error) {
	k := min(c.owedPayload, len(p))
	if c.nc != nil {
		// As gorilla does before a data frame: drop the short deadline of
		// the last control frame, so the owner's applies.
		_ = c.nc.SetWriteDeadline(time.Time{})
	}
	if len(c.owedHeader) > 0 {
		if _, err := writeSocket(c.sock, c.owedHeader); err != nil {
			return 0, err
		}
		c.owedHeader = c.owedHeader[:0]
	}
	if k == 0 {
		return 0, nil
	}
	n, err := writeSocket(c.sock, p[:k])
	c.owedPayload -= n
	return n, err
}

// writeControl writes a control frame (pong, close) unless a frame is
// half written or another write holds the conn: a control frame is a
// courtesy the connection can do without, and must never wait for a
// writer or cut into a frame.
func (c *wsConn) writeControl(typ int, data []byte, timeout time.Duration) error {
	if !c.wmu.TryLock() {
		return errWriterBusy
	}
	defer c.wmu.Unlock()
	if c.owedPayload > 0 {
		return errWriterBusy
	}
	return c.ws.WriteControl(typ, data, time.Now().Add(timeout))
}
