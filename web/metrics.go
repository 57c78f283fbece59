package web

import (
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xmq-io/xmq/core"
)

// AuthStats are the MQTT authentication counters (auth.Stats, which the
// composition root copies here: web does not import auth).
type AuthStats struct {
	Logins           int64 // CONNECTs accepted
	LoginFailures    int64 // wrong password, unknown user, failed SCRAM
	AnonymousRefused int64 // refused by the anonymous policy
	Banned           int64 // refused by a ban
	LockedOut        int64 // refused after too many failed logins from the source
	RateLimited      int64 // refused by the per-source connection rate
	Busy             int64 // refused: no password check slot in time
	FlapBans         int64 // client ids banned for flapping
	PublishDenied    int64 // PUBLISH refused by the ACL
	SubscribeDenied  int64 // SUBSCRIBE filters refused by the ACL
	ACLCacheMisses   int64 // PUBLISH decisions computed from the rules
	Reloads          int64 // password and ACL file loads
	ReloadErrors     int64
	Users            int // password file entries
	ACLRules         int
	ACLCached        int            // cached PUBLISH decisions
	Bans             int            // bans in force
	LockedSources    int            // source addresses the failed-login limit remembers
	HTTP             *HTTPAuthStats // the HTTP auth service's counters; nil without one
}

// HTTPAuthStats are the HTTP auth service's counters (auth.HTTPStats).
type HTTPAuthStats struct {
	Connect, ACL HTTPAuthCounts
	LoginsCached int // CONNECT answers cached
	ACLCached    int // ACL answers cached
	Waiting      int // questions waiting for a request slot
}

// HTTPAuthCounts counts one kind of question to the service
// (auth.HTTPCounts).
type HTTPAuthCounts struct {
	Allow, Deny, Ignore int64 // the service's answers
	Errors, Timeouts    int64 // requests without a usable answer
	Busy                int64 // not sent: no request slot in time
	CacheHits           int64 // answered by the cache or the same question in flight
	FailedClosed        int64 // refused for want of an answer (fail_open off)
}

// collector turns the broker's Stats snapshot into metrics at scrape time:
// the broker's counters are plain atomics, so metrics cost nothing on the
// message path.
type collector struct {
	b         Broker
	listeners []Listener
	transport map[string]string // listener name → transport
	version   string
	authStats func() AuthStats  // nil: no auth series
	usage     func() StoreUsage // nil: no store series
	tokens    *MQTTTokens

	conn         connDescs
	msgs         messageDescs
	topic        topicDescs
	sess         sessionDescs
	ret          retainedDescs
	store        storeDescs
	auth         authDescs
	http         httpAuthDescs
	uptime, info *prometheus.Desc
}

// connDescs are the descriptors of connections and their setup.
type connDescs struct {
	open, connects, disconnects, max                                *prometheus.Desc
	handshakeFailures, certExpiry, preLoginRefused, dashboardLogins *prometheus.Desc
}

// messageDescs are the descriptors of messages and bytes in and out.
type messageDescs struct {
	in, out, bytesIn, bytesOut, pubBytesIn, pubBytesOut, deliveries, dropped *prometheus.Desc
}

// topicDescs are the descriptors of the registered topics' series.
type topicDescs struct {
	in, out, dropped *prometheus.Desc
}

// sessionDescs are the descriptors of sessions, subscriptions and what
// they hold.
type sessionDescs struct {
	sessions, offline, expired, subscriptions   *prometheus.Desc
	queued, queuedBytes, inflight, sharedGroups *prometheus.Desc
}

// retainedDescs are the descriptors of retained messages and their budget.
type retainedDescs struct {
	count, bytes, refused, cut, max, maxBytes *prometheus.Desc
}

// storeDescs are the descriptors of the store; all but sync only with
// Options.Store.
type storeDescs struct {
	sync, disk, budget, state, free *prometheus.Desc
}

// authDescs are the descriptors of authentication and authorization; all
// but denied only with Options.AuthStats.
type authDescs struct {
	logins, refused, flapBans, denied, aclMisses, reloads *prometheus.Desc
	reloadErrors, users, rules, cached, bans, locked      *prometheus.Desc
}

// httpAuthDescs are the descriptors of the HTTP auth service, with
// Options.AuthStats.
type httpAuthDescs struct {
	requests, busy, cacheHits, failedClosed, cached, waiting *prometheus.Desc
}

