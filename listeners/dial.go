package listeners

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/quic-go/quic-go"
	"go.uber.org/zap"
)

// Dial connects to an MQTT server at rawURL and returns a conn carrying raw
// MQTT bytes, whatever the transport:
//
//	mqtt://host:port, tcp://host:port or host:port   plain TCP (default port 1883)
//	mqtts://, ssl://, tls://host:port                TLS (8883)
//	ws://host:port/path                              WebSocket (8083, path /mqtt)
//	wss://host:port/path                             WebSocket over TLS (8084, /mqtt)
//	quic://host:port                                 QUIC, ALPN mqtt (14567/udp)
//
// tlsConfig is the client configuration of mqtts, wss and quic (nil: the
// system roots); its ServerName defaults to the URL's host. Dial sets the
// ALPN protocols each transport needs. The conn is ready when Dial returns:
// TLS handshake, WebSocket upgrade (subprotocol mqtt) or QUIC handshake and
// stream done. ctx bounds all of it.
func Dial(ctx context.Context, rawURL string, tlsConfig *tls.Config) (net.Conn, error) {
	transport, addr, path, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	var c net.Conn
	switch transport {
	case TransportTCP:
		c, err = netDialer(ctx).DialContext(ctx, "tcp", addr)
	case TransportTLS:
		d := tls.Dialer{NetDialer: netDialer(ctx), Config: clientTLS(tlsConfig, addr)}
		c, err = d.DialContext(ctx, "tcp", addr)
	case TransportWS, TransportWSS:
		c, err = dialWS(ctx, transport, addr, path, tlsConfig)
	case TransportQUIC:
		if hasLocalIP(ctx) {
			err = ErrLocalIPQUIC
			break
		}
		c, err = dialQUIC(ctx, addr, tlsConfig)
	}
	if err != nil {
		return nil, fmt.Errorf("listeners: dial %s: %w", rawURL, err)
	}
	return c, nil
}

// clientTLS clones cfg (or starts a new one) with ServerName defaulting to
// addr's host.
func clientTLS(cfg *tls.Config, addr string, alpn ...string) *tls.Config {
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	} else {
		cfg = cfg.Clone()
	}
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	if alpn != nil {
		cfg.NextProtos = alpn
	}
	return cfg
}

func dialWS(ctx context.Context, transport, addr, path string, tlsConfig *tls.Config) (net.Conn, error) {
	var nc *wsNetConn
	d := websocket.Dialer{
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := netDialer(ctx).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			nc = &wsNetConn{Conn: c}
			return nc, nil
		},
		Subprotocols:    Subprotocols[:1],
		WriteBufferPool: &dialWritePool,
	}
	scheme := "ws"
	if transport == TransportWSS {
		scheme = "wss"
		d.TLSClientConfig = clientTLS(tlsConfig, addr, ALPNHTTP)
	}
	ws, resp, err := d.DialContext(ctx, scheme+"://"+addr+path, nil)
	if err != nil {
		if resp != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			_ = resp.Body.Close()
			return nil, fmt.Errorf("%w (%s: %s)", err, resp.Status, strings.TrimSpace(string(body)))
		}
		return nil, err
	}
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	nc.frames()
	c := newWSConn(ws, nc, ws.RemoteAddr(), zap.NewNop())
	if tc, ok := ws.NetConn().(*tls.Conn); ok {
		c.tls = tc
	}
	return c, nil
}

// dialWritePool lends write buffers to dialled WebSocket conns, so an idle
// one holds none.
var dialWritePool sync.Pool

func dialQUIC(ctx context.Context, addr string, tlsConfig *tls.Config) (net.Conn, error) {
	qc, err := quic.DialAddr(ctx, addr, clientTLS(tlsConfig, addr, ALPNMQTT), quicConfig(30*time.Second, 10*time.Second))
	if err != nil {
		return nil, err
	}
	st, err := qc.OpenStreamSync(ctx)
	if err != nil {
		_ = qc.CloseWithError(quicCodeRefused, "no stream")
		return nil, err
	}
	return newQUICConn(qc, st, nil), nil
}

// schemes maps URL schemes to transports.
var schemes = map[string]string{
	"mqtt": TransportTCP, "tcp": TransportTCP,
	"mqtts": TransportTLS, "ssl": TransportTLS, "tls": TransportTLS,
	"ws": TransportWS, "wss": TransportWSS, "quic": TransportQUIC,
}

// Scheme returns the canonical URL scheme of transport (mqtt, mqtts, ws,
// wss, quic), or "" for an unknown transport: what a host:port given with a
// transport becomes before ParseURL reads it.
func Scheme(transport string) string {
	switch transport {
	case TransportTCP:
		return "mqtt"
	case TransportTLS:
		return "mqtts"
	case TransportWS, TransportWSS, TransportQUIC:
		return transport
	}
	return ""
}

// ParseURL splits a dial URL, in the grammar Dial reads, into its
// transport, host:port (the transport's default port filled in) and, for
// ws and wss, the path; configuration checks it with ParseURL before
// anything is dialled.
func ParseURL(rawURL string) (transport, addr, path string, err error) {
	if !strings.Contains(rawURL, "://") {
		// A bare host:port is plain TCP.
		if _, _, err := net.SplitHostPort(rawURL); err != nil {
			return "", "", "", fmt.Errorf("listeners: %q is neither a URL nor host:port: %w", rawURL, err)
		}
		return TransportTCP, rawURL, "", nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", "", fmt.Errorf("listeners: %w", err)
	}
	transport, ok := schemes[strings.ToLower(u.Scheme)]
	if !ok {
		return "", "", "", fmt.Errorf("listeners: unknown scheme %q in %q (mqtt, tcp, mqtts, ws, wss, quic)", u.Scheme, rawURL)
	}
	host := u.Hostname()
	if host == "" {
		return "", "", "", fmt.Errorf("listeners: no host in %q", rawURL)
	}
	if strings.Contains(host, ":") && net.ParseIP(host) == nil {
		return "", "", "", fmt.Errorf("listeners: bad host %q in %q", host, rawURL)
	}
	port := u.Port()
	if port == "" {
		port = DefaultPort(transport)
	}
	if transport == TransportWS || transport == TransportWSS {
		path = u.EscapedPath()
		if path == "" {
			path = DefaultPath
		}
	}
	return transport, net.JoinHostPort(host, port), path, nil
}
