package listeners

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"go.uber.org/zap"
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

// Default ports of each transport: what a URL without a port dials and
// what xmq listens on with no configuration.
const (
	DefaultTCPPort  = "1883"
	DefaultTLSPort  = "8883"
	DefaultWSPort   = "8083"
	DefaultWSSPort  = "8084"
	DefaultQUICPort = "14567"
	// DefaultPath is the HTTP path of the WebSocket transports.
	DefaultPath = "/mqtt"
	// AnyPath as a listener's Path serves MQTT over WebSocket on every
	// HTTP path, as Mosquitto does: its clients dial "/", "/mqtt" or
	// anything else.
	AnyPath = "*"
)

// DefaultPort returns the default port of transport, or "".
func DefaultPort(transport string) string {
	switch transport {
	case TransportTCP:
		return DefaultTCPPort
	case TransportTLS:
		return DefaultTLSPort
	case TransportWS:
		return DefaultWSPort
	case TransportWSS:
		return DefaultWSSPort
	case TransportQUIC:
		return DefaultQUICPort
	}
	return ""
}

// ALPN protocols: MQTT on TLS and QUIC (what EMQX clients send), and
// HTTP/1.1 on WSS, where the WebSocket upgrade happens.
const (
	ALPNMQTT = "mqtt"
	ALPNHTTP = "http/1.1"
	// alpnACME is the ACME TLS-ALPN-01 challenge (certs.ALPNACME); a
	// connection that negotiated it is closed after its handshake.
	alpnACME = "acme-tls/1"
)

// WebSocket subprotocols accepted, in order of preference [MQTT-6.0.0-3].
var Subprotocols = []string{"mqtt", "mqttv3.1"}

// Errors.
var (
	// ErrTextFrame is returned by a WebSocket conn's Read when the peer sent a
	// text frame: MQTT over WebSocket uses binary frames only [MQTT-6.0.0-1].
	ErrTextFrame = errors.New("listeners: websocket text frame refused: MQTT takes binary frames only")
)

// Listener is a net.Listener for one transport. Its conns carry raw MQTT bytes.
type Listener interface {
	net.Listener
	// Transport names the transport: "tcp", "tls", "ws", "wss" or "quic".
	Transport() string
	// HandshakeFailures counts the connections given up before they
	// reached Accept, by reason (the Fail constants): every reason the
	// transport can meet is there from the start, zeros included.
	HandshakeFailures() map[string]int64
}

// CertIdentifier is implemented by the conns of a listener configured with
// IdentityAsUsername: CertIdentity returns the identity taken from the
// client's verified certificate, which the broker uses as the MQTT
// username in place of the one in CONNECT (Mosquitto's
// use_identity_as_username). A listener with IdentityAsUsername never hands
// out a conn whose identity is empty.
type CertIdentifier interface {
	CertIdentity() string
}

// TLSStater is implemented by the conns of the TLS-based transports (tls,
// wss, quic): the state of the connection's TLS handshake.
type TLSStater interface {
	ConnectionState() tls.ConnectionState
}

// CrossOriginer is implemented by the conns of ws and wss: CrossOrigin
// returns the Origin of the browser page that opened the connection when
// that page is foreign, and "" when it is trusted (see
// Options.AllowedOrigins) or the client is no browser. Core asks for it
// (core.CrossOriginer) so that a foreign page never gets a local client's
// privileges.
type CrossOriginer interface {
	CrossOrigin() string
}

// Identity sources for Options.IdentityAsUsername.
const (
	IdentityNone = ""    // the username of CONNECT counts
	IdentityCN   = "cn"  // the subject common name
	IdentitySAN  = "san" // the first DNS name, e-mail address or URI of the subject alternative names
)

