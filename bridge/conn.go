package bridge

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xmq-io/xmq/codec"
)

// readBufferSize is the read buffer of each of a link's two connections:
// a burst of small PUBLISH packets decodes in place from it.
const readBufferSize = 64 << 10

// senderMax is how many bytes a sender holds before its callers wait: the
// memory a slow peer may make one direction of a link hold (twice this,
// with the batch being written).
const senderMax = 256 << 10

// writeTimeout cuts a link whose peer accepts nothing for this long.
const writeTimeout = 30 * time.Second

// sender is the only writer of one connection. Callers encode packets into
// its buffer and wake it; it writes what has gathered in one call, so a
// burst costs one system call. When the buffer holds senderMax bytes the
// callers wait, which pushes back on whoever feeds them. Safe for
// concurrent use.
type sender struct {
	conn    net.Conn
	v       byte
	timeout time.Duration
	bytes   *atomic.Int64 // bytes written, for the bridge's stats (nil: not counted)
	writes  atomic.Uint64 // writes done, for the keepalive
	// queued and written count the bytes put in buf and those written
	// out: once written reaches what queued was, everything queued by
	// then has left, which the in-flight watchdog's remote clock needs.
	queued, written atomic.Uint64

	mu      sync.Mutex
	room    sync.Cond // buf has room, or the sender stopped
	buf     []byte
	err     error // set once the sender stopped: the first write error, or errClosed
	closing bool  // finish: write what is buffered, then stop
	wake    chan struct{}
	done    chan struct{}
}

var errClosed = errors.New("bridge: link closed")

