package core

import (
	"sync"
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
// path; readers (the $SYS publisher, metrics) load them without locks. A
// figure that is the sum of others (all PUBLISH packets: the sum over QoS)
// is added up when read, not counted twice on the message path.
type Stats struct {
	connected    atomic.Int64
	maxConnected atomic.Int64 // most connections open at once since start
	sockets      atomic.Int64 // connections handed to ServeConn (after any TLS or WebSocket handshake)
	connects     atomic.Int64
	connectsIn   atomic.Int64 // CONNECT packets received, accepted or not
	expired      atomic.Int64 // offline sessions ended by their expiry interval
	online       atomic.Int64 // sessions with a client attached; changed under Server.mu (setOnlineLocked)
	pending      atomic.Int64 // queued + inflight deliveries, all sessions
	inflight     atomic.Int64 // outgoing QoS 1/2 deliveries awaiting acknowledgement
	syncs        [len(SyncBuckets) + 1]atomic.Int64
	syncNanos    atomic.Int64
	msgsInQoS    [3]atomic.Int64
	msgsOutQoS   [3]atomic.Int64
	pubBytesIn   atomic.Int64 // PUBLISH payload bytes received
	pubBytesOut  atomic.Int64 // PUBLISH payload bytes sent
	ctrlIn       atomic.Int64 // packets received other than PUBLISH and CONNECT
	ctrlOut      atomic.Int64 // packets sent other than PUBLISH
	bytesIn      atomic.Int64
	bytesOut     atomic.Int64
	deliveries   atomic.Int64
	authFailures atomic.Int64
	ownerRefused atomic.Int64 // CONNECTs refused: the session belongs to another identity
	willRefused  atomic.Int64 // wills refused or not published: a $ topic, or the Authorizer's CanWill
	preLogin     atomic.Int64 // handshakes refused: the pre-login memory budget was spent
	// retainedRefused counts retained PUBLISHes not kept: the retained
	// budget was spent (Options.MaxRetainedMessages, MaxRetainedBytes).
	retainedRefused atomic.Int64
	// retainedCut counts retained streams cut short: the connection of
	// the new subscription ended before every message was sent (stream.go).
	retainedCut  atomic.Int64
	drops        [dropCauseCount]atomic.Int64
	closeReasons [closeReasonCount]atomic.Int64
}

func (s *Stats) dropped(c dropCause) { s.drops[c].Add(1) }

// connOpened counts a new connection and keeps the most ever open at once.
func (s *Stats) connOpened() {
	n := s.connected.Add(1)
	for m := s.maxConnected.Load(); n > m && !s.maxConnected.CompareAndSwap(m, n); m = s.maxConnected.Load() {
	}
}

// listenerStats counts what happens on each listener by name: CONNECTs
// accepted so far. A connection finds its counter once, at CONNECT.
type listenerStats struct {
	mu       sync.RWMutex
	connects map[string]*atomic.Int64
	// transports maps a listener's name to its transport (Serve learns it
	// from a listener that says, as listeners.Listener does), for the log.
	transports sync.Map
}

// connected counts an accepted CONNECT on listener.
func (l *listenerStats) connected(listener string) {
	l.mu.RLock()
	n := l.connects[listener]
	l.mu.RUnlock()
	if n == nil {
		l.mu.Lock()
		if n = l.connects[listener]; n == nil {
			if l.connects == nil {
				l.connects = map[string]*atomic.Int64{}
			}
			n = new(atomic.Int64)
			l.connects[listener] = n
		}
		l.mu.Unlock()
	}
	n.Add(1)
}

func (l *listenerStats) snapshot() map[string]int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make(map[string]int64, len(l.connects))
	for name, n := range l.connects {
		out[name] = n.Load()
	}
	return out
}

