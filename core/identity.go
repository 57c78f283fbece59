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