// Series that would only repeat the sum of others are left out: the open
// connections of all listeners (sum xmq_connections), CONNECTs refused by
// authentication (xmq_disconnects_total{reason="auth_failure"}), and
// deliveries a subscriber may not read (xmq_messages_dropped_total
// {cause="not_readable"}).
func newCollector(b Broker, opts *Options) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("xmq_"+name, help, labels, nil)
	}
	c := &collector{b: b, listeners: opts.Listeners, transport: map[string]string{}, version: opts.Version,
		authStats: opts.AuthStats, usage: opts.Store, tokens: opts.MQTTTokens,
		conn: connDescs{
			open:     d("connections", "Open MQTT connections by listener and transport.", "listener", "transport"),
			connects: d("connects_total", "CONNECTs accepted since start, by listener.", "listener", "transport"),
			max:      d("max_connections", "The broker's connection limit (broker.max_connections); absent when there is none."),
			disconnects: d("disconnects_total", "Connections ended, by typed close reason (auth_failure: CONNECTs refused by "+
				"authentication and failed re-authentications).", "reason"),
			handshakeFailures: d("handshake_failures_total", "Connections a listener gave up on before they carried MQTT "+
				"(TLS, WebSocket, QUIC, PROXY header, connection limit), by reason.", "listener", "transport", "reason"),
			certExpiry: d("certificate_expiry_seconds", "Seconds until the certificate a TLS listener serves ends (negative once "+
				"it has); absent while unknown (ACME before its first certificate).", "listener", "transport"),
			preLoginRefused: d("prelogin_refused_total", "Handshakes refused because connections not yet logged in held the whole pre-login memory budget."),
			dashboardLogins: d("dashboard_mqtt_logins_total", "CONNECTs with a dashboard session's user name, by result.", "result"),
		},
		msgs: messageDescs{
			in:          d("messages_received_total", "PUBLISH packets received from clients, by the QoS they were published with.", "qos"),
			out:         d("messages_sent_total", "PUBLISH packets sent to clients, by the QoS they were delivered with.", "qos"),
			bytesIn:     d("received_bytes_total", "Bytes read from clients."),
			bytesOut:    d("sent_bytes_total", "Bytes written to clients."),
			pubBytesIn:  d("publish_received_bytes_total", "Payload bytes of the PUBLISH packets received from clients."),
			pubBytesOut: d("publish_sent_bytes_total", "Payload bytes of the PUBLISH packets sent to clients."),
			deliveries:  d("deliveries_total", "Messages queued for a subscriber (one per matching subscription)."),
			dropped:     d("messages_dropped_total", "Messages not delivered, by cause.", "cause"),
		},
		topic: topicDescs{
			// Registered topics only (POST /api/v1/topic-metrics, at most
			// core.MaxTopicMetrics): a label per topic would otherwise be
			// unbounded.
			in: d("topic_messages_in_total", "Messages published on a registered topic (or matching a registered filter), "+
				"by the QoS they were published with.", "topic", "qos"),
			out:     d("topic_messages_out_total", "Deliveries queued for subscribers of a registered topic or filter.", "topic"),
			dropped: d("topic_messages_dropped_total", "Messages of a registered topic or filter that no subscriber received, and its deliveries dropped or refused when queued.", "topic"),
		},
		sess: sessionDescs{
			sessions:      d("sessions", "Sessions, connected or waiting for their client."),
			offline:       d("offline_sessions", "Persistent sessions whose client is not connected."),
			expired:       d("sessions_expired_total", "Offline sessions ended by their expiry interval."),
			subscriptions: d("subscriptions", "Subscriptions of all sessions."),
			queued:        d("queued_messages", "Deliveries waiting in session queues."),
			queuedBytes: d("queued_bytes", "Topic and payload bytes that sessions hold, queued or in flight "+
				"(what broker.max_queued_bytes bounds per session)."),
			inflight:     d("inflight_messages", "QoS 1/2 deliveries sent and not yet acknowledged."),
			sharedGroups: d("shared_groups", "Shared subscription groups."),
		},
		ret: retainedDescs{
			count: d("retained_messages", "Retained messages of clients (the broker's own $SYS topics are not counted)."),
			bytes: d("retained_bytes", "Topic and payload bytes of the retained messages of clients (what broker.max_retained_bytes bounds)."),
			refused: d("retained_refused_total", "Retained PUBLISHes (and wills) not retained because the retained budget "+
				"(broker.max_retained_messages, max_retained_bytes) was spent; they were delivered all the same."),
			cut: d("retained_streams_cut_total", "New subscriptions whose retained messages were not all sent: "+
				"the connection ended (or the session was taken over) first."),
			max:      d("max_retained_messages", "The retained budget's count (broker.max_retained_messages); absent when there is none."),
			maxBytes: d("max_retained_bytes", "The retained budget's bytes (broker.max_retained_bytes); absent when there is none."),
		},
		store: storeDescs{
			sync: d("store_sync_seconds", "Latency of Store.Sync, which every acknowledged QoS 1/2 message waits for."),
			disk: d("store_disk_bytes", "What the on-disk store holds against its budget: tables and unflushed writes, "+
				"not the write-ahead log."),
			budget: d("store_disk_budget_bytes", "The store's disk budget (store.max_disk_bytes); absent when there is none."),
			state: d("store_state", "1 for the store's state, 0 for the others: ok, full (new messages refused for space), "+
				"stalled (a disk operation slow), unavailable (every write refused until the disk takes writes again), "+
				"failed (the broker exits).", "state"),
			free: d("store_free_bytes", "Free bytes on the store's file system, when last measured."),
		},
		auth: authDescs{
			logins:   d("auth_logins_total", "CONNECTs accepted by authentication (password, SCRAM, certificate or anonymous)."),
			refused:  d("auth_refused_total", "CONNECTs refused by authentication, by cause.", "cause"),
			flapBans: d("auth_flap_bans_total", "Client ids banned for flapping."),
			denied: d("auth_acl_denied_total", "Refusals by authorization: connect (a session of another user), publish, "+
				"subscribe, will (at CONNECT or when due); a delivery a subscriber may not read is a drop, cause not_readable.", "action"),
			aclMisses:    d("auth_acl_cache_misses_total", "PUBLISH decisions computed from the ACL rules rather than the cache."),
			reloads:      d("auth_reloads_total", "Password and ACL file loads."),
			reloadErrors: d("auth_reload_errors_total", "Password and ACL file loads that failed (the previous version stays)."),
			users:        d("auth_users", "Users in the password file."),
			rules:        d("auth_acl_rules", "Rules in the ACL file."),
			cached:       d("auth_acl_cache_entries", "Cached PUBLISH decisions."),
			bans:         d("auth_bans", "Bans in force."),
			locked:       d("auth_locked_sources", "Source addresses the failed-login limit remembers."),
		},
		http: httpAuthDescs{
			requests: d("auth_http_requests_total", "Requests to the HTTP auth service (auth.http), by kind (connect, acl) "+
				"and result: allow, deny, ignore, error (status not 200, malformed answer, transport) or timeout.", "kind", "result"),
			busy:      d("auth_http_busy_total", "Questions for the HTTP auth service not sent: no request slot within queue_wait.", "kind"),
			cacheHits: d("auth_http_cache_hits_total", "Questions answered by the cache, or by the same question in flight, without a request.", "kind"),
			failedClosed: d("auth_http_failed_closed_total", "CONNECTs, PUBLISHes and SUBSCRIBEs refused because the HTTP auth service "+
				"gave no answer (error, timeout, busy) and fail_open is off.", "kind"),
			cached:  d("auth_http_cache_entries", "Answers of the HTTP auth service in its caches.", "kind"),
			waiting: d("auth_http_waiting", "Questions waiting for a request slot to the HTTP auth service."),
		},
		uptime: d("uptime_seconds", "Seconds since the broker started."),
		info:   d("build_info", "The broker's version; always 1.", "version"),
	}
	for _, l := range opts.Listeners {
		c.transport[l.Name] = l.Transport
	}
	return c
}