// Options configures one listener. Listen fills the defaults.
type Options struct {
	// Name labels the listener in logs (default: the transport).
	Name string
	// Transport is tcp, tls, ws, wss or quic (default tcp).
	Transport string
	// Address is host:port; port 0 picks a free port, which Addr reports.
	// Default: all interfaces on the transport's default port.
	Address string
	// Path is the HTTP path of ws and wss (default /mqtt); AnyPath ("*")
	// answers on every path, as Mosquitto does.
	Path string
	// TLS is the server configuration of tls, wss and quic (required for
	// them). The listener clones it and puts its own ALPN protocol first.
	TLS *tls.Config
	// IdentityAsUsername takes the MQTT username from the client
	// certificate: IdentityCN or IdentitySAN. A client without a verified
	// certificate carrying that identity is refused. It needs a TLS config
	// that asks for client certificates.
	IdentityAsUsername string
	// AllowedOrigins restricts the browser pages that may open a ws or
	// wss connection: exact origins ("https://app.example.com"), wildcard
	// hosts ("https://*.example.com") or "*". Empty or "*": any page may
	// connect. Pages listed by name are trusted like the broker's own;
	// every other page is foreign: its conn reports its Origin
	// (CrossOriginer), so it gets no anonymous-on-loopback privilege and
	// must log in. Always let in, whatever the list, and trusted: requests
	// without an Origin header (not from a browser), same-origin pages
	// (the Origin's host and port are the request's Host, scheme ignored,
	// on an IP address, localhost or this machine's name) and
	// TrustedOrigins.
	AllowedOrigins []string
	// TrustedOrigins are the origins of the broker's own pages (the
	// dashboard): always let in and trusted, whatever AllowedOrigins says.
	TrustedOrigins []string
	// TrustedProxies are the IP addresses and CIDR prefixes of load
	// balancers and proxies: ws and wss take the client's address from
	// their X-Forwarded-For or Forwarded header, and with ProxyProtocol
	// every listener from their PROXY protocol header. Peers outside it
	// are never believed.
	TrustedProxies []string
	// ProxyProtocol expects a PROXY protocol v1 or v2 header on every
	// connection from TrustedProxies (tcp, tls, ws, wss).
	ProxyProtocol bool
	// MaxConnections bounds this listener's open connections, handshakes
	// included; 0 means no limit. A connection beyond it is closed at once.
	MaxConnections int
	// HandshakeTimeout bounds what happens before a conn reaches Accept: the
	// PROXY header, the TLS handshake, the WebSocket upgrade, the QUIC
	// handshake and first stream (default 10s).
	HandshakeTimeout time.Duration
	// IdleTimeout is the QUIC idle timeout: a peer heard from in none of
	// it is gone (default 30s). The server keeps live peers busy with QUIC
	// PINGs, so the MQTT keepalive, not this, ends an idle MQTT client.
	IdleTimeout time.Duration
	// Log is the logger (default: none). The listener adds its name and
	// transport.
	Log *zap.Logger
}

