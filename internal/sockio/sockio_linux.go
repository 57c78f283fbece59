//go:build linux

// Package sockio makes socket reads and writes with raw system calls
// (syscall.RawSyscall) inside a syscall.RawConn's Read and Write, which keep
// the runtime poller's waiting and deadlines. The runtime's sockets are
// non-blocking, so these calls never wait in the kernel. A Go system call
// (syscall.Syscall) instead wakes the runtime's monitor thread when it
// sleeps, which it does whenever the broker has been idle even briefly: at
// a few thousand messages a second on one core that was a futex wake-up and
// three monitor nanosleeps per message (issue 8, perf: every futex wake came
// from entersyscall in a socket read). core uses it for plain TCP, listeners
// for the WebSocket frames it writes in place. Linux only.
package sockio

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

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

// Do makes one read (or write) of buf through rc with a pooled rawOp;
// with now set it does not wait: a read of an empty socket gives EAGAIN, a
// write to a full one returns what it wrote.
func Do(rc syscall.RawConn, buf []byte, write, now bool) (int, syscall.Errno, error) {
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

// Read reads into p as net.Conn.Read does: io.EOF at the end of the
// stream, the read deadline honoured while waiting.
func Read(rc syscall.RawConn, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return ReadResult(Do(rc, p, false, false))
}

// ReadResult turns a read's Do results into net.Conn.Read's.
func ReadResult(n int, errno syscall.Errno, err error) (int, error) {
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

// WriteNow writes as much of buf as the socket takes now, without
// waiting; n < len(buf) with a nil error means the socket is full.
func WriteNow(rc syscall.RawConn, buf []byte) (int, error) { return write(rc, buf, true) }

// Write writes all of buf as net.Conn.Write does, waiting for writability
// under the write deadline when the socket is full.
func Write(rc syscall.RawConn, buf []byte) (int, error) { return write(rc, buf, false) }

func write(rc syscall.RawConn, buf []byte, now bool) (int, error) {
	if len(buf) == 0 {
		return 0, nil
	}
	n, errno, err := Do(rc, buf, true, now)
	if err == nil && errno != 0 {
		err = &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", errno)}
	}
	return n, err
}
