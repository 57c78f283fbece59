//go:build !linux

package listeners

import (
	"errors"
	"syscall"
)

// rawSocketIO: no raw socket I/O here, so WebSocket conns read and
// write through the conn, and always through gorilla (the broker hands
// deliveries to a writer).
const rawSocketIO = false

var errNoSocketIO = errors.New("listeners: no raw socket I/O on this system")

func writeSocketNow(syscall.RawConn, []byte) (int, error) { return 0, errNoSocketIO }
func writeSocket(syscall.RawConn, []byte) (int, error)    { return 0, errNoSocketIO }
func readSocket(syscall.RawConn, []byte) (int, error)     { return 0, errNoSocketIO }
