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
	store     func() StoreUsage // nil: no store series
	tokens    *MQTTTokens

	connections, connects, disconnects, maxConnections     *prometheus.Desc
	msgsIn, msgsOut, bytesIn, bytesOut, deliveries, drop   *prometheus.Desc
	pubBytesIn, pubBytesOut                                *prometheus.Desc
	sessions, offline, expired, subscriptions, retained    *prometheus.Desc
	queued, queuedBytes, inflight, sharedGroups, storeSync *prometheus.Desc
	handshakeFailures, certExpiry, storeDisk, storeBudget  *prometheus.Desc
	storeState, storeFree                                  *prometheus.Desc
	authLogins, authRefused, authFlapBans, authDenied      *prometheus.Desc
	authACLMisses, authReloads, authReloadErrors           *prometheus.Desc
	authUsers, authRules, authCached, authBans, authLock   *prometheus.Desc
	httpRequests, httpBusy, httpCacheHits, httpFailClosed  *prometheus.Desc
	httpCached, httpWaiting                                *prometheus.Desc
	dashboardLogins, preLoginRefused                       *prometheus.Desc
	retainedBytes, retainedRefused, retainedCut            *prometheus.Desc
	maxRetained, maxRetainedBytes                          *prometheus.Desc
	uptime, info                                           *prometheus.Desc
	topicIn, topicOut, topicDropped                        *prometheus.Desc
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
		authStats: opts.AuthStats, store: opts.Store, tokens: opts.MQTTTokens,
		connections:    d("connections", "Open MQTT connections by listener and transport.", "listener", "transport"),
		connects:       d("connects_total", "CONNECTs accepted since start, by listener.", "listener", "transport"),
		maxConnections: d("max_connections", "The broker's connection limit (broker.max_connections); absent when there is none."),
		disconnects: d("disconnects_total", "Connections ended, by typed close reason (auth_failure: CONNECTs refused by "+
			"authentication and failed re-authentications).", "reason"),
		msgsIn:        d("messages_received_total", "PUBLISH packets received from clients, by the QoS they were published with.", "qos"),
		msgsOut:       d("messages_sent_total", "PUBLISH packets sent to clients, by the QoS they were delivered with.", "qos"),
		bytesIn:       d("received_bytes_total", "Bytes read from clients."),
		bytesOut:      d("sent_bytes_total", "Bytes written to clients."),
		pubBytesIn:    d("publish_received_bytes_total", "Payload bytes of the PUBLISH packets received from clients."),
		pubBytesOut:   d("publish_sent_bytes_total", "Payload bytes of the PUBLISH packets sent to clients."),
		deliveries:    d("deliveries_total", "Messages queued for a subscriber (one per matching subscription)."),
		drop:          d("messages_dropped_total", "Messages not delivered, by cause.", "cause"),
		sessions:      d("sessions", "Sessions, connected or waiting for their client."),
		offline:       d("offline_sessions", "Persistent sessions whose client is not connected."),
		expired:       d("sessions_expired_total", "Offline sessions ended by their expiry interval."),
		subscriptions: d("subscriptions", "Subscriptions of all sessions."),
		retained:      d("retained_messages", "Retained messages of clients (the broker's own $SYS topics are not counted)."),
		retainedBytes: d("retained_bytes", "Topic and payload bytes of the retained messages of clients (what broker.max_retained_bytes bounds)."),
		retainedRefused: d("retained_refused_total", "Retained PUBLISHes (and wills) not retained because the retained budget "+
			"(broker.max_retained_messages, max_retained_bytes) was spent; they were delivered all the same."),
		retainedCut: d("retained_streams_cut_total", "New subscriptions whose retained messages were not all sent: "+
			"the connection ended (or the session was taken over) first."),
		maxRetained:      d("max_retained_messages", "The retained budget's count (broker.max_retained_messages); absent when there is none."),
		maxRetainedBytes: d("max_retained_bytes", "The retained budget's bytes (broker.max_retained_bytes); absent when there is none."),
		queued:           d("queued_messages", "Deliveries waiting in session queues."),
		queuedBytes: d("queued_bytes", "Topic and payload bytes that sessions hold, queued or in flight "+
			"(what broker.max_queued_bytes bounds per session)."),
		inflight:     d("inflight_messages", "QoS 1/2 deliveries sent and not yet acknowledged."),
		sharedGroups: d("shared_groups", "Shared subscription groups."),
		storeSync:    d("store_sync_seconds", "Latency of Store.Sync, which every acknowledged QoS 1/2 message waits for."),
		storeDisk: d("store_disk_bytes", "What the on-disk store holds against its budget: tables and unflushed writes, "+
			"not the write-ahead log."),
		storeBudget: d("store_disk_budget_bytes", "The store's disk budget (store.max_disk_bytes); absent when there is none."),
		storeState: d("store_state", "1 for the store's state, 0 for the others: ok, full (new messages refused for space), "+
			"stalled (a disk operation slow), unavailable (every write refused until the disk takes writes again), "+
			"failed (the broker exits).", "state"),
		storeFree: d("store_free_bytes", "Free bytes on the store's file system, when last measured."),
		handshakeFailures: d("handshake_failures_total", "Connections a listener gave up on before they carried MQTT "+
			"(TLS, WebSocket, QUIC, PROXY header, connection limit), by reason.", "listener", "transport", "reason"),
		certExpiry: d("certificate_expiry_seconds", "Seconds until the certificate a TLS listener serves ends (negative once "+
			"it has); absent while unknown (ACME before its first certificate).", "listener", "transport"),
		authLogins:   d("auth_logins_total", "CONNECTs accepted by authentication (password, SCRAM, certificate or anonymous)."),
		authRefused:  d("auth_refused_total", "CONNECTs refused by authentication, by cause.", "cause"),
		authFlapBans: d("auth_flap_bans_total", "Client ids banned for flapping."),
		authDenied: d("auth_acl_denied_total", "Refusals by authorization: connect (a session of another user), publish, "+
			"subscribe, will (at CONNECT or when due); a delivery a subscriber may not read is a drop, cause not_readable.", "action"),
		preLoginRefused:  d("prelogin_refused_total", "Handshakes refused because connections not yet logged in held the whole pre-login memory budget."),
		authACLMisses:    d("auth_acl_cache_misses_total", "PUBLISH decisions computed from the ACL rules rather than the cache."),
		authReloads:      d("auth_reloads_total", "Password and ACL file loads."),
		authReloadErrors: d("auth_reload_errors_total", "Password and ACL file loads that failed (the previous version stays)."),
		authUsers:        d("auth_users", "Users in the password file."),
		authRules:        d("auth_acl_rules", "Rules in the ACL file."),
		authCached:       d("auth_acl_cache_entries", "Cached PUBLISH decisions."),
		authBans:         d("auth_bans", "Bans in force."),
		authLock:         d("auth_locked_sources", "Source addresses the failed-login limit remembers."),
		httpRequests: d("auth_http_requests_total", "Requests to the HTTP auth service (auth.http), by kind (connect, acl) "+
			"and result: allow, deny, ignore, error (status not 200, malformed answer, transport) or timeout.", "kind", "result"),
		httpBusy:      d("auth_http_busy_total", "Questions for the HTTP auth service not sent: no request slot within queue_wait.", "kind"),
		httpCacheHits: d("auth_http_cache_hits_total", "Questions answered by the cache, or by the same question in flight, without a request.", "kind"),
		httpFailClosed: d("auth_http_failed_closed_total", "CONNECTs, PUBLISHes and SUBSCRIBEs refused because the HTTP auth service "+
			"gave no answer (error, timeout, busy) and fail_open is off.", "kind"),
		httpCached:      d("auth_http_cache_entries", "Answers of the HTTP auth service in its caches.", "kind"),
		httpWaiting:     d("auth_http_waiting", "Questions waiting for a request slot to the HTTP auth service."),
		dashboardLogins: d("dashboard_mqtt_logins_total", "CONNECTs with a dashboard session's user name, by result.", "result"),
		uptime:          d("uptime_seconds", "Seconds since the broker started."),
		// Registered topics only (POST /api/v1/topic-metrics, at most
		// core.MaxTopicMetrics): a label per topic would otherwise be
		// unbounded.
		topicIn: d("topic_messages_in_total", "Messages published on a registered topic (or matching a registered filter), "+
			"by the QoS they were published with.", "topic", "qos"),
		topicOut:     d("topic_messages_out_total", "Deliveries queued for subscribers of a registered topic or filter.", "topic"),
		topicDropped: d("topic_messages_dropped_total", "Messages of a registered topic or filter that no subscriber received, and its deliveries dropped or refused when queued.", "topic"),
		info:         d("build_info", "The broker's version; always 1.", "version"),
	}
	for _, l := range opts.Listeners {
		c.transport[l.Name] = l.Transport
	}
	return c
}

