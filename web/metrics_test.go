package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/internal/mqtttest"
)

// countingConn counts the bytes a test client writes and reads.
type countingConn struct {
	net.Conn
	written, read *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// dial connects a client of srv over net.Pipe, its bytes counted in
// written and read; it returns the CONNACK's reason code.
func dial(t *testing.T, srv *core.Server, listener string, c codec.Connect, written, read *atomic.Int64) (*mqtttest.Conn, codec.ReasonCode) {
	t.Helper()
	client, server := net.Pipe()
	srv.ServeConn(server, listener)
	pc := mqtttest.NewConn(t, countingConn{Conn: client, written: written, read: read}, c.ProtocolVersion)
	return pc, pc.ConnectRC(&c).ReasonCode
}

// refuse turns away the user name "intruder".
type refuse struct{}

func (refuse) Authenticate(_, username string, _ []byte, _ net.Addr, _, _ string) error {
	if username == "intruder" {
		return codec.BadUserNameOrPassword
	}
	return nil
}

// scrape fetches /metrics and parses it with the Prometheus text parser.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != 200 {
		t.Fatalf("/metrics: %d", w.Code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(w.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// value returns the value of name{labels} ("k=v,k=v"), or an error.
func value(fams map[string]*dto.MetricFamily, name, labels string) (float64, error) {
	f := fams[name]
	if f == nil {
		return 0, fmt.Errorf("no metric %s", name)
	}
	for _, m := range f.Metric {
		var ls []string
		for _, l := range m.Label {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(ls)
		if strings.Join(ls, ",") != labels {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), nil
		case m.Gauge != nil:
			return m.Gauge.GetValue(), nil
		case m.Untyped != nil:
			return m.Untyped.GetValue(), nil
		}
	}
	return 0, fmt.Errorf("no series %s{%s}", name, labels)
}

// histogram returns name's histogram series (no labels).
func histogram(fams map[string]*dto.MetricFamily, name string) (*dto.Histogram, error) {
	f := fams[name]
	if f == nil || len(f.Metric) != 1 || f.Metric[0].Histogram == nil {
		return nil, fmt.Errorf("no histogram %s", name)
	}
	return f.Metric[0].Histogram, nil
}

// expect scrapes until every metric has its wanted value or 5 s passed,
// then reports the differences. A key is "name" or "name|k=v,k=v".
func expect(t *testing.T, h http.Handler, want func() map[string]float64, also func(map[string]*dto.MetricFamily) []string) {
	t.Helper()
	var problems []string
	deadline := time.Now().Add(5 * time.Second)
	for {
		problems = problems[:0]
		fams := scrape(t, h)
		for key, w := range want() {
			name, labels, _ := strings.Cut(key, "|")
			got, err := value(fams, name, labels)
			if err != nil {
				problems = append(problems, err.Error())
			} else if got != w {
				problems = append(problems, fmt.Sprintf("%s = %v, want %v", key, got, w))
			}
		}
		if also != nil {
			problems = append(problems, also(fams)...)
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // the broker finishes the disconnects on its goroutines
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

func TestMetricsMatchTraffic(t *testing.T) {
	tokens := NewMQTTTokens()
	authn, authz := tokens.Wrap(refuse{}, nil)
	srv, err := core.New(core.Options{SysInterval: -1}, core.Config{Authenticator: authn, Authorizer: authz})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	authStats := AuthStats{Logins: 11, LoginFailures: 2, AnonymousRefused: 3, Banned: 4, LockedOut: 5, RateLimited: 6, Busy: 7,
		FlapBans: 8, PublishDenied: 9, SubscribeDenied: 10, ACLCacheMisses: 12, Reloads: 13, ReloadErrors: 14,
		Users: 15, ACLRules: 16, ACLCached: 17, Bans: 18, LockedSources: 19,
		HTTP: &HTTPAuthStats{Connect: HTTPAuthCounts{Allow: 21, Deny: 22, Ignore: 23, Errors: 24, Timeouts: 25, Busy: 26, CacheHits: 27, FailedClosed: 28},
			ACL:          HTTPAuthCounts{Allow: 31, Deny: 32, Ignore: 33, Errors: 34, Timeouts: 35, Busy: 36, CacheHits: 37, FailedClosed: 38},
			LoginsCached: 41, ACLCached: 42, Waiting: 43}}
	certEnd := time.Now().Add(30 * 24 * time.Hour)
	s := newTestServer(t, srv, func(o *Options) {
		o.Listeners = []Listener{
			{Name: "tcp", Transport: "tcp", Address: "127.0.0.1:1883",
				HandshakeFailures: func() map[string]int64 { return map[string]int64{"max_connections": 3} }},
			{Name: "ws", Transport: "ws", Address: "127.0.0.1:8083"},
			{Name: "tls", Transport: "tls", Address: "127.0.0.1:8883", CertNotAfter: func() time.Time { return certEnd },
				HandshakeFailures: func() map[string]int64 { return map[string]int64{"not_tls": 2, "timeout": 0} }},
			{Name: "acme", Transport: "tls", Address: "127.0.0.1:8884", CertNotAfter: func() time.Time { return time.Time{} }},
		}
		o.MQTTTokens = tokens
		o.AuthStats = func() AuthStats { return authStats }
		o.Store = func() StoreUsage { return StoreUsage{DiskBytes: 5 << 20, BudgetBytes: 64 << 20} }
	})
	var written, read atomic.Int64

	// A 3.1.1 subscriber, an MQTT 5 publisher, a refused intruder.
	sub, rc := dial(t, srv, "tcp", codec.Connect{ProtocolVersion: codec.V311, CleanStart: true, ClientID: []byte("sub")}, &written, &read)
	if rc != codec.Success {
		t.Fatalf("sub CONNACK %v", rc)
	}
	sub.Send(&codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: []byte("t/#"), QoS: 1}}})
	if _, ok := sub.Next().(*codec.Suback); !ok {
		t.Fatal("no SUBACK")
	}
	pub, rc := dial(t, srv, "ws", codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, ClientID: []byte("pub")}, &written, &read)
	if rc != codec.Success {
		t.Fatalf("pub CONNACK %v", rc)
	}
	_, rc = dial(t, srv, "tcp", codec.Connect{ProtocolVersion: codec.V5, ClientID: []byte("x"), UsernameFlag: true, Username: []byte("intruder")}, &written, &read)
	if rc != codec.BadUserNameOrPassword {
		t.Fatalf("intruder CONNACK %v", rc)
	}

	pub.Send(&codec.Publish{Topic: []byte("t/a"), Payload: []byte("hello")})
	pub.Send(&codec.Publish{Topic: []byte("t/b"), QoS: 1, PacketID: 7, Payload: []byte("world")})
	pub.Send(&codec.Publish{Topic: []byte("nobody/listens"), Payload: []byte("void")})
	if a, ok := pub.Next().(*codec.Ack); !ok || a.PacketID != 7 {
		t.Fatal("no PUBACK")
	}
	for range 2 {
		p, ok := sub.Next().(*codec.Publish)
		if !ok {
			t.Fatal("subscriber got no PUBLISH")
		}
		if p.QoS == 1 {
			sub.Send(&codec.Ack{Kind: codec.PUBACK, PacketID: p.PacketID})
		}
	}
	pub.Send(&codec.Disconnect{})
	if _, err := pub.NextRaw(pub.Timeout); !errors.Is(err, io.EOF) {
		t.Fatalf("after DISCONNECT: %v, want EOF", err)
	}
	if err := srv.Publish("r/1", []byte("kept"), 0, true); err != nil {
		t.Fatal(err)
	}

	// What the test did, as the metrics must show it. Byte counts are
	// exact: every byte a client wrote the broker read, and every byte
	// the broker wrote a client read.
	want := func() map[string]float64 {
		return map[string]float64{
			"xmq_connections|listener=tcp,transport=tcp":                                     1,
			"xmq_connections|listener=ws,transport=ws":                                       0,
			"xmq_connects_total|listener=tcp,transport=tcp":                                  1,
			"xmq_connects_total|listener=ws,transport=ws":                                    1,
			"xmq_connects_total|listener=tls,transport=tls":                                  0,
			"xmq_disconnects_total|reason=normal":                                            1,
			"xmq_disconnects_total|reason=auth_failure":                                      1,
			"xmq_disconnects_total|reason=keepalive_timeout":                                 0,
			"xmq_publish_received_bytes_total":                                               float64(len("hello") + len("world") + len("void")),
			"xmq_publish_sent_bytes_total":                                                   float64(len("hello") + len("world")),
			"xmq_handshake_failures_total|listener=tcp,reason=max_connections,transport=tcp": 3,
			"xmq_handshake_failures_total|listener=tls,reason=not_tls,transport=tls":         2,
			"xmq_handshake_failures_total|listener=tls,reason=timeout,transport=tls":         0,
			"xmq_store_disk_bytes":                                                           5 << 20,
			"xmq_store_disk_budget_bytes":                                                    64 << 20,
			"xmq_offline_sessions":                                                           0,
			"xmq_messages_received_total|qos=0":                                              2,
			"xmq_messages_received_total|qos=1":                                              1,
			"xmq_messages_received_total|qos=2":                                              0,
			"xmq_messages_sent_total|qos=0":                                                  1,
			"xmq_messages_sent_total|qos=1":                                                  1,
			"xmq_deliveries_total":                                                           2,
			"xmq_messages_dropped_total|cause=queue_full":                                    0,
			"xmq_subscriptions":                                                              1,
			"xmq_sessions":                                                                   1,
			"xmq_retained_messages":                                                          1,
			"xmq_retained_bytes":                                                             float64(len("r/1") + len("kept")),
			"xmq_retained_refused_total":                                                     0,
			"xmq_retained_streams_cut_total":                                                 0,
			"xmq_max_retained_messages":                                                      500_000,
			"xmq_max_retained_bytes":                                                         128 << 20,
			"xmq_received_bytes_total":                                                       float64(written.Load()),
			"xmq_sent_bytes_total":                                                           float64(read.Load()),
			"xmq_build_info|version=test":                                                    1,
		}
	}
	expect(t, s.Handler(), want, func(fams map[string]*dto.MetricFamily) []string {
		var problems []string
		for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "xmq_uptime_seconds"} {
			if fams[name] == nil {
				problems = append(problems, "no "+name)
			}
		}
		// Gone: they only repeated the sum of other series.
		for _, name := range []string{"xmq_connected_clients", "xmq_auth_failures_total"} {
			if fams[name] != nil {
				problems = append(problems, name+" is exported")
			}
		}
		if v, err := value(fams, "xmq_auth_acl_denied_total", "action=delivery"); err == nil {
			problems = append(problems, fmt.Sprintf("xmq_auth_acl_denied_total{action=delivery} = %v is exported (a copy of the not_readable drops)", v))
		}
		// No limit configured: no limit series, whose 0 would read as full.
		if fams["xmq_max_connections"] != nil {
			problems = append(problems, "xmq_max_connections exported without a limit")
		}
		// A month of certificate left on tls; nothing while acme's is unknown.
		if v, err := value(fams, "xmq_certificate_expiry_seconds", "listener=tls,transport=tls"); err != nil || math.Abs(v-30*86400) > 60 {
			problems = append(problems, fmt.Sprintf("xmq_certificate_expiry_seconds{tls} = %v (%v), want 30 days", v, err))
		}
		if f := fams["xmq_certificate_expiry_seconds"]; f != nil && len(f.Metric) != 1 {
			problems = append(problems, fmt.Sprintf("xmq_certificate_expiry_seconds has %d series, want only tls's", len(f.Metric)))
		}
		return problems
	})
	if t.Failed() {
		return
	}

	// Queues, inflight, shared groups, store syncs, drops by cause, auth
	// and the dashboard's logins. A persistent 3.1.1 session subscribes
	// (its CONNECT syncs the store), including a shared group, and leaves:
	// two QoS 1 messages queue for it and a QoS 0 one is dropped. sub
	// leaves a QoS 1 delivery unacknowledged.
	keeper, rc := dial(t, srv, "tcp", codec.Connect{ProtocolVersion: codec.V311, ClientID: []byte("keeper")}, &written, &read)
	if rc != codec.Success {
		t.Fatalf("keeper CONNACK %v", rc)
	}
	keeper.Send(&codec.Subscribe{PacketID: 1, Subscriptions: []codec.Subscription{{Filter: []byte("q/#"), QoS: 1}, {Filter: []byte("$share/g/s/#"), QoS: 0}}})
	if _, ok := keeper.Next().(*codec.Suback); !ok {
		t.Fatal("keeper: no SUBACK")
	}
	keeper.Send(&codec.Disconnect{})
	if _, err := keeper.NextRaw(keeper.Timeout); !errors.Is(err, io.EOF) {
		t.Fatalf("keeper after DISCONNECT: %v, want EOF", err)
	}
	// The broker detaches the session a moment after the client saw EOF;
	// until then a QoS 0 message would still be queued for it.
	for deadline := time.Now().Add(5 * time.Second); srv.Stats().OfflineSessions != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("keeper's session is not offline after its DISCONNECT")
		}
	}
	pub2, rc := dial(t, srv, "ws", codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, ClientID: []byte("pub2")}, &written, &read)
	if rc != codec.Success {
		t.Fatalf("pub2 CONNACK %v", rc)
	}
	for i, topic := range []string{"q/1", "q/2", "t/c"} {
		pub2.Send(&codec.Publish{Topic: []byte(topic), QoS: 1, PacketID: uint16(i + 1), Payload: []byte("m")})
		if a, ok := pub2.Next().(*codec.Ack); !ok || a.PacketID != uint16(i+1) {
			t.Fatalf("pub2: no PUBACK for %s", topic)
		}
	}
	pub2.Send(&codec.Publish{Topic: []byte("q/0"), Payload: []byte("lost")})
	if p, ok := sub.Next().(*codec.Publish); !ok || string(p.Topic) != "t/c" {
		t.Fatal("sub did not get t/c")
	}
	// The dashboard: one good login, one forged.
	user, pass, _ := tokens.Issue(RoleViewer, "key:ro", time.Minute)
	if _, rc := dial(t, srv, "ws", codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, ClientID: []byte("dash"),
		UsernameFlag: true, Username: []byte(user), PasswordFlag: true, Password: []byte(pass)}, &written, &read); rc != codec.Success {
		t.Fatalf("dashboard CONNACK %v", rc)
	}
	if _, rc := dial(t, srv, "ws", codec.Connect{ProtocolVersion: codec.V5, CleanStart: true, ClientID: []byte("forger"),
		UsernameFlag: true, Username: []byte(DashboardMQTTUser(RoleAdmin, "key:ro")), PasswordFlag: true, Password: []byte(pass)}, &written, &read); rc != codec.BadUserNameOrPassword {
		t.Fatalf("forged dashboard login: CONNACK %v", rc)
	}

	want2 := func() map[string]float64 {
		m := map[string]float64{
			"xmq_queued_messages":   2,
			"xmq_inflight_messages": 1,
			"xmq_shared_groups":     1,
			"xmq_sessions":          4, // sub, keeper (offline), pub2, dash
			"xmq_dashboard_mqtt_logins_total|result=accepted": 1,
			"xmq_dashboard_mqtt_logins_total|result=refused":  1,
			"xmq_auth_logins_total":                           11,
			"xmq_auth_refused_total|cause=bad_credentials":    2,
			"xmq_auth_refused_total|cause=anonymous":          3,
			"xmq_auth_refused_total|cause=banned":             4,
			"xmq_auth_refused_total|cause=locked_out":         5,
			"xmq_auth_refused_total|cause=rate_limited":       6,
			"xmq_auth_refused_total|cause=busy":               7,
			"xmq_auth_flap_bans_total":                        8,
			"xmq_auth_acl_denied_total|action=publish":        9,
			"xmq_auth_acl_denied_total|action=subscribe":      10,
			"xmq_auth_acl_cache_misses_total":                 12,
			"xmq_auth_reloads_total":                          13,
			"xmq_auth_reload_errors_total":                    14,
			"xmq_auth_users":                                  15,
			"xmq_auth_acl_rules":                              16,
			"xmq_auth_acl_cache_entries":                      17,
			"xmq_auth_bans":                                   18,
			"xmq_auth_locked_sources":                         19,
			"xmq_auth_http_cache_entries|kind=connect":        41,
			"xmq_auth_http_cache_entries|kind=acl":            42,
			"xmq_auth_http_waiting":                           43,
			"xmq_disconnects_total|reason=auth_failure":       2, // the intruder and the forger
			"xmq_offline_sessions":                            1, // keeper
			// keeper's two queued messages and sub's unacknowledged one,
			// topic and payload.
			"xmq_queued_bytes": float64(len("q/1m") + len("q/2m") + len("t/cm")),
		}
		// Every drop cause has a series; only the QoS 0 message to the
		// offline session was dropped.
		for _, cause := range []string{"queue_full", "offline", "expired", "too_large", "not_authorized", "rate_limited",
			"quota_exceeded", "store_error", "not_readable"} {
			m["xmq_messages_dropped_total|cause="+cause] = 0
		}
		m["xmq_messages_dropped_total|cause=offline"] = 1
		for kind, base := range map[string]float64{"connect": 20, "acl": 30} {
			for i, result := range []string{"allow", "deny", "ignore", "error", "timeout"} {
				m["xmq_auth_http_requests_total|kind="+kind+",result="+result] = base + float64(i) + 1
			}
			m["xmq_auth_http_busy_total|kind="+kind] = base + 6
			m["xmq_auth_http_cache_hits_total|kind="+kind] = base + 7
			m["xmq_auth_http_failed_closed_total|kind="+kind] = base + 8
		}
		return m
	}
	expect(t, s.Handler(), want2, func(fams map[string]*dto.MetricFamily) []string {
		st := srv.Stats()
		h, err := histogram(fams, "xmq_store_sync_seconds")
		if err != nil {
			return []string{err.Error()}
		}
		var problems []string
		var n int64
		for _, c := range st.StoreSyncs {
			n += c
		}
		if n == 0 || h.GetSampleCount() != uint64(n) || h.GetSampleSum() != st.StoreSyncSeconds {
			problems = append(problems, fmt.Sprintf("xmq_store_sync_seconds: count %d sum %v, want %d (> 0) and %v",
				h.GetSampleCount(), h.GetSampleSum(), n, st.StoreSyncSeconds))
		}
		// The text format ends with the +Inf bucket, which the parser keeps.
		if len(h.Bucket) != len(core.SyncBuckets)+1 {
			return append(problems, fmt.Sprintf("xmq_store_sync_seconds: %d buckets, want %d", len(h.Bucket), len(core.SyncBuckets)+1))
		}
		var cum int64
		for i, b := range h.Bucket {
			cum += st.StoreSyncs[i]
			le := math.Inf(1)
			if i < len(core.SyncBuckets) {
				le = core.SyncBuckets[i].Seconds()
			}
			if b.GetUpperBound() != le || b.GetCumulativeCount() != uint64(cum) {
				problems = append(problems, fmt.Sprintf("xmq_store_sync_seconds bucket %d: le %v count %d, want le %v count %d",
					i, b.GetUpperBound(), b.GetCumulativeCount(), le, cum))
			}
		}
		return problems
	})
}