// Snapshot is a point-in-time copy of the counters.
type Snapshot struct {
	Connected int64
	// MaxConnected is the most connections open at once since start.
	MaxConnected int64
	// Sockets counts the connections handed to the server, each once
	// (after its listener's TLS or WebSocket handshake).
	Sockets  int64
	Connects int64 // CONNECTs accepted
	// ConnectsByListener counts accepted CONNECTs by listener name; a
	// listener appears once a client has connected through it.
	ConnectsByListener map[string]int64
	// ConnectPackets counts CONNECT packets received, accepted or not.
	ConnectPackets int64
	// Sessions counts every session: connected ones and persistent ones
	// waiting for their client (Sessions - Connected, at most).
	Sessions int
	// OfflineSessions counts the persistent sessions whose client is not
	// connected.
	OfflineSessions int
	// SessionsExpired counts offline sessions ended by their expiry
	// interval since start (restored ones that expired while the broker
	// was down included).
	SessionsExpired int64
	MessagesIn      int64    // PUBLISH packets received: the sum of MessagesInQoS
	MessagesOut     int64    // PUBLISH packets sent: the sum of MessagesOutQoS
	MessagesInQoS   [3]int64 // by the QoS they were published with
	MessagesOutQoS  [3]int64 // by the QoS they were delivered with
	// PublishBytesIn and PublishBytesOut count the payload bytes of the
	// PUBLISH packets received and sent.
	PublishBytesIn, PublishBytesOut int64
	// PacketsIn and PacketsOut count MQTT packets of every type.
	PacketsIn, PacketsOut int64
	BytesIn               int64
	BytesOut              int64
	Deliveries            int64
	AuthFailures          int64
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
	// SharedSubscriptions counts the shared subscriptions (every
	// member of every group), which Subscriptions includes.
	SharedSubscriptions int64
	SharedGroups        int64
	// Retained counts the retained messages of clients; SysRetained the
	// broker's own ($SYS), which are not user data.
	Retained    int
	SysRetained int
	// RetainedBytes is the topic and payload bytes of every retained
	// message, $SYS included.
	RetainedBytes int64
	// ClientRetainedBytes is RetainedBytes without the broker's own $SYS
	// topics: what Options.MaxRetainedBytes bounds.
	ClientRetainedBytes int64
	// RetainedRefused counts retained PUBLISHes (and wills) not kept
	// because the retained budget (Options.MaxRetainedMessages,
	// MaxRetainedBytes) was spent; they still went to the subscribers.
	RetainedRefused int64
	// RetainedStreamsCut counts new subscriptions whose retained messages
	// were not all sent: the connection ended (or the session was taken
	// over) first.
	RetainedStreamsCut int64
	Queued             int64 // deliveries waiting in session queues
	Inflight           int64 // QoS 1/2 deliveries sent and not yet acknowledged
	// StoreSyncs counts Store.Sync calls by latency: StoreSyncs[i] those
	// that took at most SyncBuckets[i], the last one the slower rest.
	StoreSyncs       [len(SyncBuckets) + 1]int64
	StoreSyncSeconds float64 // total time spent in Store.Sync
}

// Stats returns the current counters.
func (s *Server) Stats() Snapshot {
	st := &s.stats
	snap := Snapshot{
		Connected: st.connected.Load(), MaxConnected: st.maxConnected.Load(), Sockets: st.sockets.Load(),
		Connects: st.connects.Load(), ConnectsByListener: s.byListener.snapshot(), ConnectPackets: st.connectsIn.Load(),
		SessionsExpired: st.expired.Load(),
		PublishBytesIn:  st.pubBytesIn.Load(), PublishBytesOut: st.pubBytesOut.Load(),
		BytesIn: st.bytesIn.Load(), BytesOut: st.bytesOut.Load(),
		Deliveries: st.deliveries.Load(), AuthFailures: st.authFailures.Load(),
		SessionOwnerRefused: st.ownerRefused.Load(), WillsRefused: st.willRefused.Load(), PreLoginRefused: st.preLogin.Load(),
		Dropped: map[string]int64{}, Disconnects: map[string]int64{},
		Subscriptions: s.router.count.Load(),
	}
	snap.Retained, snap.SysRetained, snap.RetainedBytes = s.retained.counts()
	_, snap.ClientRetainedBytes = s.retained.clientCounts()
	snap.RetainedRefused, snap.RetainedStreamsCut = st.retainedRefused.Load(), st.retainedCut.Load()
	snap.Inflight = st.inflight.Load()
	snap.Queued = st.pending.Load() - snap.Inflight
	snap.SharedGroups = s.router.groups.Load()
	snap.SharedSubscriptions = s.router.shared.Load()
	for i := range st.syncs {
		snap.StoreSyncs[i] = st.syncs[i].Load()
	}
	snap.StoreSyncSeconds = time.Duration(st.syncNanos.Load()).Seconds()
	for q := range st.msgsInQoS {
		snap.MessagesInQoS[q] = st.msgsInQoS[q].Load()
		snap.MessagesOutQoS[q] = st.msgsOutQoS[q].Load()
		snap.MessagesIn += snap.MessagesInQoS[q]
		snap.MessagesOut += snap.MessagesOutQoS[q]
	}
	snap.PacketsIn = snap.MessagesIn + snap.ConnectPackets + st.ctrlIn.Load()
	snap.PacketsOut = snap.MessagesOut + st.ctrlOut.Load()
	for i := range st.drops {
		snap.Dropped[dropCause(i).String()] = st.drops[i].Load()
	}
	for i := 1; i < int(closeReasonCount); i++ {
		snap.Disconnects[CloseReason(i).String()] = st.closeReasons[i].Load()
	}
	s.mu.Lock()
	snap.Sessions = len(s.sessions)
	snap.OfflineSessions = snap.Sessions - int(st.online.Load())
	s.mu.Unlock()
	return snap
}

// setOnlineLocked marks sess as having a client attached or not, keeping
// the count of online sessions; s.mu is held, so Stats reads the count and
// the sessions together.
func (s *Server) setOnlineLocked(sess *session, on bool) {
	if sess.isOnline.Swap(on) != on {
		if on {
			s.stats.online.Add(1)
		} else {
			s.stats.online.Add(-1)
		}
	}
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
