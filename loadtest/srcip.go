package loadtest

import (
	"context"
	"net"

	"github.com/xmq-io/xmq/listeners"
)

// errNoSrcIPs is returned for -src-ips when the dialer cannot bind source
// addresses; listeners.Dial can (tcp, tls, ws, wss).
var errNoSrcIPs = listeners.ErrLocalIPQUIC

// withLocalIP makes listeners.Dial bind the connection's source address.
func withLocalIP(ctx context.Context, ip net.IP) context.Context {
	return listeners.WithLocalIP(ctx, ip)
}
