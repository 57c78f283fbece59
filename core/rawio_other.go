//go:build !linux

package core

import (
	"errors"
	"net"
	"syscall"
)

// Outside Linux every connection is read and written through net.Conn, and
// an idle TCP connection waits for bytes in a plain read that holds its
// read buffer and goroutine (there is no poller either, poller_other.go):
// the same behaviour as Linux's raw system calls (rawio_linux.go), at the
// cost of a Go system call per read and write and a read buffer and a
// stack per idle connection. Raw system call numbers are Linux's; on macOS
// the syscall package cannot make them at all.

// rawConnOf returns nil: no connection is read with raw system calls.
func rawConnOf(net.Conn) syscall.RawConn { return nil }

// The raw calls are never made without a raw socket.
var errNoRaw = errors.New("core: no raw socket I/O on this system")

func rawRead(syscall.RawConn, []byte) (int, error)     { return 0, errNoRaw }
func rawReadNow(syscall.RawConn, []byte) (int, error)  { return 0, errNoRaw }
func rawWrite(syscall.RawConn, []byte) (int, error)    { return 0, errNoRaw }
func rawWriteNow(syscall.RawConn, []byte) (int, error) { return 0, errNoRaw }

// waitRawReadable is never called without a raw socket.
func (c *client) waitRawReadable() error { return nil }
