package core

import "net"

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
