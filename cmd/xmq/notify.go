package main

import (
	"fmt"
	"net"
)

// sdNotify sends state ("READY=1", "STOPPING=1") to the service manager's
// notification socket, as sd_notify(3) does: one datagram to the unixgram
// socket named by $NOTIFY_SOCKET, which systemd sets for a Type=notify unit
// (a leading @ names Linux's abstract namespace, which net handles). With
// no socket (not run by systemd) it does nothing. The protocol is a dozen
// lines, not worth a dependency on libsystemd or go-systemd.
func sdNotify(socket, state string) error {
	if socket == "" {
		return nil
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("notify %s: %w", socket, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("notify %s: %w", socket, err)
	}
	return nil
}
