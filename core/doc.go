// Package core is the broker: the Server, the per-connection read and write
// loops, sessions with their inflight windows and queues, the router (topic
// tree and shared groups), retained messages, wills, keepalive and $SYS.
//
// Core sees every transport as a net.Conn carrying raw MQTT bytes
// (Server.ServeConn); it never imports a transport. It declares what it
// consumes from outside — Authenticator, Authorizer and Store — with plain
// parameters, so that auth and the stores satisfy them without importing core.
//
// Goroutines and ownership: each connection has exactly one reader goroutine
// (decodes and handles packets, never writes to the socket) and one writer
// goroutine (the only one that writes). The reader hands packets to the
// writer by appending encoded control packets to the client's control buffer
// or by pushing deliveries on the session's queue, then waking the writer.
// Session state is guarded by session.mu; the router by its own RWMutex,
// which is never held while a session lock is taken for a socket write.
// A new subscription's retained messages are not queued: the writer reads
// them from the retained set as the socket takes them (stream.go), under
// the set's read lock alone, never with session.mu held.
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
// untraced connection's read and write paths test one nil pointer. The
// trace lock (Server.traceMu) is taken before Server.mu, and a Trace's own
// lock is never held while either is taken.
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
