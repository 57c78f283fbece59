package core

import (
	"math"
	"runtime/metrics"
	"strconv"
	"time"
)

// sysControl is how the server runs its $SYS goroutine (sysLoop).
type sysControl struct {
	stop  chan struct{}      // closed by Shutdown
	done  chan struct{}      // closed when sysLoop returns
	extra func() [][2]string // Config.SysTopics
}

// sysLoop publishes $SYS/broker/... every SysInterval, retained, in the
// layout Mosquitto 2 users know (sysTopics).
func (s *Server) sysLoop() {
	defer close(s.sys.done)
	if s.opts.SysInterval < 0 {
		<-s.sys.stop
		return
	}
	sys := newSysState(s.started)
	s.publishSys(sys, time.Now())
	t := time.NewTicker(s.opts.SysInterval)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			s.publishSys(sys, now)
		case <-s.sys.stop:
			return
		}
	}
}

// sysState is what the $SYS publisher keeps between two publications: the
// load averages and the largest heap seen. Only sysLoop uses it.
type sysState struct {
	last    time.Time
	load    [sysLoadCount]loadAvg
	heapMax uint64
	heap    []metrics.Sample
}

func newSysState(started time.Time) *sysState {
	return &sysState{last: started, heap: []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}}
}

// The counters $SYS/broker/load/... averages, in sysLoadNames' order.
const (
	loadMsgsIn = iota
	loadMsgsOut
	loadPubIn
	loadPubOut
	loadPubDropped
	loadBytesIn
	loadBytesOut
	loadSockets
	loadConnections
	sysLoadCount
)

var sysLoadNames = [sysLoadCount]string{"messages/received", "messages/sent", "publish/received", "publish/sent",
	"publish/dropped", "bytes/received", "bytes/sent", "sockets", "connections"}

// loadWindows are the periods of the load averages: 1, 5 and 15 minutes.
var loadWindows = [3]struct {
	name    string
	seconds float64
}{{"1min", 60}, {"5min", 300}, {"15min", 900}}

// loadAvg is Mosquitto's load figure for one counter: how many it grew by
// per minute, as an exponentially weighted moving average over 1, 5 and
// 15 minutes (the way Unix load averages are kept).
type loadAvg struct {
	prev int64
	avg  [3]float64
}

// update folds in the counter's value n, dt seconds after the last one.
func (l *loadAvg) update(n int64, dt float64) {
	rate := float64(max(n-l.prev, 0)) * 60 / dt
	l.prev = n
	for i, w := range loadWindows {
		l.avg[i] = rate + math.Exp(-dt/w.seconds)*(l.avg[i]-rate)
	}
}