// Describe sends every descriptor.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.conn.open, c.conn.connects, c.conn.disconnects, c.conn.max, c.conn.handshakeFailures, c.conn.certExpiry,
		c.conn.preLoginRefused, c.conn.dashboardLogins,
		c.msgs.in, c.msgs.out, c.msgs.bytesIn, c.msgs.bytesOut, c.msgs.pubBytesIn, c.msgs.pubBytesOut, c.msgs.deliveries,
		c.msgs.dropped,
		c.topic.in, c.topic.out, c.topic.dropped,
		c.sess.sessions, c.sess.offline, c.sess.expired, c.sess.subscriptions, c.sess.queued, c.sess.queuedBytes,
		c.sess.inflight, c.sess.sharedGroups,
		c.ret.count, c.ret.bytes, c.ret.refused, c.ret.cut, c.ret.max, c.ret.maxBytes,
		c.store.sync, c.auth.denied, c.uptime, c.info,
	} {
		ch <- d
	}
	if c.usage != nil {
		ch <- c.store.disk
		ch <- c.store.budget
		ch <- c.store.state
		ch <- c.store.free
	}
	if c.authStats != nil {
		for _, d := range []*prometheus.Desc{c.auth.logins, c.auth.refused, c.auth.flapBans, c.auth.aclMisses,
			c.auth.reloads, c.auth.reloadErrors, c.auth.users, c.auth.rules, c.auth.cached, c.auth.bans, c.auth.locked,
			c.http.requests, c.http.busy, c.http.cacheHits, c.http.failedClosed, c.http.cached, c.http.waiting} {
			ch <- d
		}
	}
}

