package core

import (
	"net"
	"syscall"
)

// CertIdentifier is implemented by a conn whose transport authenticated the
// client with a certificate and whose listener is configured to use that
// identity as the MQTT username (Mosquitto's use_identity_as_username).
// listeners' TLS, WSS and QUIC conns implement it; core does not import
// them, it only asks the conn.
type CertIdentifier interface {
	// CertIdentity returns the identity, or "" when the listener does not
	// use one.
	CertIdentity() string
}

// CrossOriginer is implemented by a WebSocket conn. CrossOrigin returns the
// Origin header of the browser page that opened the connection when the
// page is not the broker's own — not same-origin, not the dashboard, not
// listed by the operator — and "" otherwise (no browser, or a trusted
// page). The Authenticator hears of it: a page the operator happens to
// visit must not drive a local broker with a local client's privileges.
type CrossOriginer interface {
	CrossOrigin() string
}

func crossOrigin(conn net.Conn) string {
	if co, ok := conn.(CrossOriginer); ok {
		return co.CrossOrigin()
	}
	return ""
}

// ReadWaiter is implemented by a conn that can wait until bytes can be read
// without reading them (a WebSocket conn waits for the next frame): the
// reader then gives its read buffer back while the peer is silent, as it
// does on a plain TCP socket.
type ReadWaiter interface {
	WaitReadable() error
}

// NowWriter is implemented by a conn that frames what it writes (WebSocket
// over plain TCP) and can still write in place, as a reader does for its
// subscribers after a small burst (inline.go). WritesNow reports whether
// WriteNow can work on this conn. WriteNow writes what the socket takes at
// once, never waiting, and returns how much of p that was; when it is less
// than len(p), p[n:] must begin the next Write, which finishes the frame.
type NowWriter interface {
	WritesNow() bool
	WriteNow(p []byte) (int, error)
}

// IdleSocket is implemented by a conn that reads through buffers of its
// own from a socket the server may watch (WebSocket over plain TCP).
// IdleSocket returns the socket when none of those buffers holds a byte
// and the next byte on the socket starts something new (a frame), so the
// reader may park on the socket, as an idle TCP connection does; nil
// otherwise. It may wait for the header of a fragmented message's next
// frame, under the read deadline.
type IdleSocket interface {
	IdleSocket() syscall.RawConn
}

// transportUsername returns the username the connection's transport vouches
// for, replacing the one in CONNECT, and whether there is one. The
// Authenticator then sees it as the username.
func transportUsername(conn net.Conn) (string, bool) {
	if ci, ok := conn.(CertIdentifier); ok {
		if id := ci.CertIdentity(); id != "" {
			return id, true
		}
	}
	return "", false
}
