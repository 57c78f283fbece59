package core

import (
	"sync/atomic"
	"time"
)

// dropCause says why a message was not delivered.
type dropCause uint8

const (
	dropQueueFull     dropCause = iota // slow consumer: session queue full
	dropOffline                        // QoS 0 for an offline session, or any QoS for a non-persistent one
	dropExpired                        // message expiry passed while queued
	dropTooLarge                       // larger than the client's Maximum Packet Size
	dropNotAuthorized                  // publish refused by the authorizer or topic rules
	dropRateLimited                    // QoS 0 over the client's message or byte rate
	dropQuotaExceeded                  // QoS 1/2 refused for a full session queue or a full store
	dropStoreError                     // QoS 1/2 refused because the store failed to record it
	dropNotReadable                    // a subscriber may not read the topic (the Authorizer's CanRead)
	dropCauseCount
)

var dropNames = [...]string{"queue_full", "offline", "expired", "too_large", "not_authorized", "rate_limited",
	"quota_exceeded", "store_error", "not_readable"}

func (d dropCause) String() string { return dropNames[d] }

// Stats are the broker's counters. Each costs one atomic add on the hot
// path; readers (the $SYS publisher, metrics) load them without locks.
type Stats struct {
	connected    atomic.Int64
	connects     atomic.Int64
	msgsIn       atomic.Int64
	msgsOut      atomic.Int64
	pending      atomic.Int64 // queued + inflight deliveries, all sessions
	inflight     atomic.Int64 // outgoing QoS 1/2 deliveries awaiting acknowledgement
	syncs        [len(SyncBuckets) + 1]atomic.Int64
	syncNanos    atomic.Int64
	msgsInQoS    [3]atomic.Int64
	msgsOutQoS   [3]atomic.Int64
	bytesIn      atomic.Int64
	bytesOut     atomic.Int64
	deliveries   atomic.Int64
	authFailures atomic.Int64
	ownerRefused atomic.Int64 // CONNECTs refused: the session belongs to another identity
	willRefused  atomic.Int64 // wills refused or not published: a $ topic, or the Authorizer's CanWill
	preLogin     atomic.Int64 // handshakes refused: the pre-login memory budget was spent
	drops        [dropCauseCount]atomic.Int64
	closeReasons [closeReasonCount]atomic.Int64
}

func (s *Stats) dropped(c dropCause) { s.drops[c].Add(1) }

// Snapshot is a point-in-time copy of the counters.
type Snapshot struct {
	Connected      int64
	Connects       int64
	Sessions       int
	MessagesIn     int64
	MessagesOut    int64
	MessagesInQoS  [3]int64 // by the QoS they were published with
	MessagesOutQoS [3]int64 // by the QoS they were delivered with
	BytesIn        int64
	BytesOut       int64
	Deliveries     int64
	AuthFailures   int64
	// SessionOwnerRefused counts CONNECTs refused because the client id's
	// session belongs to another user name (Options.AnySessionOwner off).
	SessionOwnerRefused int64
	// WillsRefused counts wills refused at CONNECT or dropped when due: a
	// broker-owned $ topic, or one the Authorizer's CanWill refused.
	WillsRefused int64
	// PreLoginRefused counts handshakes refused because the connections
	// not yet logged in held PreLoginMemory already.
	PreLoginRefused int64
	Dropped         map[string]int64
	Disconnects     map[string]int64
	Subscriptions   int64
	SharedGroups    int64
	Retained        int
	Queued          int64 // deliveries waiting in session queues
	Inflight        int64 // QoS 1/2 deliveries sent and not yet acknowledged
	// StoreSyncs counts Store.Sync calls by latency: StoreSyncs[i] those
	// that took at most SyncBuckets[i], the last one the slower rest.
	StoreSyncs       [len(SyncBuckets) + 1]int64
	StoreSyncSeconds float64 // total time spent in Store.Sync
}

// Stats returns the current counters.
func (s *Server) Stats() Snapshot {
	st := &s.stats
	snap := Snapshot{
		Connected: st.connected.Load(), Connects: st.connects.Load(),
		MessagesIn: st.msgsIn.Load(), MessagesOut: st.msgsOut.Load(),
		BytesIn: st.bytesIn.Load(), BytesOut: st.bytesOut.Load(),
		Deliveries: st.deliveries.Load(), AuthFailures: st.authFailures.Load(),
		SessionOwnerRefused: st.ownerRefused.Load(), WillsRefused: st.willRefused.Load(), PreLoginRefused: st.preLogin.Load(),
		Dropped: map[string]int64{}, Disconnects: map[string]int64{},
		Subscriptions: s.router.count.Load(), Retained: s.retained.count(),
	}
	snap.Inflight = st.inflight.Load()
	snap.Queued = st.pending.Load() - snap.Inflight
	snap.SharedGroups = s.router.groups.Load()
	for i := range st.syncs {
		snap.StoreSyncs[i] = st.syncs[i].Load()
	}
	snap.StoreSyncSeconds = time.Duration(st.syncNanos.Load()).Seconds()
	for q := range st.msgsInQoS {
		snap.MessagesInQoS[q] = st.msgsInQoS[q].Load()
		snap.MessagesOutQoS[q] = st.msgsOutQoS[q].Load()
	}
	for i := range st.drops {
		snap.Dropped[dropCause(i).String()] = st.drops[i].Load()
	}
	for i := 1; i < int(closeReasonCount); i++ {
		snap.Disconnects[CloseReason(i).String()] = st.closeReasons[i].Load()
	}
	s.mu.Lock()
	snap.Sessions = len(s.sessions)
	s.mu.Unlock()
	return snap
}

// TotalDropped sums the drops of every cause.
func (s Snapshot) TotalDropped() int64 {
	var n int64
	for _, v := range s.Dropped {
		n += v
	}
	return n
}

// SyncBuckets are the upper bounds of the Store.Sync latency histogram.
var SyncBuckets = [...]time.Duration{100 * time.Microsecond, time.Millisecond, 5 * time.Millisecond,
	20 * time.Millisecond, 100 * time.Millisecond, time.Second}

// syncStore calls Store.Sync and records how long it took.
func (s *Server) syncStore() error {
	start := time.Now()
	err := s.store.Sync()
	d := time.Since(start)
	i := 0
	for i < len(SyncBuckets) && d > SyncBuckets[i] {
		i++
	}
	s.stats.syncs[i].Add(1)
	s.stats.syncNanos.Add(int64(d))
	return err
}
