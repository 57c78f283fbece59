// Package logging builds xmq's process logger from the configuration's log
// section (config.Log): its outputs — standard error, a file rotated by
// size (lumberjack), syslog, the systemd journal in its native protocol —
// their formats — JSON for machines; console for people, where the
// broker's connection events read as one sentence each, Mosquitto's way —
// and the level a reload changes live.
//
// New builds the Logger once at the start; its embedded *zap.Logger is what
// the rest of the broker is given (Named per subsystem); SetLevel applies a
// reloaded log.level; Close, after the last entry, flushes and closes the
// file and the sockets. A Logger is safe for concurrent use, as zap's is.
//
// It is not the broker's logging API: packages take a *zap.Logger and never
// import this one; only cmd/xmq does. It does not read, default or check
// the log section either: internal/config does (config.SyslogTarget is the
// one parser of log.syslog, used here and by the configuration's checks).
//
// The sentences are built from the field names core logs (client_id,
// remote, transport, listener, reason …), matched by name, not by import:
// an entry whose message or fields it does not know is written as zap's
// console encoder writes it, so a renamed field costs a sentence, never a
// line. Syslog is Unix only and the journal needs a systemd machine; on
// other platforms asking for them is an error at the start.
package logging
