package listeners

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
)

// Reasons a listener gives up on a connection before it carries MQTT, as
// Listener.HandshakeFailures reports them.
const (
	// FailMaxConnections: the listener held MaxConnections already.
	FailMaxConnections = "max_connections"
	// FailTimeout: the PROXY header, TLS handshake or QUIC stream did not
	// come within HandshakeTimeout.
	FailTimeout = "timeout"
	// FailClosed: the peer closed or reset the connection mid-handshake
	// (health checks and port scanners do).
	FailClosed = "closed"
	// FailProxyHeader: a trusted proxy sent no valid PROXY header.
	FailProxyHeader = "proxy_header"
	// FailNotTLS: the first bytes on a TLS port were not TLS (a client
	// speaking plain MQTT or HTTP to it).
	FailNotTLS = "not_tls"
	// FailTLSVersion: no TLS version both sides accept.
	FailTLSVersion = "tls_version"
	// FailTLSCipher: no cipher suite both sides accept.
	FailTLSCipher = "tls_cipher"
	// FailClientCertificate: a client certificate was required and
	// missing, did not verify, or carried no identity to use as the user
	// name.
	FailClientCertificate = "client_certificate"
	// FailRejectedByClient: the client ended the handshake with an alert,
	// most often because it does not trust the broker's certificate (an
	// unknown CA, a name the certificate does not cover, an expired one).
	FailRejectedByClient = "rejected_by_client"
	// FailTLSOther: any other TLS handshake error.
	FailTLSOther = "tls_other"
	// FailWSPath: a WebSocket request for another path than Path.
	FailWSPath = "ws_path"
	// FailWSRequest: an HTTP request that is no valid WebSocket upgrade.
	FailWSRequest = "ws_request"
	// FailWSSubprotocol: a WebSocket upgrade without the mqtt subprotocol.
	FailWSSubprotocol = "ws_subprotocol"
	// FailWSOrigin: a browser page whose origin AllowedOrigins refuses.
	FailWSOrigin = "ws_origin"
)

// failureReasons lists the reasons a listener of transport can report, so
// it reports each of them from the start, zeros included.
func failureReasons(transport string, proxy bool) []string {
	secure := transport == TransportTLS || transport == TransportWSS
	out := []string{FailMaxConnections}
	if proxy || secure || transport == TransportQUIC {
		out = append(out, FailTimeout)
	}
	if proxy || secure {
		out = append(out, FailClosed)
	}
	if proxy {
		out = append(out, FailProxyHeader)
	}
	if secure {
		out = append(out, FailNotTLS, FailTLSVersion, FailTLSCipher, FailClientCertificate, FailRejectedByClient, FailTLSOther)
	}
	if transport == TransportQUIC {
		out = append(out, FailClosed, FailClientCertificate)
	}
	if transport == TransportWS || transport == TransportWSS {
		out = append(out, FailWSPath, FailWSRequest, FailWSSubprotocol, FailWSOrigin)
	}
	return out
}

// failures counts a listener's handshake failures by reason. The counters
// are made at Listen and never change, so counting takes no lock.
type failures struct {
	n map[string]*atomic.Int64
}

func newFailures(transport string, proxy bool) *failures {
	f := &failures{n: map[string]*atomic.Int64{}}
	for _, r := range failureReasons(transport, proxy) {
		f.n[r] = new(atomic.Int64)
	}
	return f
}

// add counts one failure for reason, one of failureReasons' for the
// listener's transport.
func (f *failures) add(reason string) {
	if n := f.n[reason]; n != nil {
		n.Add(1)
	}
}

func (f *failures) snapshot() map[string]int64 {
	out := make(map[string]int64, len(f.n))
	for r, n := range f.n {
		out[r] = n.Load()
	}
	return out
}

// errNoIdentity refuses a client certificate that carries no identity to
// use as the user name (Options.IdentityAsUsername).
var errNoIdentity = errors.New("listeners: the client certificate carries no identity to use as the user name")

// handshakeFailure classifies an error of a connection's handshake: the
// PROXY header, then TLS. crypto/tls has typed errors for some causes and
// only messages for others; listeners' tests pin each message, so a Go
// release that rewords one shows up there.
func handshakeFailure(err error) string {
	var rh tls.RecordHeaderError
	var cv *tls.CertificateVerificationError
	var op *net.OpError
	msg := err.Error()
	switch {
	case isTimeout(err):
		return FailTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed):
		return FailClosed
	case errors.Is(err, errProxyHeader):
		return FailProxyHeader
	case errors.As(err, &rh):
		return FailNotTLS
	case errors.As(err, &cv), errors.Is(err, errNoIdentity),
		strings.Contains(msg, "client didn't provide a certificate"):
		return FailClientCertificate
	case errors.As(err, &op) && op.Op == "remote error":
		return FailRejectedByClient
	case strings.Contains(msg, "unsupported versions"), strings.Contains(msg, "protocol version not supported"):
		return FailTLSVersion
	case strings.Contains(msg, "no cipher suite supported"):
		return FailTLSCipher
	}
	return FailTLSOther
}
