// Package listeners turns each transport xmq speaks into a net.Conn that
// carries raw MQTT bytes, and dials the same transports from the client side.
//
// Contract:
//
//   - A Listener is a net.Listener plus Transport(), the transport's name
//     ("tcp" today; "tls", "ws", "wss" and "quic" arrive in their own issue).
//     Everything above this package — core's Server.Serve, the load test —
//     sees only net.Listener and net.Conn.
//   - Accept never waits on one slow peer. Per-connection handshakes (TLS,
//     WebSocket upgrade, QUIC stream accept) run off the accept path, under
//     a deadline, and finished conns are handed to Accept.
//   - A conn returned by Accept or Dial carries the MQTT byte stream and
//     nothing else: no framing is visible, a packet may span reads and a
//     read may hold many packets. It follows the net.Conn rules: one
//     goroutine may read while another writes; Close unblocks both and
//     ends both directions.
//   - Close on a Listener is idempotent: the first call closes it and any
//     later call returns nil. After Close, Accept returns an error that
//     matches net.ErrClosed.
//   - Dial takes a URL: mqtt:// or tcp:// (or a bare host:port), mqtts://,
//     ws://, wss:// or quic://. A context made by WithLocalIP binds the
//     connection's source address (tcp, tls, ws, wss), which is how the
//     load generator spreads connections over several source addresses.
//
// The package never imports core or codec (see DESIGN.md): it moves bytes,
// it does not read MQTT.
package listeners
