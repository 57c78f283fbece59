// Package store is xmq's embedded on-disk store: a Pebble database (the LSM
// engine of CockroachDB) that satisfies core.Store without importing core.
//
// What it owns: the key layout and its format version, durability (when
// writes reach the disk), the disk budget, and walking the database for
// `xmq store check`. What it does not own: the records. Core encodes and
// decodes every value itself, with its own record version; the store keeps
// them as opaque bytes and never interprets one. The same holds for the
// bans it keeps for auth (PutBan, DeleteBan, LoadBans satisfy
// auth.BanStore without importing auth).
//
// # Key layout (format version 1)
//
//	"F"                                 format version: uint32, big-endian
//	's' len(id) id                      session record
//	'i' len(id) id                      inbound QoS 2 state of a session
//	'w' len(id) id                      pending will with a delay
//	'm' len(id) id seq                  message owed to a session, by seq
//	'r' topic                           retained message
//	'b' key                             ban (auth.BanStore: key and record are auth's)
//
// len(id) is two bytes and seq eight, both big-endian, so the messages of
// one session are contiguous and iterate in delivery order, and deleting a
// session deletes its messages with one range deletion.
//
// # Durability
//
// Every write goes to Pebble's write-ahead log without waiting for the disk
// (in sync mode at its commit round, at the latest within 200ms); what
// differs between the modes is when the log is forced to disk:
//
//   - sync: Sync forces it. Core calls Sync once per read burst before it
//     acknowledges the QoS 1/2 messages of that burst, and concurrent calls
//     share one fsync (group commit), so the cost is one fsync per round, not
//     one per message. In this mode writes wait in one pending batch that
//     the round commits with its fsync (pending.go): one log write per
//     round for every connection's writes. A message deleted before its
//     round (its subscriber acknowledged it) cancels out with its put, and
//     a round left with nothing makes no write and no fsync. While only
//     new messages are pending, a round waits up to Options.CommitWait
//     (1ms) for those acknowledgements first. What a crash of the process
//     or the machine keeps is unchanged: every write a Sync returned for,
//     except messages that were delivered and acknowledged before it.
//   - interval: a background flush every FlushInterval; Sync returns at
//     once. A crash loses at most the last interval of acknowledged
//     messages — the trade-off Mosquitto makes with its periodic snapshot
//     (autosave_interval), with a much shorter interval.
//   - none: never forced. What the operating system already has survives a
//     killed process, nothing survives a power loss. For benchmarks.
//
// # Locking
//
// The engine locks DIR/LOCK while a store is open (a POSIX record lock,
// released when the process ends). Open reports a store another process
// holds, or this process has open already, as ErrLocked naming the
// holder's pid (fcntl F_GETLK; not on Windows), never as ErrDamaged.
//
// # Faults
//
// The engine never meets a full disk: writes are refused for space before
// (MaxDiskBytes, MinFreeBytes, measured by a sampler and again on the write
// path when a burst could reach the limit), an emergency reserve file is
// given up when a write fails for space anyway, and a write of the engine
// that fails is retried rather than returned to it (Pebble treats a failed
// log or manifest write as fatal and its commit pipeline never recovers).
// While a write is being retried the store is unavailable: every write and
// Sync is refused at once with ErrUnavailable (wrapping ENOSPC when the disk
// is full), so callers never wait on the disk. It takes writes again by
// itself once the retried writes are through and the file system has room
// for MinFreeBytes and the reserve. A failed fsync is not retried, and a
// disk operation that hangs past StallTimeout is not waited out: the store
// fails and calls Options.OnFatal, where the broker exits so that its
// supervisor restarts it. Health reports the state (ok, full, stalled,
// unavailable, failed) and why.
//
// # Goroutines
//
// A Store is safe for concurrent use. Close must be called once, after every
// other call has returned.
package store