func newSender(conn net.Conn, v byte, bytes *atomic.Int64) *sender {
	s := &sender{conn: conn, v: v, timeout: writeTimeout, bytes: bytes, wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.room.L = &s.mu
	go s.run()
	return s
}

// errFull: trySend found the buffer full.
var errFull = errors.New("bridge: sender full")

// reserve waits for room and returns with s.mu held, or returns the
// sender's error; without wait it returns errFull instead of waiting.
func (s *sender) reserve(wait bool) error {
	s.mu.Lock()
	for len(s.buf) >= senderMax && s.err == nil && !s.closing {
		if !wait {
			s.mu.Unlock()
			return errFull
		}
		s.room.Wait()
	}
	if s.err != nil || s.closing {
		err := s.err
		if err == nil {
			err = errClosed
		}
		s.mu.Unlock()
		return err
	}
	return nil
}

// release counts what was appended to buf since it held before bytes,
// unlocks s.mu and wakes the writer.
func (s *sender) release(before int) {
	s.queued.Add(uint64(len(s.buf) - before))
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// send queues one packet.
func (s *sender) send(p codec.Packet) error { return s.queue(p, true) }

// trySend queues one packet if the buffer has room; it returns errFull
// when not, for a caller that must not wait (the watchdog).
func (s *sender) trySend(p codec.Packet) error { return s.queue(p, false) }

// queue appends p to the buffer, waiting for room when wait is set.
func (s *sender) queue(p codec.Packet, wait bool) error {
	if err := s.reserve(wait); err != nil {
		return err
	}
	before := len(s.buf)
	s.buf = p.Append(s.buf, s.v)
	s.release(before)
	return nil
}

// publish queues a PUBLISH; p is the caller's and may be reused at once.
func (s *sender) publish(p *codec.Publish) error {
	if err := s.reserve(true); err != nil {
		return err
	}
	before := len(s.buf)
	s.buf = p.Append(s.buf, s.v)
	s.release(before)
	return nil
}

// ack queues PUBACK, PUBREC, PUBREL or PUBCOMP without allocating.
func (s *sender) ack(kind codec.Type, id uint16, rc codec.ReasonCode) error {
	if err := s.reserve(true); err != nil {
		return err
	}
	a := codec.Ack{Kind: kind, PacketID: id, ReasonCode: rc}
	if s.v != codec.V5 {
		a.ReasonCode = 0 // 3.1.1 has none
	}
	before := len(s.buf)
	s.buf = a.Append(s.buf, s.v)
	s.release(before)
	return nil
}

// run writes until the sender stops.
func (s *sender) run() {
	defer close(s.done)
	var out []byte
	for range s.wake {
		s.mu.Lock()
		out, s.buf = s.buf, out[:0]
		err, closing := s.err, s.closing
		s.room.Broadcast()
		s.mu.Unlock()
		if err != nil {
			return
		}
		if len(out) > 0 {
			if s.timeout > 0 {
				_ = s.conn.SetWriteDeadline(time.Now().Add(s.timeout))
			}
			n, werr := s.conn.Write(out)
			s.written.Add(uint64(n))
			if s.bytes != nil {
				s.bytes.Add(int64(n))
			}
			s.writes.Add(1)
			if werr != nil {
				s.stop(werr)
				return
			}
		}
		if closing {
			s.mu.Lock()
			empty := len(s.buf) == 0
			s.mu.Unlock()
			if empty {
				s.stop(errClosed)
				return
			}
			select {
			case s.wake <- struct{}{}:
			default:
			}
		}
	}
}

// stop ends the sender: what is buffered is dropped, callers get err.
func (s *sender) stop(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.room.Broadcast()
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// failure is why the sender stopped; nil while it runs.
func (s *sender) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// finish writes what is buffered (each write under the write timeout),
// then stops the sender; it waits at most d for that.
func (s *sender) finish(d time.Duration) {
	s.mu.Lock()
	s.closing = true
	s.room.Broadcast()
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	select {
	case <-s.done:
	case <-time.After(d):
		s.stop(errClosed)
		_ = s.conn.SetWriteDeadline(time.Now()) // unblock a write
		<-s.done
	}
}

// wait stops the sender at once and waits for its goroutine; the caller
// has closed the connection, so a write under way returns.
func (s *sender) wait() {
	s.stop(errClosed)
	<-s.done
}

// handshake sends cp on conn and reads the CONNACK, within the deadline
// already set on conn. It returns the reader the connection goes on with.
func handshake(conn net.Conn, cp *codec.Connect, maxPacket int) (*codec.Reader, *codec.Connack, error) {
	v := cp.ProtocolVersion
	if _, err := conn.Write(cp.Append(make([]byte, 0, cp.Len(v)), v)); err != nil {
		return nil, nil, err
	}
	r := codec.NewReader(bufio.NewReaderSize(conn, readBufferSize), maxPacket)
	r.Version = v
	p, err := r.ReadPacket()
	if err != nil {
		return nil, nil, err
	}
	ack, ok := p.(*codec.Connack)
	if !ok {
		return nil, nil, fmt.Errorf("bridge: %s instead of CONNACK", p.Type())
	}
	// The reader reuses its packet values: the caller gets its own.
	out := *ack
	out.Props = cloneProps(&ack.Props)
	if ack.ReasonCode.IsError() || v != codec.V5 && ack.ReasonCode != codec.Success {
		return nil, &out, &ConnackError{Code: ack.ReasonCode, Reason: string(ack.Props.ReasonString)}
	}
	return r, &out, nil
}

// ConnackError is a CONNACK that refused the bridge.
type ConnackError struct {
	Code   codec.ReasonCode
	Reason string // MQTT 5 Reason String, if any
}

func (e *ConnackError) Error() string {
	if e.Reason != "" {
		return "CONNACK " + e.Code.String() + ": " + e.Reason
	}
	return "CONNACK " + e.Code.String()
}

// authFailure reports a CONNACK code that says the credentials or the
// identity are refused.
func (e *ConnackError) authFailure() bool {
	switch e.Code {
	case codec.BadUserNameOrPassword, codec.NotAuthorized, codec.Banned, codec.BadAuthenticationMethod,
		codec.ClientIdentifierNotValid:
		return true
	}
	return false
}

// cloneProps copies the properties a CONNACK's reader may overwrite.
func cloneProps(p *codec.Properties) codec.Properties {
	out := *p
	out.AssignedClientID = clone(p.AssignedClientID)
	out.ReasonString = clone(p.ReasonString)
	out.ResponseInfo = clone(p.ResponseInfo)
	out.ServerReference = clone(p.ServerReference)
	out.AuthMethod = clone(p.AuthMethod)
	out.AuthData = clone(p.AuthData)
	out.User = nil
	out.SubscriptionIDs = nil
	out.ContentType, out.ResponseTopic, out.CorrelationData = nil, nil, nil
	return out
}

func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}
