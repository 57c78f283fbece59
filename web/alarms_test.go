package web

import (
	"encoding/json"
	"os"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/xmq-io/xmq/core"
)

// alarmWorld is a broker and its surroundings whose trouble a test sets.
type alarmWorld struct {
	*fakeBroker
	mu          sync.Mutex
	maxConns    int
	conns       int
	dropped     map[string]int64
	store       StoreUsage
	certEnd     time.Time
	unreachable int
}

func (w *alarmWorld) Stats() core.Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := map[string]int64{}
	for k, v := range w.dropped {
		d[k] = v
	}
	return core.Snapshot{Connected: int64(w.conns), Dropped: d, Disconnects: map[string]int64{}}
}

func (w *alarmWorld) Options() core.Options {
	w.mu.Lock()
	defer w.mu.Unlock()
	return core.Options{MaxConnections: w.maxConns}
}

func (w *alarmWorld) ConnectionsByListener() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return map[string]int{"tcp": w.conns}
}

func (w *alarmWorld) set(f func(w *alarmWorld)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(w)
}

// newAlarmServer serves w with a store, a cluster and a TLS listener,
// all well.
func newAlarmServer(t *testing.T) (*Server, *alarmWorld) {
	t.Helper()
	w := &alarmWorld{fakeBroker: &fakeBroker{}, maxConns: 100, conns: 10, dropped: map[string]int64{},
		store: StoreUsage{DiskBytes: 10, BudgetBytes: 100, State: "ok"}, certEnd: time.Now().Add(90 * 24 * time.Hour)}
	s := newTestServer(t, w, func(o *Options) {
		o.Store = func() StoreUsage { w.mu.Lock(); defer w.mu.Unlock(); return w.store }
		o.Cluster = func() ClusterStats {
			w.mu.Lock()
			defer w.mu.Unlock()
			return ClusterStats{NodesReachable: 2, NodesUnreachable: w.unreachable}
		}
		o.Listeners = append(o.Listeners, Listener{Name: "tls", Transport: "tls", Address: "0.0.0.0:8883",
			CertNotAfter: func() time.Time { w.mu.Lock(); defer w.mu.Unlock(); return w.certEnd }})
	})
	return s, w
}

// recordDrops puts two samples in s's ring, window apart, with the drops
// of w then and now: what the sampler would hold after window.
func recordDrops(s *Server, w *alarmWorld, before map[string]int64) {
	now := time.Now()
	w.mu.Lock()
	after := w.dropped
	w.dropped = before
	w.mu.Unlock()
	old := sampleOf(w.Stats(), now.Add(-dropWindow-time.Second))
	w.set(func(w *alarmWorld) { w.dropped = after })
	cur := sampleOf(w.Stats(), now)
	s.sampler.mu.Lock()
	defer s.sampler.mu.Unlock()
	for _, smp := range []sample{old, cur} {
		s.sampler.ring[s.sampler.next] = smp
		s.sampler.next = (s.sampler.next + 1) % len(s.sampler.ring)
		s.sampler.n = min(s.sampler.n+1, len(s.sampler.ring))
	}
}