// sysTopics returns the topics and values of one $SYS publication, each
// under $SYS/broker/. They are Mosquitto 2's (see man 8 mosquitto, SYS
// TOPICS) with their meaning there; where xmq's counters differ, the
// comments say how. Two topics are xmq's own: the drops that refused a
// QoS 1/2 message (publish/messages/quota_exceeded and store_error).
func (s *Server) sysTopics(sys *sysState, now time.Time) [][2]string {
	snap := s.Stats()
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	dropped := snap.TotalDropped()
	if dt := now.Sub(sys.last).Seconds(); dt > 0 {
		sys.last = now
		for k, n := range [sysLoadCount]int64{snap.PacketsIn, snap.PacketsOut, snap.MessagesIn, snap.MessagesOut,
			dropped, snap.BytesIn, snap.BytesOut, snap.Sockets, snap.ConnectPackets} {
			sys.load[k].update(n, dt)
		}
	}
	metrics.Read(sys.heap)
	var heap uint64
	if v := sys.heap[0].Value; v.Kind() == metrics.KindUint64 {
		heap = v.Uint64()
	}
	sys.heapMax = max(sys.heapMax, heap)
	// Clients are sessions, as in Mosquitto: connected ones, and
	// persistent ones whose client is away (inactive).
	online := int64(snap.Sessions - snap.OfflineSessions)
	// The store holds the retained messages and what is owed to sessions,
	// queued or in flight. A message queued for n sessions counts n times:
	// each delivery is kept on its own (Mosquitto counts it once).
	stored := int64(snap.Retained+snap.SysRetained) + snap.Queued + snap.Inflight
	out := [][2]string{
		{"version", "xmq version " + s.opts.Version},
		{"uptime", i(int64(now.Sub(s.started)/time.Second)) + " seconds"},
		{"clients/total", i(int64(snap.Sessions))},
		{"clients/connected", i(online)},
		{"clients/active", i(online)}, // Mosquitto's deprecated name of connected
		{"clients/disconnected", i(int64(snap.OfflineSessions))},
		{"clients/inactive", i(int64(snap.OfflineSessions))}, // deprecated name of disconnected
		{"clients/expired", i(snap.SessionsExpired)},
		// Mosquitto's maximum is the most clients connected at once (not
		// a limit); xmq counts the connections open at once, handshakes
		// included.
		{"clients/maximum", i(snap.MaxConnected)},
		{"heap/current", strconv.FormatUint(heap, 10)}, // Go heap objects, bytes
		{"heap/maximum", strconv.FormatUint(sys.heapMax, 10)},
		{"messages/stored", i(stored)}, // deprecated name of store/messages/count
		{"store/messages/count", i(stored)},
		{"store/messages/bytes", i(snap.RetainedBytes + s.QueuedBytes())}, // topic and payload bytes
		{"messages/received", i(snap.PacketsIn)},                          // MQTT packets of every type
		{"messages/sent", i(snap.PacketsOut)},
		{"publish/messages/received", i(snap.MessagesIn)},
		{"publish/messages/sent", i(snap.MessagesOut)},
		// Every cause counts (xmq_messages_dropped_total has them apart);
		// Mosquitto counts queue and inflight limits.
		{"publish/messages/dropped", i(dropped)},
		{"publish/messages/quota_exceeded", i(snap.Dropped[dropQuotaExceeded.String()])},
		{"publish/messages/store_error", i(snap.Dropped[dropStoreError.String()])},
		{"publish/bytes/received", i(snap.PublishBytesIn)}, // payload bytes
		{"publish/bytes/sent", i(snap.PublishBytesOut)},
		{"bytes/received", i(snap.BytesIn)},
		{"bytes/sent", i(snap.BytesOut)},
		{"subscriptions/count", i(snap.Subscriptions)},
		{"shared_subscriptions/count", i(snap.SharedSubscriptions)},
		// Every retained message, the broker's own $SYS ones included, as
		// Mosquitto counts them; the dashboard and metrics count clients'.
		{"retained messages/count", i(int64(snap.Retained + snap.SysRetained))},
	}
	for k, l := range sys.load {
		for w, win := range loadWindows {
			out = append(out, [2]string{"load/" + sysLoadNames[k] + "/" + win.name, strconv.FormatFloat(l.avg[w], 'f', 2, 64)})
		}
	}
	return out
}

func (s *Server) publishSys(sys *sysState, now time.Time) {
	topics := s.sysTopics(sys, now)
	if s.sys.extra != nil {
		topics = append(topics, s.sys.extra()...)
	}
	for _, kv := range topics {
		_ = s.Publish("$SYS/broker/"+kv[0], []byte(kv[1]), 0, true)
	}
}

// QueuedBytes returns the topic and payload bytes that sessions hold,
// queued or in flight. It reads every session, a batch at a time, so it
// costs nothing on the message path and is for scrapes and $SYS only.
func (s *Server) QueuedBytes() int64 {
	var total int64
	batch := make([]*session, 0, 256)
	after := ""
	for {
		batch = s.sessionsFrom("", after, false, false, batch[:0])
		for _, sess := range batch {
			sess.mu.Lock()
			total += sess.qbytes
			sess.mu.Unlock()
		}
		if len(batch) < cap(batch) {
			return total
		}
		after = batch[len(batch)-1].id
	}
}
