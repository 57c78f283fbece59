package web

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Alarm is a condition that needs an operator, active now. Each is one of
// the Prometheus alert rules of deploy/prometheus/alerts.yml (Rule), read
// from the same data as the series the rule watches, so the dashboard and
// Prometheus agree on what is wrong. Unlike Prometheus the dashboard has
// no "for:" delay: an alarm shows as soon as its condition holds.
type Alarm struct {
	Name     string    `json:"name"`              // e.g. store_unavailable; with Subject, unique
	Rule     string    `json:"rule"`              // the alert of deploy/prometheus/alerts.yml
	Severity string    `json:"severity"`          // warning or critical, as the rule's label
	Subject  string    `json:"subject,omitempty"` // what it is about when there may be several (a listener)
	Since    time.Time `json:"since"`             // since when it holds without a break
	Message  string    `json:"message"`           // what is wrong and the setting or action that helps
}

// Thresholds of the alarms, the same as the alert rules'.
const (
	connectionsNearLimit = 0.9  // XMQConnectionsNearLimit: of broker.max_connections
	storeNearBudget      = 0.85 // XMQStoreNearBudget: of store.max_disk_bytes
	certExpiring         = 14 * 24 * time.Hour
	certExpiringSoon     = 3 * 24 * time.Hour
	dropWindow           = 5 * time.Minute // the rules' rate(...[5m])
)

// alarms remembers since when each active alarm holds; mu guards since.
// It is evaluated on every sampler tick, so Since is right to the second
// even when no one asks, and on every request.
type alarms struct {
	s     *Server
	mu    sync.Mutex
	since map[string]time.Time // by name and subject
}

// check evaluates the conditions at now and returns the active alarms,
// most severe first.
func (a *alarms) check(now time.Time) []Alarm {
	var out []Alarm
	add := func(name, rule, severity, subject, msg string) {
		out = append(out, Alarm{Name: name, Rule: rule, Severity: severity, Subject: subject, Message: msg})
	}
	s := a.s
	if s.opts.Store != nil {
		u := s.opts.Store()
		switch {
		case u.State == "unavailable" || u.State == "stalled" || u.State == "failed":
			add("store_unavailable", "XMQStoreUnavailable", "critical", "",
				fmt.Sprintf("The store is %s: QoS 1/2 messages for persistent sessions are refused. Free space on the data directory's disk (xmq resumes by itself) or check it; /readyz and the log say why.", u.State))
		case u.State == "full" || u.BudgetBytes > 0 && u.DiskBytes >= u.BudgetBytes:
			add("store_full", "XMQStoreFull", "critical", "",
				fmt.Sprintf("The store holds %d of its store.max_disk_bytes %d: new queued and retained QoS 1/2 messages are refused. Drain or remove offline sessions, or raise store.max_disk_bytes.", u.DiskBytes, u.BudgetBytes))
		case u.BudgetBytes > 0 && float64(u.DiskBytes) > storeNearBudget*float64(u.BudgetBytes):
			add("store_near_budget", "XMQStoreNearBudget", "warning", "",
				fmt.Sprintf("The store holds %.0f%% of store.max_disk_bytes; at 100%% new queued and retained QoS 1/2 messages are refused. Raise store.max_disk_bytes or drain offline sessions.", 100*float64(u.DiskBytes)/float64(u.BudgetBytes)))
		}
	}
	for _, l := range s.opts.Listeners {
		if l.CertNotAfter == nil {
			continue
		}
		end := l.CertNotAfter()
		if end.IsZero() {
			continue // not known yet (ACME before its first certificate): no series either
		}
		switch left := end.Sub(now); {
		case left < certExpiringSoon:
			add("certificate_expiring", "XMQCertificateExpiringSoon", "critical", l.Name,
				fmt.Sprintf("The certificate of listener %s ends %s (%s); once it has ended, TLS clients refuse the broker. Renew its certificate files (xmq reloads them) or check ACME.", l.Name, end.UTC().Format(time.RFC3339), leftText(left)))
		case left < certExpiring:
			add("certificate_expiring", "XMQCertificateExpiring", "warning", l.Name,
				fmt.Sprintf("The certificate of listener %s ends %s (%s). Renew its certificate files (xmq reloads them when they change, or on SIGHUP); with ACME, check that the CA can reach the broker.", l.Name, end.UTC().Format(time.RFC3339), leftText(left)))
		}
	}
	if s.opts.Cluster != nil {
		if n := s.opts.Cluster().NodesUnreachable; n > 0 {
			add("cluster_node_unreachable", "XMQClusterNodeUnreachable", "critical", "",
				fmt.Sprintf("%d other node(s) sent no heartbeat for three intervals: down, or cut off by a network partition. GET /api/v1/nodes names them; it heals by itself when the network does.", n))
		}
	}
	if max := s.broker.Options().MaxConnections; max > 0 {
		open := 0
		for _, n := range s.broker.ConnectionsByListener() { // what xmq_connections sums
			open += n
		}
		if float64(open) > connectionsNearLimit*float64(max) {
			add("connections_near_limit", "XMQConnectionsNearLimit", "warning", "",
				fmt.Sprintf("%d of broker.max_connections %d are open; beyond it CONNECTs are refused (Server Busy). Raise broker.max_connections or add nodes.", open, max))
		}
	}
	if queue, store := s.sampler.drops(now, dropWindow); queue > 0 || store > 0 {
		if queue > 0 {
			add("messages_dropped", "XMQMessagesDropped", "warning", "",
				fmt.Sprintf("%d messages dropped or refused for full session queues in the last 5 minutes (broker.max_queued, broker.max_queued_bytes). The clients page shows the queued sessions.", queue))
		}
		if store > 0 {
			add("store_errors", "XMQStoreErrors", "critical", "",
				fmt.Sprintf("%d QoS 1/2 messages refused in the last 5 minutes because the store failed to record them. Check the data directory's disk and the log.", store))
		}
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	seen := make(map[string]bool, len(out))
	for i := range out {
		k := out[i].Name + "\x00" + out[i].Subject
		seen[k] = true
		since, ok := a.since[k]
		if !ok {
			since = now
			a.since[k] = now
		}
		out[i].Since = since
	}
	for k := range a.since {
		if !seen[k] {
			delete(a.since, k) // cleared: a return is a new alarm
		}
	}
	slices.SortFunc(out, func(x, y Alarm) int {
		return cmp.Or(cmp.Compare(severityRank(x.Severity), severityRank(y.Severity)), x.Since.Compare(y.Since),
			cmp.Compare(x.Name, y.Name), cmp.Compare(x.Subject, y.Subject))
	})
	return out
}

func severityRank(s string) int {
	if s == "critical" {
		return 0
	}
	return 1
}

// leftText says how long until an end, or that it has passed.
func leftText(d time.Duration) string {
	if d < 0 {
		return "ended"
	}
	return "in " + d.Truncate(time.Minute).String()
}

// listAlarms answers GET /api/v1/alarms.
func (s *Server) listAlarms(w http.ResponseWriter, _ *http.Request, _ principal, _ string) error {
	list := s.alarms.check(time.Now())
	if list == nil {
		list = []Alarm{} // [], not null: all is well
	}
	writeJSON(w, http.StatusOK, map[string]any{"alarms": list})
	return nil
}