func getAlarms(t *testing.T, s *Server) []Alarm {
	t.Helper()
	r := call(t, s.Handler(), req{path: "/api/v1/alarms", header: map[string]string{"X-API-Key": viewerKey}})
	if r.status != 200 {
		t.Fatalf("GET /alarms: %d %s", r.status, r.body)
	}
	var out struct {
		Alarms []Alarm `json:"alarms"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Alarms
}

// alarmCases trigger each alarm and clear it again.
var alarmCases = []struct {
	rule, name, subject string
	on, off             func(s *Server, w *alarmWorld)
}{
	{"XMQStoreUnavailable", "store_unavailable", "",
		func(_ *Server, w *alarmWorld) { w.set(func(w *alarmWorld) { w.store.State = "stalled" }) },
		func(_ *Server, w *alarmWorld) { w.set(func(w *alarmWorld) { w.store.State = "ok" }) }},
	{"XMQStoreFull", "store_full", "",
		func(_ *Server, w *alarmWorld) { w.set(func(w *alarmWorld) { w.store.DiskBytes = 100 }) },
		func(_ *Server, w *alarmWorld) { w.set(func(w *alarmWorld) { w.store.DiskBytes = 10 }) }},
	{"XMQStoreNearBudget", "store_near_budget", "",
		func(_ *Server, w *alarmWorld) { w.set(func(w *alarmWorld) { w.store.DiskBytes = 90 }) },
		func(_ *Server, w *alarmWorld) { w.set(func(w *alarmWorld) { w.store.DiskBytes = 80 }) }},
	{"XMQCertificateExpiring", "certificate_expiring", "tls",
		func(_ *Server, w *alarmWorld) {
			w.set(func(w *alarmWorld) { w.certEnd = time.Now().Add(10 * 24 * time.Hour) })
		},
		func(_ *Server, w *alarmWorld) {
			w.set(func(w *alarmWorld) { w.certEnd = time.Now().Add(15 * 24 * time.Hour) })
		}},
	{"XMQCertificateExpiringSoon", "certificate_expiring", "tls",
		func(_ *Server, w *alarmWorld) { w.set(func(w *alarmWorld) { w.certEnd = time.Now().Add(-time.Hour) }) },
		func(_ *Server, w *alarmWorld) {
			w.set(func(w *alarmWorld) { w.certEnd = time.Now().Add(90 * 24 * time.Hour) })
		}},
	{"XMQClusterNodeUnreachable", "cluster_node_unreachable", "",
		func(_ *Server, w *alarmWorld) { w.set(func(w *alarmWorld) { w.unreachable = 1 }) },
		func(_ *Server, w *alarmWorld) { w.set(func(w *alarmWorld) { w.unreachable = 0 }) }},
	{"XMQConnectionsNearLimit", "connections_near_limit", "",
		func(_ *Server, w *alarmWorld) { w.set(func(w *alarmWorld) { w.conns = 91 }) },
		func(_ *Server, w *alarmWorld) { w.set(func(w *alarmWorld) { w.conns = 90 }) }},
	{"XMQMessagesDropped", "messages_dropped", "",
		func(s *Server, w *alarmWorld) {
			w.set(func(w *alarmWorld) { w.dropped = map[string]int64{"queue_full": 3, "quota_exceeded": 1} })
			recordDrops(s, w, map[string]int64{})
		},
		func(s *Server, w *alarmWorld) { recordDrops(s, w, w.Stats().Dropped) }},
	{"XMQStoreErrors", "store_errors", "",
		func(s *Server, w *alarmWorld) {
			w.set(func(w *alarmWorld) { w.dropped = map[string]int64{"store_error": 2} })
			recordDrops(s, w, map[string]int64{})
		},
		func(s *Server, w *alarmWorld) { recordDrops(s, w, w.Stats().Dropped) }},
}

// TestAlarmsFollowTheAlertRules: every alarm is one of the Prometheus
// alert rules of deploy/prometheus/alerts.yml, by name, with its severity.
func TestAlarmsFollowTheAlertRules(t *testing.T) {
	yml, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	severity := map[string]string{}
	for _, m := range regexp.MustCompile(`(?s)- alert: (\w+)\n.*?severity: (\w+)`).FindAllStringSubmatch(string(yml), -1) {
		severity[m[1]] = m[2]
	}
	if len(severity) < 10 {
		t.Fatalf("read %d alert rules from alerts.yml, want its dozen", len(severity))
	}
	for _, c := range alarmCases {
		s, w := newAlarmServer(t)
		c.on(s, w)
		for _, a := range getAlarms(t, s) {
			want, ok := severity[a.Rule]
			if !ok {
				t.Errorf("alarm %s: rule %q is not in alerts.yml", a.Name, a.Rule)
			} else if a.Severity != want {
				t.Errorf("alarm %s: severity %s, rule %s has %s", a.Name, a.Severity, a.Rule, want)
			}
		}
	}
}

// TestAlarms: each condition, set by a fake, shows in GET /api/v1/alarms
// as its rule with a message, and only while it holds.
func TestAlarms(t *testing.T) {
	for _, c := range alarmCases {
		t.Run(c.rule, func(t *testing.T) {
			s, w := newAlarmServer(t)
			if r := call(t, s.Handler(), req{path: "/api/v1/alarms", header: map[string]string{"X-API-Key": viewerKey}}); string(r.body) != `{"alarms":[]}`+"\n" {
				t.Fatalf("alarms of a well broker: %s", r.body)
			}
			c.on(s, w)
			got := getAlarms(t, s)
			if len(got) != 1 || got[0].Rule != c.rule || got[0].Name != c.name || got[0].Subject != c.subject || got[0].Message == "" {
				t.Fatalf("alarms %+v, want the one of %s (%s %q)", got, c.rule, c.name, c.subject)
			}
			since := got[0].Since
			if time.Since(since) > time.Minute {
				t.Errorf("since %v, want about now", since)
			}
			if again := getAlarms(t, s); len(again) != 1 || !again[0].Since.Equal(since) {
				t.Errorf("asked again: %+v, want the same alarm since %v", again, since)
			}
			c.off(s, w)
			if got := getAlarms(t, s); len(got) != 0 {
				t.Fatalf("after clearing %s: %+v", c.rule, got)
			}
		})
	}
}
