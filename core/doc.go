// Package core is the broker: the Server, the connections' readers and
// writers, sessions with their inflight windows and queues, the router (topic
// tree and shared groups), retained messages, wills, keepalive and $SYS.
//
// Core sees every transport as a net.Conn carrying raw MQTT bytes
// (Server.ServeConn); it never imports a transport. It declares what it
// consumes from outside — Authenticator, Authorizer and Store — with plain
// parameters, so that auth and the stores satisfy them without importing core.
//
// Goroutines: an idle connection may hold none. ServeConn runs CONNECT
// (handshake) on a goroutine of its own; the packet loop (readLoop) then
// runs as a job of the worker pool (workers.go), whose goroutines outlive
// their jobs so that their grown stacks are reused. A reader that finds
// its socket empty parks (park.go) when the socket is a raw Linux socket
// or offers one (IdleSocket): it arms the socket in the poller's epoll set
// (poller_linux.go), puts the connection on the keepalive wheel
// (keepalive.go), and its goroutine ends. The poller resumes it as a new
// job when bytes come; close or the wheel finish it. Other connections
// (TLS, other systems) keep their reader goroutine, waiting for bytes
// without a read buffer (waitReadable). Whoever holds the reading state
// (client.pstate) owns the reader's fields.
//
// Writing: one writer at a time, whoever takes client.writing. A delivery
// or control packet is queued (session queue, client.ctrl) and the writer
// woken: wake starts a writer job (writeLoop), which gathers what is
// queued into one write and ends when nothing is left. At low rates (a
// burst of at most inlineBurst packets) the reader that routed a PUBLISH
// writes in place instead (inline.go): it
// notes each subscriber (deferWake), and at its burst's end (flushDirty)
// writes what each has queued with a write that never waits
// (writeInline), its own answers too (reply); what the socket does not
// take goes to a writer job. A new subscription's retained messages are
// not queued: the writer reads them from the retained set as the socket
// takes them (stream.go), under the set's read lock alone.
//
// Beside the connections run one goroutine each for the poller and the
// keepalive wheel (where connections park), the syncer (acks.go: one
// store Sync for many connections' acknowledgements) and $SYS (sys.go),
// and timers for session expiry, delayed wills, traces and logins that
// end. Every lock, what it guards, the order in which locks nest, and the
// atomics and ownership rules that keep the hot path free of locks are in
// LOCKS.md.
//
// Files, by the state they hold and the job they do:
//
//   - server.go: Server (the sessions and connections under Server.mu),
//     Serve, ServeConn, attach and detach of sessions, Drain, Shutdown and
//     the admin actions (Disconnect, RemoveSession, DisconnectWhere).
//   - client.go: client, one connection, and its reader (readLoop,
//     handle) and writer (writeLoop, flush, collect, encode); connect.go:
//     the CONNECT handshake (connecting, one method per stage) and
//     finish; auth.go: enhanced authentication and logins that end;
//     identity.go: what core asks of a conn (ReadWaiter, NowWriter,
//     IdleSocket, certificate identity).
//   - park.go (Server.parking), poller_linux.go (poller_other.go: none),
//     keepalive.go, rawio_linux.go: parked connections, the epoll set,
//     the keepalive wheel, raw socket reads and writes; workers.go: the
//     worker pool; inline.go: writing in place.
//   - session.go: session, its queue and inflight window (enqueue, take,
//     ack); stream.go: retained streams of new subscriptions.
//   - publish.go: PUBLISH in (handlePublish and its stages), routing
//     and the retained side of a publish; subscribe.go: SUBSCRIBE and
//     UNSUBSCRIBE; router.go: the topic tree and shared groups
//     (router.mu); retained.go and ostree.go: the retained set
//     (retainedStore.mu), an order-statistic tree.
//   - acks.go: acknowledgements that wait for a store Sync, and the
//     syncer (syncer.mu) that syncs once for many connections;
//     inbound2.go: inbound QoS 2 state (inbound2, held in session.qos2in,
//     and its store record); held.go: held messages, released once their
//     QoS 2 PUBLISH is recorded; persist.go: the store writes of sessions
//     and deliveries, store errors and the throttled warnings
//     (warnClocks); restore.go: the restorer, which rebuilds the state at
//     start; will.go: delayed wills (delayedWill: scheduled, recorded,
//     published); record.go: the store's record encodings; store.go: the
//     Store interface and MemStore; check.go: CheckStore; health.go:
//     StoreHealthy.
//   - acl.go: per-subscription authorization and the pre-login byte
//     budget; limits.go: per-connection rate limits; options.go and
//     live.go: Options, and the Limits a reload changes; reason.go: close
//     reasons; message.go: Message.
//   - stats.go, sys.go, topicmetrics.go: counters, $SYS, per-topic
//     metrics; views.go, pages.go: the admin API's views and pages;
//     trace.go: packet traces (Server.tracing).
//   - cluster.go: the Cluster seam (below); replica.go: sessions rebuilt
//     from another node's replicated records, and replays into them.
//
// Counters: stats.go holds the broker-wide atomics, one add each on the
// message path (a total that is a sum of others is added up when read);
// each connection counts its own messages and bytes in fields only its
// reader (in) or its writer (out) adds to. sys.go publishes them as
// Mosquitto 2's $SYS/broker topics; views.go and pages.go serve them to
// the admin API. Gauges that would cost the message path (queued bytes)
// are summed over the sessions when read.
//
// Operating: live.go holds the Limits a reload may change (SetLimits),
// read from atomics at each use; trace.go writes packet traces, matched
// per connection at CONNECT and when a trace starts or stops, so that an
// untraced connection's read and write paths test one nil pointer.
//
// Cluster: with a Cluster configured (cluster.go), the router reports the
// first and last subscription of each filter and shared group (under its
// lock, so in order), each local PUBLISH is forwarded after local routing,
// CONNECT claims the client id cluster-wide before attach, and other
// nodes' messages, retained messages and takeovers come in through
// DeliverRemote, SetRetained and TakeOver; a persistent session leaves
// for another node through ExportSession and arrives through
// ImportSession, encoded with the store's records. Without one, each of
// those places tests one nil field.
package core
