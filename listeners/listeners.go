package listeners

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
)

// Transport names, as Listener.Transport returns them and as a listener's
// configuration names them.
const (
	TransportTCP  = "tcp"
	TransportTLS  = "tls"
	TransportWS   = "ws"
	TransportWSS  = "wss"
	TransportQUIC = "quic"
)

// DefaultTCPPort is the port a mqtt:// or tcp:// URL without one dials.
const DefaultTCPPort = "1883"

// ErrNotBuilt reports a transport that xmq knows of but does not implement yet.
var ErrNotBuilt = errors.New("listeners: transport not built yet")

// Listener is a net.Listener for one transport. Its conns carry raw MQTT bytes.
type Listener interface {
	net.Listener
	// Transport names the transport: "tcp", later "tls", "ws", "wss", "quic".
	Transport() string
}

// Supported reports whether transport can be listened on and dialled today; a
// transport that is planned but not built returns an error matching
// ErrNotBuilt, an unknown one a plain error.
func Supported(transport string) error {
	switch transport {
	case TransportTCP:
		return nil
	case TransportTLS, TransportWS, TransportWSS, TransportQUIC:
		return fmt.Errorf("%w: %q (only %q is available today)", ErrNotBuilt, transport, TransportTCP)
	default:
		return fmt.Errorf("listeners: unknown transport %q (tcp, tls, ws, wss, quic)", transport)
	}
}

// ListenTCP listens for plain MQTT over TCP on addr (host:port; port 0
// picks a free port, which Addr reports).
func ListenTCP(addr string) (Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listeners: tcp: %w", err)
	}
	return &tcpListener{Listener: l}, nil
}

// tcpListener adds Transport and an idempotent Close to a TCP listener.
type tcpListener struct {
	net.Listener
	once sync.Once
}

func (l *tcpListener) Transport() string { return TransportTCP }

// Close closes the listener; the first call reports the result, later calls return nil.
func (l *tcpListener) Close() error {
	var err error
	l.once.Do(func() { err = l.Listener.Close() })
	return err
}

// Dial connects to an MQTT server at rawURL and returns a conn carrying raw
// MQTT bytes. Accepted today: mqtt://host:port, tcp://host:port and a bare
// host:port; a URL without a port dials DefaultTCPPort. tlsConfig is for
// the TLS-based transports (mqtts, wss, quic) and is ignored by tcp.
func Dial(ctx context.Context, rawURL string, tlsConfig *tls.Config) (net.Conn, error) {
	_ = tlsConfig // used by mqtts://, wss:// and quic:// when they arrive
	transport, addr, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if transport != TransportTCP {
		return nil, fmt.Errorf("%w: cannot dial %s (%s); only mqtt://, tcp:// and host:port work today",
			ErrNotBuilt, rawURL, transport)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listeners: dial %s: %w", rawURL, err)
	}
	return conn, nil
}

// schemes maps URL schemes to transports.
var schemes = map[string]string{
	"mqtt": TransportTCP, "tcp": TransportTCP,
	"mqtts": TransportTLS, "ssl": TransportTLS, "tls": TransportTLS,
	"ws": TransportWS, "wss": TransportWSS, "quic": TransportQUIC,
}

// parseURL splits a dial URL into its transport and host:port.
func parseURL(rawURL string) (transport, addr string, err error) {
	if !strings.Contains(rawURL, "://") {
		// A bare host:port is plain TCP.
		if _, _, err := net.SplitHostPort(rawURL); err != nil {
			return "", "", fmt.Errorf("listeners: %q is neither a URL nor host:port: %w", rawURL, err)
		}
		return TransportTCP, rawURL, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", fmt.Errorf("listeners: %w", err)
	}
	transport, ok := schemes[strings.ToLower(u.Scheme)]
	if !ok {
		return "", "", fmt.Errorf("listeners: unknown scheme %q in %q (mqtt, tcp, mqtts, ws, wss, quic)", u.Scheme, rawURL)
	}
	host := u.Hostname()
	if host == "" {
		return "", "", fmt.Errorf("listeners: no host in %q", rawURL)
	}
	if strings.Contains(host, ":") && net.ParseIP(host) == nil {
		return "", "", fmt.Errorf("listeners: bad host %q in %q", host, rawURL)
	}
	port := u.Port()
	if port == "" {
		if transport != TransportTCP {
			return transport, u.Host, nil // the default ports of other transports come with them
		}
		port = DefaultTCPPort
	}
	return transport, net.JoinHostPort(host, port), nil
}