func (o *Options) setDefaults() {
	if o.Transport == "" {
		o.Transport = TransportTCP
	}
	if o.Name == "" {
		o.Name = o.Transport
	}
	if o.Address == "" {
		o.Address = ":" + DefaultPort(o.Transport)
	}
	if o.Path == "" && (o.Transport == TransportWS || o.Transport == TransportWSS) {
		o.Path = DefaultPath
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
}

// Validate reports the first inconsistent option.
func (o *Options) Validate() error {
	if err := Supported(o.Transport); err != nil {
		return err
	}
	secure := o.Transport == TransportTLS || o.Transport == TransportWSS || o.Transport == TransportQUIC
	switch {
	case secure && o.TLS == nil:
		return fmt.Errorf("listeners: %s needs a TLS configuration", o.Transport)
	case !secure && o.TLS != nil:
		return fmt.Errorf("listeners: %s takes no TLS configuration", o.Transport)
	case o.MaxConnections < 0:
		return errors.New("listeners: max connections must not be negative")
	case o.HandshakeTimeout < 0 || o.IdleTimeout < 0:
		return errors.New("listeners: timeouts must not be negative")
	case o.Path != "" && o.Path != AnyPath && !strings.HasPrefix(o.Path, "/"):
		return fmt.Errorf("listeners: path %q must start with / (or be %q: every path)", o.Path, AnyPath)
	case o.Path != "" && o.Transport != TransportWS && o.Transport != TransportWSS:
		return fmt.Errorf("listeners: path is for ws and wss, not %s", o.Transport)
	case len(o.AllowedOrigins) > 0 && o.Transport != TransportWS && o.Transport != TransportWSS:
		return fmt.Errorf("listeners: allowed origins are for ws and wss, not %s", o.Transport)
	case len(o.TrustedOrigins) > 0 && o.Transport != TransportWS && o.Transport != TransportWSS:
		return fmt.Errorf("listeners: trusted origins are for ws and wss, not %s", o.Transport)
	case o.ProxyProtocol && o.Transport == TransportQUIC:
		return errors.New("listeners: the PROXY protocol is for TCP-based transports, not quic")
	case o.ProxyProtocol && len(o.TrustedProxies) == 0:
		return errors.New("listeners: proxy protocol needs trusted proxies: the sources allowed to send the header")
	}
	switch o.IdentityAsUsername {
	case IdentityNone:
	case IdentityCN, IdentitySAN:
		if !secure {
			return fmt.Errorf("listeners: identity as username needs a TLS transport, not %s", o.Transport)
		}
		if o.TLS.ClientAuth < tls.VerifyClientCertIfGiven {
			return errors.New("listeners: identity as username needs verified client certificates (verify optional or required)")
		}
	default:
		return fmt.Errorf("listeners: identity as username %q: want cn or san", o.IdentityAsUsername)
	}
	if _, err := parsePrefixes(o.TrustedProxies); err != nil {
		return err
	}
	for _, origin := range o.AllowedOrigins {
		if origin != "*" && !strings.Contains(origin, "://") {
			return fmt.Errorf("listeners: allowed origin %q: want scheme://host[:port] or *", origin)
		}
	}
	for _, origin := range o.TrustedOrigins {
		if _, _, ok := parseOrigin(origin); !ok || strings.Contains(origin, "*") {
			return fmt.Errorf("listeners: trusted origin %q: want scheme://host[:port]", origin)
		}
	}
	return nil
}

// Supported reports whether transport can be listened on and dialled: nil
// for tcp, tls, ws, wss and quic, an error for anything else.
func Supported(transport string) error {
	switch transport {
	case TransportTCP, TransportTLS, TransportWS, TransportWSS, TransportQUIC:
		return nil
	default:
		return fmt.Errorf("listeners: unknown transport %q (tcp, tls, ws, wss, quic)", transport)
	}
}

// Listen starts the listener o describes.
func Listen(o Options) (Listener, error) {
	o.setDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.Log = o.Log.With(zap.String("listener", o.Name), zap.String("transport", o.Transport))
	switch o.Transport {
	case TransportTCP, TransportTLS:
		return listenStream(o)
	case TransportWS, TransportWSS:
		return listenWS(o)
	default:
		return listenQUIC(o)
	}
}

// ListenTCP listens for plain MQTT over TCP on addr (host:port; port 0
// picks a free port, which Addr reports).
func ListenTCP(addr string) (Listener, error) {
	return Listen(Options{Transport: TransportTCP, Address: addr})
}

// withALPN clones cfg with protos first in its ALPN list.
// requireIdentity is the VerifyConnection hook of a listener with
// IdentityAsUsername: it refuses, in the handshake and with an alert the
// client can report, a certificate that carries no identity of mode.
func requireIdentity(mode string, refused func()) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if certIdentity(&cs, mode) == "" {
			if refused != nil {
				refused()
			}
			return fmt.Errorf("%w: want a %s identity", errNoIdentity, mode)
		}
		return nil
	}
}

func withALPN(cfg *tls.Config, protos ...string) *tls.Config {
	c := cfg.Clone()
	next := append([]string{}, protos...)
	for _, p := range cfg.NextProtos {
		if !contains(next, p) {
			next = append(next, p)
		}
	}
	c.NextProtos = next
	return c
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// certIdentity returns the identity of the verified client certificate in
// state that mode asks for, or "".
func certIdentity(state *tls.ConnectionState, mode string) string {
	if mode == IdentityNone || len(state.VerifiedChains) == 0 || len(state.PeerCertificates) == 0 {
		return ""
	}
	return leafIdentity(state.PeerCertificates[0], mode)
}

func leafIdentity(leaf *x509.Certificate, mode string) string {
	switch mode {
	case IdentityCN:
		return leaf.Subject.CommonName
	case IdentitySAN:
		switch {
		case len(leaf.DNSNames) > 0:
			return leaf.DNSNames[0]
		case len(leaf.EmailAddresses) > 0:
			return leaf.EmailAddresses[0]
		case len(leaf.URIs) > 0:
			return leaf.URIs[0].String()
		}
	}
	return ""
}

// prefixes is a set of trusted sources.
type prefixes []netip.Prefix

// parsePrefixes reads IP addresses and CIDR prefixes.
func parsePrefixes(list []string) (prefixes, error) {
	var ps prefixes
	for _, s := range list {
		if strings.Contains(s, "/") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("listeners: trusted proxy %q: %w", s, err)
			}
			ps = append(ps, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("listeners: trusted proxy %q: want an IP address or CIDR prefix", s)
		}
		ps = append(ps, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return ps, nil
}

// contains reports whether the address is trusted.
func (ps prefixes) contains(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// containsAddr reports whether a net.Addr's IP is trusted.
func (ps prefixes) containsAddr(addr net.Addr) bool {
	if len(ps) == 0 || addr == nil {
		return false
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return false
	}
	return ps.contains(ap.Addr())
}