// syncHistogram is core's Store.Sync latency histogram in Prometheus form:
// cumulative counts by upper bound in seconds, the total count and sum.
func syncHistogram(st core.Snapshot) (buckets map[float64]uint64, count uint64, sum float64) {
	buckets = make(map[float64]uint64, len(core.SyncBuckets))
	for i, le := range core.SyncBuckets {
		count += uint64(st.StoreSyncs[i])
		buckets[le.Seconds()] = count
	}
	count += uint64(st.StoreSyncs[len(core.SyncBuckets)]) // slower than the last bound: only in +Inf
	return buckets, count, st.StoreSyncSeconds
}

// Collect reads one snapshot and sends its metrics.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.b.Stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	// Every known listener has a series, 0 included, so rates and alerts
	// do not see series appear and vanish.
	byListener := c.b.ConnectionsByListener()
	for name := range c.transport {
		if _, ok := byListener[name]; !ok {
			byListener[name] = 0
		}
	}
	connects := st.ConnectsByListener
	for name := range c.transport {
		if _, ok := connects[name]; !ok {
			connects[name] = 0
		}
	}
	transport := func(name string) string {
		if tr := c.transport[name]; tr != "" {
			return tr
		}
		return "unknown"
	}
	for _, name := range sortedKeys(byListener) {
		gauge(c.conn.open, float64(byListener[name]), name, transport(name))
	}
	for _, name := range sortedKeys(connects) {
		counter(c.conn.connects, connects[name], name, transport(name))
	}
	opts := c.b.Options()
	if max := opts.MaxConnections; max > 0 {
		gauge(c.conn.max, float64(max))
	}
	if max := opts.MaxRetainedMessages; max > 0 {
		gauge(c.ret.max, float64(max))
	}
	if max := opts.MaxRetainedBytes; max > 0 {
		gauge(c.ret.maxBytes, float64(max))
	}
	now := time.Now()
	for _, l := range c.listeners {
		if l.HandshakeFailures != nil {
			fails := l.HandshakeFailures()
			for _, reason := range sortedKeys(fails) {
				counter(c.conn.handshakeFailures, fails[reason], l.Name, l.Transport, reason)
			}
		}
		if l.CertNotAfter != nil {
			if end := l.CertNotAfter(); !end.IsZero() {
				gauge(c.conn.certExpiry, end.Sub(now).Seconds(), l.Name, l.Transport)
			}
		}
	}
	for _, reason := range sortedKeys(st.Disconnects) {
		counter(c.conn.disconnects, st.Disconnects[reason], reason)
	}
	for q := range st.MessagesInQoS {
		counter(c.msgs.in, st.MessagesInQoS[q], strconv.Itoa(q))
		counter(c.msgs.out, st.MessagesOutQoS[q], strconv.Itoa(q))
	}
	counter(c.msgs.bytesIn, st.BytesIn)
	counter(c.msgs.bytesOut, st.BytesOut)
	counter(c.msgs.pubBytesIn, st.PublishBytesIn)
	counter(c.msgs.pubBytesOut, st.PublishBytesOut)
	counter(c.msgs.deliveries, st.Deliveries)
	for _, m := range c.b.TopicMetrics() {
		for q := range m.MessagesInQoS {
			counter(c.topic.in, m.MessagesInQoS[q], m.Topic, strconv.Itoa(q))
		}
		counter(c.topic.out, m.MessagesOut, m.Topic)
		counter(c.topic.dropped, m.MessagesDropped, m.Topic)
	}
	for _, cause := range sortedKeys(st.Dropped) {
		counter(c.msgs.dropped, st.Dropped[cause], cause)
	}
	gauge(c.sess.sessions, float64(st.Sessions))
	gauge(c.sess.offline, float64(st.OfflineSessions))
	counter(c.sess.expired, st.SessionsExpired)
	gauge(c.sess.subscriptions, float64(st.Subscriptions))
	gauge(c.ret.count, float64(st.Retained))
	gauge(c.ret.bytes, float64(st.ClientRetainedBytes))
	counter(c.ret.refused, st.RetainedRefused)
	counter(c.ret.cut, st.RetainedStreamsCut)
	gauge(c.sess.queued, float64(st.Queued))
	gauge(c.sess.queuedBytes, float64(c.b.QueuedBytes()))
	gauge(c.sess.inflight, float64(st.Inflight))
	gauge(c.sess.sharedGroups, float64(st.SharedGroups))
	buckets, n, sum := syncHistogram(st)
	ch <- prometheus.MustNewConstHistogram(c.store.sync, n, sum, buckets)
	if c.usage != nil {
		u := c.usage()
		gauge(c.store.disk, float64(u.DiskBytes))
		if u.BudgetBytes > 0 {
			gauge(c.store.budget, float64(u.BudgetBytes))
		}
		gauge(c.store.free, float64(u.FreeBytes))
		for _, state := range StoreStates {
			v := 0.0
			if state == u.State {
				v = 1
			}
			gauge(c.store.state, v, state)
		}
	}
	// Authorization refusals that core counts itself, with or without an
	// ACL file; PUBLISH and SUBSCRIBE refusals come from auth below.
	counter(c.auth.denied, st.SessionOwnerRefused, "connect")
	counter(c.auth.denied, st.WillsRefused, "will")
	counter(c.conn.preLoginRefused, st.PreLoginRefused)
	ok, refused := c.tokens.Logins()
	counter(c.conn.dashboardLogins, ok, "accepted")
	counter(c.conn.dashboardLogins, refused, "refused")
	if c.authStats != nil {
		a := c.authStats()
		counter(c.auth.logins, a.Logins)
		for _, r := range []struct {
			cause string
			n     int64
		}{{"bad_credentials", a.LoginFailures}, {"anonymous", a.AnonymousRefused}, {"banned", a.Banned},
			{"locked_out", a.LockedOut}, {"rate_limited", a.RateLimited}, {"busy", a.Busy}} {
			counter(c.auth.refused, r.n, r.cause)
		}
		counter(c.auth.flapBans, a.FlapBans)
		counter(c.auth.denied, a.PublishDenied, "publish")
		counter(c.auth.denied, a.SubscribeDenied, "subscribe")
		counter(c.auth.aclMisses, a.ACLCacheMisses)
		counter(c.auth.reloads, a.Reloads)
		counter(c.auth.reloadErrors, a.ReloadErrors)
		gauge(c.auth.users, float64(a.Users))
		gauge(c.auth.rules, float64(a.ACLRules))
		gauge(c.auth.cached, float64(a.ACLCached))
		gauge(c.auth.bans, float64(a.Bans))
		gauge(c.auth.locked, float64(a.LockedSources))
		if h := a.HTTP; h != nil {
			for _, k := range []struct {
				kind   string
				n      HTTPAuthCounts
				cached int
			}{{"connect", h.Connect, h.LoginsCached}, {"acl", h.ACL, h.ACLCached}} {
				for _, r := range []struct {
					result string
					n      int64
				}{{"allow", k.n.Allow}, {"deny", k.n.Deny}, {"ignore", k.n.Ignore}, {"error", k.n.Errors}, {"timeout", k.n.Timeouts}} {
					counter(c.http.requests, r.n, k.kind, r.result)
				}
				counter(c.http.busy, k.n.Busy, k.kind)
				counter(c.http.cacheHits, k.n.CacheHits, k.kind)
				counter(c.http.failedClosed, k.n.FailedClosed, k.kind)
				gauge(c.http.cached, float64(k.cached), k.kind)
			}
			gauge(c.http.waiting, float64(h.Waiting))
		}
	}
	gauge(c.uptime, now.Sub(c.b.StartTime()).Seconds())
	gauge(c.info, 1, c.version)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
