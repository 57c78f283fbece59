// Package bridge links the broker to other MQTT brokers (Mosquitto, EMQX,
// another xmq …), as Mosquitto's bridges do: topic rules forward messages
// out to a remote broker, in from it, or both ways.
//
// A bridge is two MQTT client sessions joined back to back. Towards the
// remote it is a client over any transport listeners.Dial knows (mqtt,
// mqtts, ws, wss, quic), speaking MQTT 5 or 3.1.1. Towards the local
// broker it is an ordinary client connected in-process (net.Pipe, through
// the Local interface the composition root adapts *core.Server to), with a
// persistent session named "$bridge:NAME" that subscribes to the out
// rules. So the broker's own session machinery does the bridge's queueing:
// while the remote is unreachable the local session is offline and its
// queue keeps the QoS 1/2 messages going out — bounded by max_queued and
// max_queued_bytes, with the same overflow policy and drop counters as
// any session, in the store, in order — and delivers them when the link
// is back; QoS 0 messages for an offline session are dropped and counted,
// as for any client.
//
// No loss: the bridge acknowledges a message to the side it came from only
// once the other side has acknowledged it — a message in only after the
// local broker stored it where persistent subscribers need it, a message
// out only after the remote did. Packet identifiers go through unchanged
// (see link.go), so QoS 2 redeliveries after a crash are recognised by the
// receiving broker and delivered once.
//
// No loops: the local subscriptions use No Local, so what the bridge
// publishes locally never goes back out. Towards an MQTT 5 remote the
// remote subscriptions use No Local too; towards a 3.1.1 remote the
// bridge sets Mosquitto's bridge bit (protocol level 0x84), which Mosquitto
// and xmq take as the same request; a remote that refuses the bit gets a
// plain CONNECT, and the bridge recognises its own messages coming back by
// origin tracking (origin.go).
//
// Reconnection: addresses are tried in turn; after a failed round the
// bridge waits with exponential backoff and jitter between BackoffMin and
// BackoffMax, and a remote that refuses the credentials is logged as such,
// once per attempt, never hammered.
//
// The local session's credentials are reserved: the user name and client
// id "$bridge:NAME" with a password that is random per process and never
// leaves it. The composition root puts Manager.CheckLogin in front of the
// broker's authenticator, so no outside client can log in as a bridge or
// take its session.
//
// Faults: no remote can wedge a link. Every step of a QoS 1/2 exchange in
// flight, either way, is bounded by InflightTimeout; a failed write on
// either side (a ping included) ends the link at once; a reader waiting
// for the local broker's window, which reads nothing, has the keepalive
// ping every quarter keepalive, so a remote gone is found within half of
// one. A link that ends, for any cause, shows in the status at once, and
// the reconnection above takes over.
//
// Goroutines: a running Bridge has one goroutine that connects, serves
// links and backs off; a link adds two readers, two writers (sender) and
// a watchdog (keepalive and in-flight timeouts). Manager and Bridge are
// safe for concurrent use.
package bridge
