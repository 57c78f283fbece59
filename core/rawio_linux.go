package core

import (
	"fmt"
	"net"
	"syscall"
	"unsafe"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/internal/sockio"
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

// The plain reads and writes are internal/sockio's, shared with the
// WebSocket listener's in-place frames.
var (
	rawRead     = sockio.Read
	rawWrite    = sockio.Write
	rawWriteNow = sockio.WriteNow
)

// rawReadNow reads into p without waiting: an empty socket gives an error
// wrapping codec.ErrWouldBlock.
func rawReadNow(rc syscall.RawConn, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, errno, err := sockio.Do(rc, p, false, true)
	if errno == syscall.EAGAIN {
		return 0, errNothingYet
	}
	return sockio.ReadResult(n, errno, err)
}

// errNothingYet is an empty non-blocking socket.
var errNothingYet = fmt.Errorf("read: %w", codec.ErrWouldBlock)

// peekErrno is recv(2) of one byte with MSG_PEEK|MSG_DONTWAIT on fd: 0 when
// a byte (or EOF) is there, EAGAIN when nothing is.
func peekErrno(fd uintptr, b *byte) syscall.Errno {
	_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(b)), 1,
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return e
}
