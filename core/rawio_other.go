//go:build !linux

package core

import (
	"net"
	"syscall"
)

// Outside Linux every connection is read and written through net.Conn, and
// an idle connection waits for bytes in a plain read that holds its read
// buffer: the same behaviour as Linux's raw system calls (rawio_linux.go),
// at the cost of a Go system call per read and write and a read buffer per
// idle connection. Raw system call numbers are Linux's; on macOS the
// syscall package cannot make them at all.

// rawConnOf returns nil: no connection is read with raw system calls.
func rawConnOf(net.Conn) syscall.RawConn { return nil }

// connRead reads into p through conn.
func connRead(conn net.Conn, _ syscall.RawConn, p []byte) (int, error) { return conn.Read(p) }

// connWrite writes buf through conn.
func connWrite(conn net.Conn, _ syscall.RawConn, buf []byte) (int, error) { return conn.Write(buf) }

// waitReadable returns at once: the read that follows waits for bytes.
func (c *client) waitReadable() error { return nil }
