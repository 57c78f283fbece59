// Package listeners turns each transport xmq speaks into a net.Conn that
// carries raw MQTT bytes, and dials the same transports from the client side.
//
// Contract:
//
//   - A Listener is a net.Listener plus Transport(), the transport's name:
//     "tcp", "tls", "ws", "wss" or "quic". Listen(Options) makes one.
//     Everything above this package — core's Server.Serve, the load test —
//     sees only net.Listener and net.Conn.
//   - Accept never waits on one slow peer. Per-connection handshakes (PROXY
//     header, TLS, WebSocket upgrade, QUIC stream accept) run on the
//     connection's own goroutine under Options.HandshakeTimeout, and
//     finished conns are handed to Accept through a channel.
//   - A conn returned by Accept or Dial carries the MQTT byte stream and
//     nothing else: no framing is visible, a packet may span reads and a
//     read may hold many packets. It follows the net.Conn rules: one
//     goroutine may read while another writes; Close unblocks both and
//     ends both directions (for QUIC the stream, then the connection).
//   - Capabilities: conns of TLS-based transports implement TLSStater and
//     CertIdentifier (with IdentityAsUsername, core takes the username from
//     the client certificate); ws and wss conns implement CrossOriginer
//     (the Origin of a foreign browser page, which core's Authenticator
//     hears of); plain TCP conns offer their socket (syscall.Conn), which
//     core reads and writes with raw system calls. A conn offers its
//     socket only when using it is the same as its Read and Write: never
//     for TLS or WebSocket, and a PROXY header is read to its last byte and
//     no further. Listener options never cost a capability: each
//     transport's conn is one type built around the socket (or the
//     library's conn) in one step, carrying what the options add, never a
//     wrapper around a wrapper that must remember to forward methods.
//   - Every write has a deadline: the owner's (core sets them), the
//     handshake timeout before Accept (TLS, the HTTP answers and the
//     upgrade), a second for a WebSocket pong the reader writes on its own,
//     100 ms for the courtesy writes of a close (a WebSocket close frame,
//     TLS close_notify). A WebSocket peer that sends pings and reads
//     nothing cannot hold the reader past a pong; a QUIC Close only queues
//     the stream's FIN and lingers in the background.
//   - Known divergences, from the libraries underneath: after a deadline
//     passes during a TLS Write, or any deadline on a WebSocket conn, that
//     direction stays broken (see conformanceSkips in the tests). MQTT
//     needs no more: the broker closes a conn on its first I/O error.
//   - Close on a Listener is idempotent: the first call closes it and any
//     later call returns nil. After Close, Accept returns an error that
//     matches net.ErrClosed. Conns not yet returned by Accept are closed;
//     the ones returned belong to the caller.
//   - Dial takes a URL: mqtt://, tcp:// (or a bare host:port), mqtts://,
//     ws://, wss:// or quic://; a missing port is the transport's default.
//
// The package never imports core or codec (see DESIGN.md): it moves bytes,
// it does not read MQTT.
package listeners
