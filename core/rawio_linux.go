package core

import (
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"github.com/xmq-io/xmq/codec"
)

// On Linux, socket I/O on plain TCP connections is made with raw system calls
// (syscall.RawSyscall) inside RawConn's Read and Write, which keep the
// poller's waiting and deadlines. The sockets are non-blocking, so these
// calls never wait. A Go system call (syscall.Syscall) instead wakes the
// runtime's monitor thread when it sleeps, which it does whenever the
// broker has been idle even briefly: at a few thousand messages a second on
// one core that was a futex wake-up and three monitor nanosleeps per
// message, a fifth to a third of the broker's CPU per message (perf: every
// futex wake came from entersyscall in a socket read).

// rawConnOf returns conn's socket for raw I/O when conn offers it
// (syscall.Conn: a capability, not a concrete type — listener options wrap
// the socket and must not silently cost this path, DESIGN.md), else nil.
// A conn offers it only when using the socket is the same as its own Read
// and Write: plain TCP, never TLS or WebSocket.
func rawConnOf(conn net.Conn) syscall.RawConn {
	if sc, ok := conn.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			return rc
		}
	}
	return nil
}

// waitRawReadable gives the read buffer back to the pool and waits until
// the socket has bytes (or EOF, an error or the read deadline), so an idle
// TCP connection holds no read buffer. When bytes are already there it
// returns at once, keeping the buffer. After a wait it does not check
// again: the read that follows costs the same system call, and after a rare
// spurious wake-up it just waits with a buffer.
func (c *client) waitRawReadable() error {
	waited := false
	return c.raw.Read(func(fd uintptr) bool {
		if waited {
			return true
		}
		errno := peekErrno(fd, &c.peek[0])
		if errno == syscall.EAGAIN {
			c.r.Release()
			waited = true
			return false
		}
		return errno != syscall.EINTR
	})
}

// rawOp is one raw read or write: RawConn takes a func, and a closure
// made per call would be an allocation per system call, so the funcs are
// bound once per pooled rawOp.
type rawOp struct {
	buf         []byte
	n           int
	errno       syscall.Errno
	now         bool // a read that does not wait: EAGAIN is returned
	read, write func(fd uintptr) bool
}

var rawOps = sync.Pool{New: func() any {
	o := new(rawOp)
	o.read, o.write = o.doRead, o.doWrite
	return o
}}

func (o *rawOp) doRead(fd uintptr) bool {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&o.buf[0])), uintptr(len(o.buf)))
		switch e {
		case 0:
			o.n = int(r)
			return true
		case syscall.EINTR:
		case syscall.EAGAIN:
			if o.now {
				o.errno = e
				return true
			}
			return false // wait for readability
		default:
			o.errno = e
			return true
		}
	}
}

func (o *rawOp) doWrite(fd uintptr) bool {
	for o.n < len(o.buf) {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&o.buf[o.n])), uintptr(len(o.buf)-o.n))
		switch e {
		case 0:
			o.n += int(r)
		case syscall.EINTR:
		case syscall.EAGAIN:
			if o.now {
				return true // the socket is full: the caller decides
			}
			return false // wait for writability
		default:
			o.errno = e
			return true
		}
	}
	return true
}

// rawDo makes one read (or write) of buf through rc with a pooled rawOp;
// with now set it does not wait: a read of an empty socket gives EAGAIN, a
// write to a full one returns what it wrote.
func rawDo(rc syscall.RawConn, buf []byte, write, now bool) (int, syscall.Errno, error) {
	o := rawOps.Get().(*rawOp)
	o.buf, o.n, o.errno, o.now = buf, 0, 0, now
	var err error
	if write {
		err = rc.Write(o.write)
	} else {
		err = rc.Read(o.read)
	}
	n, errno := o.n, o.errno
	o.buf = nil
	rawOps.Put(o)
	return n, errno, err
}

// rawRead reads into p as net.Conn.Read does: io.EOF at the end of the
// stream, the read deadline honoured while waiting.
func rawRead(rc syscall.RawConn, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return rawReadErr(rawDo(rc, p, false, false))
}

// rawReadNow reads into p without waiting: an empty socket gives an error
// wrapping codec.ErrWouldBlock.
func rawReadNow(rc syscall.RawConn, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, errno, err := rawDo(rc, p, false, true)
	if errno == syscall.EAGAIN {
		return 0, errNothingYet
	}
	return rawReadErr(n, errno, err)
}

// errNothingYet is an empty non-blocking socket.
var errNothingYet = fmt.Errorf("read: %w", codec.ErrWouldBlock)

func rawReadErr(n int, errno syscall.Errno, err error) (int, error) {
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", errno)}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// rawWriteNow writes as much of buf as the socket takes now, without
// waiting; n < len(buf) with a nil error means the socket is full.
func rawWriteNow(rc syscall.RawConn, buf []byte) (int, error) {
	if len(buf) == 0 {
		return 0, nil
	}
	n, errno, err := rawDo(rc, buf, true, true)
	if err == nil && errno != 0 {
		err = &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", errno)}
	}
	return n, err
}

// rawWrite writes all of buf as net.Conn.Write does, waiting for
// writability under the write deadline when the socket is full.
func rawWrite(rc syscall.RawConn, buf []byte) (int, error) {
	if len(buf) == 0 {
		return 0, nil
	}
	n, errno, err := rawDo(rc, buf, true, false)
	if err == nil && errno != 0 {
		err = &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", errno)}
	}
	return n, err
}

// peekErrno is recv(2) of one byte with MSG_PEEK|MSG_DONTWAIT on fd: 0 when
// a byte (or EOF) is there, EAGAIN when nothing is.
func peekErrno(fd uintptr, b *byte) syscall.Errno {
	_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(b)), 1,
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return e
}
