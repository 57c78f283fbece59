package web

import (
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"xmq/core"
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
	ACLCached        int // cached PUBLISH decisions
	Bans             int // bans in force
	LockedSources    int // source addresses the failed-login limit remembers
}

// collector turns the broker's Stats snapshot into metrics at scrape time:
// the broker's counters are plain atomics, so metrics cost nothing on the
// message path.
type collector struct {
	b         Broker
	transport map[string]string // listener name → transport
	version   string
	authStats func() AuthStats // nil: no auth series
	tokens    *MQTTTokens

	connections, connected, connects, disconnects        *prometheus.Desc
	msgsIn, msgsOut, bytesIn, bytesOut, deliveries, drop *prometheus.Desc
	sessions, subscriptions, retained, authFailures      *prometheus.Desc
	queued, inflight, sharedGroups, storeSync            *prometheus.Desc
	authLogins, authRefused, authFlapBans, authDenied    *prometheus.Desc
	authACLMisses, authReloads, authReloadErrors         *prometheus.Desc
	authUsers, authRules, authCached, authBans, authLock *prometheus.Desc
	dashboardLogins, preLoginRefused                     *prometheus.Desc
	uptime, info                                         *prometheus.Desc
}

func newCollector(b Broker, opts *Options) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("xmq_"+name, help, labels, nil)
	}
	c := &collector{b: b, transport: map[string]string{}, version: opts.Version, authStats: opts.AuthStats, tokens: opts.MQTTTokens,
		connections:   d("connections", "Open MQTT connections by listener and transport.", "listener", "transport"),
		connected:     d("connected_clients", "Open MQTT connections (all listeners)."),
		connects:      d("connects_total", "Successful CONNECTs since start."),
		disconnects:   d("disconnects_total", "Connections ended, by typed close reason.", "reason"),
		msgsIn:        d("messages_received_total", "PUBLISH packets received from clients, by the QoS they were published with.", "qos"),
		msgsOut:       d("messages_sent_total", "PUBLISH packets sent to clients, by the QoS they were delivered with.", "qos"),
		bytesIn:       d("received_bytes_total", "Bytes read from clients."),
		bytesOut:      d("sent_bytes_total", "Bytes written to clients."),
		deliveries:    d("deliveries_total", "Messages queued for a subscriber (one per matching subscription)."),
		drop:          d("messages_dropped_total", "Messages not delivered, by cause.", "cause"),
		sessions:      d("sessions", "Sessions, connected or waiting for their client."),
		subscriptions: d("subscriptions", "Subscriptions of all sessions."),
		retained:      d("retained_messages", "Retained messages."),
		authFailures:  d("auth_failures_total", "CONNECTs refused by authentication."),
		queued:        d("queued_messages", "Deliveries waiting in session queues."),
		inflight:      d("inflight_messages", "QoS 1/2 deliveries sent and not yet acknowledged."),
		sharedGroups:  d("shared_groups", "Shared subscription groups."),
		storeSync:     d("store_sync_seconds", "Latency of Store.Sync, which every acknowledged QoS 1/2 message waits for."),
		authLogins:    d("auth_logins_total", "CONNECTs accepted by authentication (password, SCRAM, certificate or anonymous)."),
		authRefused:   d("auth_refused_total", "CONNECTs refused by authentication, by cause.", "cause"),
		authFlapBans:  d("auth_flap_bans_total", "Client ids banned for flapping."),
		authDenied: d("auth_acl_denied_total", "Refusals by authorization: connect (a session of another user), publish, "+
			"subscribe, will (at CONNECT or when due) and delivery (a message a subscriber may not read).", "action"),
		preLoginRefused:  d("prelogin_refused_total", "Handshakes refused because connections not yet logged in held the whole pre-login memory budget."),
		authACLMisses:    d("auth_acl_cache_misses_total", "PUBLISH decisions computed from the ACL rules rather than the cache."),
		authReloads:      d("auth_reloads_total", "Password and ACL file loads."),
		authReloadErrors: d("auth_reload_errors_total", "Password and ACL file loads that failed (the previous version stays)."),
		authUsers:        d("auth_users", "Users in the password file."),
		authRules:        d("auth_acl_rules", "Rules in the ACL file."),
		authCached:       d("auth_acl_cache_entries", "Cached PUBLISH decisions."),
		authBans:         d("auth_bans", "Bans in force."),
		authLock:         d("auth_locked_sources", "Source addresses the failed-login limit remembers."),
		dashboardLogins:  d("dashboard_mqtt_logins_total", "CONNECTs with a dashboard session's user name, by result.", "result"),
		uptime:           d("uptime_seconds", "Seconds since the broker started."),
		info:             d("build_info", "The broker's version; always 1.", "version"),
	}
	for _, l := range opts.Listeners {
		c.transport[l.Name] = l.Transport
	}
	return c
}

// Describe sends every descriptor.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.connections, c.connected, c.connects, c.disconnects, c.msgsIn, c.msgsOut,
		c.bytesIn, c.bytesOut, c.deliveries, c.drop, c.sessions, c.subscriptions, c.retained, c.authFailures,
		c.queued, c.inflight, c.sharedGroups, c.storeSync, c.dashboardLogins, c.authDenied, c.preLoginRefused,
		c.uptime, c.info} {
		ch <- d
	}
	if c.authStats != nil {
		for _, d := range []*prometheus.Desc{c.authLogins, c.authRefused, c.authFlapBans, c.authACLMisses,
			c.authReloads, c.authReloadErrors, c.authUsers, c.authRules, c.authCached, c.authBans, c.authLock} {
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
	for _, name := range sortedKeys(byListener) {
		tr := c.transport[name]
		if tr == "" {
			tr = "unknown"
		}
		gauge(c.connections, float64(byListener[name]), name, tr)
	}
	gauge(c.connected, float64(st.Connected))
	counter(c.connects, st.Connects)
	for _, reason := range sortedKeys(st.Disconnects) {
		counter(c.disconnects, st.Disconnects[reason], reason)
	}
	for q := range st.MessagesInQoS {
		counter(c.msgsIn, st.MessagesInQoS[q], strconv.Itoa(q))
		counter(c.msgsOut, st.MessagesOutQoS[q], strconv.Itoa(q))
	}
	counter(c.bytesIn, st.BytesIn)
	counter(c.bytesOut, st.BytesOut)
	counter(c.deliveries, st.Deliveries)
	for _, cause := range sortedKeys(st.Dropped) {
		counter(c.drop, st.Dropped[cause], cause)
	}
	gauge(c.sessions, float64(st.Sessions))
	gauge(c.subscriptions, float64(st.Subscriptions))
	gauge(c.retained, float64(st.Retained))
	counter(c.authFailures, st.AuthFailures)
	gauge(c.queued, float64(st.Queued))
	gauge(c.inflight, float64(st.Inflight))
	gauge(c.sharedGroups, float64(st.SharedGroups))
	buckets, n, sum := syncHistogram(st)
	ch <- prometheus.MustNewConstHistogram(c.storeSync, n, sum, buckets)
	// Authorization refusals that core counts itself, with or without an
	// ACL file; PUBLISH and SUBSCRIBE refusals come from auth below.
	counter(c.authDenied, st.SessionOwnerRefused, "connect")
	counter(c.authDenied, st.WillsRefused, "will")
	counter(c.authDenied, st.Dropped["not_readable"], "delivery")
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
	}
	gauge(c.uptime, time.Since(c.b.StartTime()).Seconds())
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
