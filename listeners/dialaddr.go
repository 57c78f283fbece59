package listeners

import (
	"context"
	"errors"
	"net"
)

// localIPKey carries the source address Dial binds, set by WithLocalIP.
type localIPKey struct{}

// ErrLocalIPQUIC reports WithLocalIP on a quic:// dial, which does not bind
// source addresses.
var ErrLocalIPQUIC = errors.New("listeners: a source address is not supported for quic")

// WithLocalIP returns a context that makes Dial bind its connection to the
// source address ip (the kernel picks the port). Each source address has
// its own ephemeral ports, so a load generator spreading connections over
// 127.0.0.1, 127.0.0.2 … passes the ~28,000 connections one address
// allows. tcp, tls, ws and wss honour it; quic refuses it.
func WithLocalIP(ctx context.Context, ip net.IP) context.Context {
	return context.WithValue(ctx, localIPKey{}, ip)
}

// netDialer is the dialer for a stream transport: bound to the source
// address of WithLocalIP when ctx carries one.
func netDialer(ctx context.Context) *net.Dialer {
	d := &net.Dialer{}
	if ip, ok := ctx.Value(localIPKey{}).(net.IP); ok && ip != nil {
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	return d
}

func hasLocalIP(ctx context.Context) bool {
	ip, ok := ctx.Value(localIPKey{}).(net.IP)
	return ok && ip != nil
}