// Describe sends every descriptor.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.connections, c.connects, c.maxConnections, c.disconnects, c.msgsIn, c.msgsOut,
		c.bytesIn, c.bytesOut, c.pubBytesIn, c.pubBytesOut, c.deliveries, c.drop, c.sessions, c.offline, c.expired,
		c.subscriptions, c.retained, c.queued, c.queuedBytes, c.inflight, c.sharedGroups, c.storeSync,
		c.handshakeFailures, c.certExpiry, c.dashboardLogins, c.authDenied, c.preLoginRefused, c.uptime, c.info,
		c.retainedBytes, c.retainedRefused, c.retainedCut, c.maxRetained, c.maxRetainedBytes,
		c.topicIn, c.topicOut, c.topicDropped} {
		ch <- d
	}
	if c.store != nil {
		ch <- c.storeDisk
		ch <- c.storeBudget
		ch <- c.storeState
		ch <- c.storeFree
	}
	if c.authStats != nil {
		for _, d := range []*prometheus.Desc{c.authLogins, c.authRefused, c.authFlapBans, c.authACLMisses,
			c.authReloads, c.authReloadErrors, c.authUsers, c.authRules, c.authCached, c.authBans, c.authLock,
			c.httpRequests, c.httpBusy, c.httpCacheHits, c.httpFailClosed, c.httpCached, c.httpWaiting} {
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
		gauge(c.connections, float64(byListener[name]), name, transport(name))
	}
	for _, name := range sortedKeys(connects) {
		counter(c.connects, connects[name], name, transport(name))
	}
	opts := c.b.Options()
	if max := opts.MaxConnections; max > 0 {
		gauge(c.maxConnections, float64(max))
	}
	if max := opts.MaxRetainedMessages; max > 0 {
		gauge(c.maxRetained, float64(max))
	}
	if max := opts.MaxRetainedBytes; max > 0 {
		gauge(c.maxRetainedBytes, float64(max))
	}
	now := time.Now()
	for _, l := range c.listeners {
		if l.HandshakeFailures != nil {
			fails := l.HandshakeFailures()
			for _, reason := range sortedKeys(fails) {
				counter(c.handshakeFailures, fails[reason], l.Name, l.Transport, reason)
			}
		}
		if l.CertNotAfter != nil {
			if end := l.CertNotAfter(); !end.IsZero() {
				gauge(c.certExpiry, end.Sub(now).Seconds(), l.Name, l.Transport)
			}
		}
	}
	for _, reason := range sortedKeys(st.Disconnects) {
		counter(c.disconnects, st.Disconnects[reason], reason)
	}
	for q := range st.MessagesInQoS {
		counter(c.msgsIn, st.MessagesInQoS[q], strconv.Itoa(q))
		counter(c.msgsOut, st.MessagesOutQoS[q], strconv.Itoa(q))
	}
	counter(c.bytesIn, st.BytesIn)
	counter(c.bytesOut, st.BytesOut)
	counter(c.pubBytesIn, st.PublishBytesIn)
	counter(c.pubBytesOut, st.PublishBytesOut)
	counter(c.deliveries, st.Deliveries)
	for _, m := range c.b.TopicMetrics() {
		for q := range m.MessagesInQoS {
			counter(c.topicIn, m.MessagesInQoS[q], m.Topic, strconv.Itoa(q))
		}
		counter(c.topicOut, m.MessagesOut, m.Topic)
		counter(c.topicDropped, m.MessagesDropped, m.Topic)
	}
	for _, cause := range sortedKeys(st.Dropped) {
		counter(c.drop, st.Dropped[cause], cause)
	}
	gauge(c.sessions, float64(st.Sessions))
	gauge(c.offline, float64(st.OfflineSessions))
	counter(c.expired, st.SessionsExpired)
	gauge(c.subscriptions, float64(st.Subscriptions))
	gauge(c.retained, float64(st.Retained))
	gauge(c.retainedBytes, float64(st.ClientRetainedBytes))
	counter(c.retainedRefused, st.RetainedRefused)
	counter(c.retainedCut, st.RetainedStreamsCut)
	gauge(c.queued, float64(st.Queued))
	gauge(c.queuedBytes, float64(c.b.QueuedBytes()))
	gauge(c.inflight, float64(st.Inflight))
	gauge(c.sharedGroups, float64(st.SharedGroups))
	buckets, n, sum := syncHistogram(st)
	ch <- prometheus.MustNewConstHistogram(c.storeSync, n, sum, buckets)
	if c.store != nil {
		u := c.store()
		gauge(c.storeDisk, float64(u.DiskBytes))
		if u.BudgetBytes > 0 {
			gauge(c.storeBudget, float64(u.BudgetBytes))
		}
		gauge(c.storeFree, float64(u.FreeBytes))
		for _, state := range StoreStates {
			v := 0.0
			if state == u.State {
				v = 1
			}
			gauge(c.storeState, v, state)
		}
	}
	// Authorization refusals that core counts itself, with or without an
	// ACL file; PUBLISH and SUBSCRIBE refusals come from auth below.
	counter(c.authDenied, st.SessionOwnerRefused, "connect")
	counter(c.authDenied, st.WillsRefused, "will")
	counter(c.preLoginRefused, st.PreLoginRefused)
	ok, refused := c.tokens.Logins()
	counter(c.dashboardLogins, ok, "accepted")
	counter(c.dashboardLogins, refused, "refused")
	if c.authStats != nil {
		a := c.authStats()
		counter(c.authLogins, a.Logins)
		for _, r := range []struct {
			cause string
			n     int64
		}{{"bad_credentials", a.LoginFailures}, {"anonymous", a.AnonymousRefused}, {"banned", a.Banned},
			{"locked_out", a.LockedOut}, {"rate_limited", a.RateLimited}, {"busy", a.Busy}} {
			counter(c.authRefused, r.n, r.cause)
		}
		counter(c.authFlapBans, a.FlapBans)
		counter(c.authDenied, a.PublishDenied, "publish")
		counter(c.authDenied, a.SubscribeDenied, "subscribe")
		counter(c.authACLMisses, a.ACLCacheMisses)
		counter(c.authReloads, a.Reloads)
		counter(c.authReloadErrors, a.ReloadErrors)
		gauge(c.authUsers, float64(a.Users))
		gauge(c.authRules, float64(a.ACLRules))
		gauge(c.authCached, float64(a.ACLCached))
		gauge(c.authBans, float64(a.Bans))
		gauge(c.authLock, float64(a.LockedSources))
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
					counter(c.httpRequests, r.n, k.kind, r.result)
				}
				counter(c.httpBusy, k.n.Busy, k.kind)
				counter(c.httpCacheHits, k.n.CacheHits, k.kind)
				counter(c.httpFailClosed, k.n.FailedClosed, k.kind)
				gauge(c.httpCached, float64(k.cached), k.kind)
			}
			gauge(c.httpWaiting, float64(h.Waiting))
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
