//go:build !linux

// Package sockio makes socket reads and writes with raw system calls on
// Linux; elsewhere the callers use the conn's own Read and Write.
package sockio

import (
	"errors"
	"syscall"
)

// ErrNoRaw: no raw socket I/O on this system; callers check before.
var ErrNoRaw = errors.New("sockio: no raw socket I/O on this system")

// Do is never called here: callers use raw I/O on Linux only.
func Do(syscall.RawConn, []byte, bool, bool) (int, syscall.Errno, error) { return 0, 0, ErrNoRaw }
