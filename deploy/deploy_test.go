// Package deploy holds what operators install next to xmq: the Grafana
// dashboard (grafana/xmq.json) and the Prometheus alerting rules
// (prometheus/alerts.yml). Its tests keep them true to what xmq exports.
package deploy

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/xmq-io/xmq/core"
	"github.com/xmq-io/xmq/web"
)

// exported returns the name of every series xmq's /metrics serves with
// every option wired (histograms with their _bucket, _sum and _count).
func exported(t *testing.T) map[string]bool { return scrape(t, false) }

// scrape lists the metric names of a broker's /metrics: one with every
// optional series on (a connection limit, a store budget), or one as a
// default install has it (asDefault).
func scrape(t *testing.T, asDefault bool) map[string]bool {
	t.Helper()
	maxConns, budget := 100, int64(2)
	if asDefault {
		maxConns, budget = 0, 0
	}
	srv, err := core.New(core.Options{SysInterval: -1, MaxConnections: maxConns}, core.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	s, err := web.New(srv, web.Options{
		Listeners: []web.Listener{{Name: "tls", Transport: "tls", Address: "127.0.0.1:8883",
			HandshakeFailures: func() map[string]int64 { return map[string]int64{"not_tls": 1} },
			CertNotAfter:      func() time.Time { return time.Now().Add(time.Hour) }}},
		AuthStats: func() web.AuthStats { return web.AuthStats{} },
		Store: func() web.StoreUsage {
			return web.StoreUsage{DiskBytes: 1, BudgetBytes: budget, FreeBytes: 3, State: "ok"}
		},
		Cluster: func() web.ClusterStats { return web.ClusterStats{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(w.Body)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for name, f := range fams {
		names[name] = true
		if f.GetType().String() == "HISTOGRAM" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[name+suffix] = true
			}
		}
	}
	return names
}

// promQLWords are the words of PromQL that are neither functions (followed
// by "(") nor metric names.
var promQLWords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or", "unless"}

var (
	stringLit   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	matchers    = regexp.MustCompile(`\{[^}]*\}`)
	ranges      = regexp.MustCompile(`\[[^\]]*\]`)
	grouping    = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	numbers     = regexp.MustCompile(`\b\d+(\.\d+)?([eE][+-]?\d+|ms|s|m|h|d|w|y)?\b`)
	identifiers = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
)

// metricNames returns the metric names an expression reads: what is left
// once strings, label matchers, ranges, grouping clauses, functions,
// keywords and numbers are taken out. It fits the expressions of this
// directory, not every PromQL.
func metricNames(expr string) []string {
	e := stringLit.ReplaceAllString(expr, `""`)
	e = matchers.ReplaceAllString(e, " ")
	e = ranges.ReplaceAllString(e, " ")
	e = grouping.ReplaceAllString(e, " ")
	e = numbers.ReplaceAllString(e, " ")
	var out []string
	for _, m := range identifiers.FindAllString(e, -1) {
		if strings.HasSuffix(m, "(") || slices.Contains(promQLWords, m) {
			continue
		}
		out = append(out, m)
	}
	return out
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (instance, listener) (rate(xmq_connects_total{instance=~"$instance"}[$__rate_interval]))`: {"xmq_connects_total"},
		`xmq_store_disk_bytes / xmq_store_disk_budget_bytes > 0.85`:                                       {"xmq_store_disk_bytes", "xmq_store_disk_budget_bytes"},
		`histogram_quantile(0.99, sum by (le) (rate(xmq_store_sync_seconds_bucket[5m])))`:                 {"xmq_store_sync_seconds_bucket"},
		`sum without (listener, transport) (xmq_connections) / xmq_max_connections > 0.9`:                 {"xmq_connections", "xmq_max_connections"},
		`up{job="xmq"} == 0 and on (instance) xmq_build_info offset 5m`:                                   {"up", "xmq_build_info"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%s) = %q, want %q", expr, got, want)
		}
	}
}

// TestGrafanaDashboardQueriesExportedMetrics: every metric the dashboard
// queries is one xmq exports, and the dashboard is one Grafana imports
// (panels on the 24-column grid, unique ids, the data source variable).
func TestGrafanaDashboardQueriesExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile("grafana/xmq.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID        string `json:"uid"`
		Title      string `json:"title"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			GridPos struct{ H, W, X, Y int } `json:"gridPos"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("grafana/xmq.json: %v", err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Errorf("uid %q, title %q: Grafana needs both", dash.UID, dash.Title)
	}
	var vars []string
	for _, v := range dash.Templating.List {
		vars = append(vars, v.Name)
	}
	if !slices.Contains(vars, "datasource") || !slices.Contains(vars, "instance") {
		t.Errorf("template variables %q, want datasource and instance", vars)
	}
	have := exported(t)
	have["up"] = true // Prometheus's own
	byDefault := scrape(t, true)
	byDefault["up"] = true
	ids := map[int]bool{}
	queries := 0
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if g := p.GridPos; g.W < 1 || g.X < 0 || g.X+g.W > 24 || (p.Type != "row" && g.H < 1) {
			t.Errorf("panel %q: gridPos %+v off the 24-column grid", p.Title, g)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not query the datasource variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		// A panel shows something on a default install (no connection
		// limit, no store budget): one of its queries has every metric of
		// one of its `or` alternatives.
		if !slices.ContainsFunc(p.Targets, func(tg struct {
			Expr string `json:"expr"`
		}) bool {
			return hasData(tg.Expr, byDefault)
		}) {
			t.Errorf("panel %q shows no data on a default install", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			if !strings.Contains(tg.Expr, `instance=~"$instance"`) {
				t.Errorf("panel %q: %s ignores the instance variable", p.Title, tg.Expr)
			}
			names := metricNames(tg.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q: no metric found in %s", p.Title, tg.Expr)
			}
			for _, n := range names {
				if !have[n] {
					t.Errorf("panel %q queries %s, which xmq does not export", p.Title, n)
				}
			}
		}
	}
	if queries < 20 {
		t.Errorf("%d queries: the dashboard lost its panels", queries)
	}
}

// hasData reports whether expr has data when the metrics in have are
// exported: every metric of one of its top-level `or` alternatives is.
func hasData(expr string, have map[string]bool) bool {
	for alt := range strings.SplitSeq(expr, " or ") {
		all := true
		for _, n := range metricNames(alt) {
			all = all && have[n]
		}
		if all {
			return true
		}
	}
	return false
}

// rules reads the expressions of prometheus/alerts.yml by alert name.
func rules(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// TestAlertRulesUseExportedMetrics: every metric an alert reads is one xmq
// exports, and the alerts the issue asks for are there.
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	have := exported(t)
	have["up"] = true
	rs := rules(t)
	for _, want := range []string{"XMQDown", "XMQConnectionsNearLimit", "XMQMessagesDropped", "XMQStoreNearBudget",
		"XMQCertificateExpiring", "XMQAuthFailureSpike", "XMQClusterNodeUnreachable"} {
		if rs[want] == "" {
			t.Errorf("alerts.yml has no %s", want)
		}
	}
	for alert, expr := range rs {
		for _, n := range metricNames(expr) {
			if !have[n] {
				t.Errorf("%s reads %s, which xmq does not export", alert, n)
			}
		}
	}
}

// TestAlertRulesWithPromtool runs promtool check rules and promtool test
// rules (alerts_test.yml: each alert fires on the series it is meant for
// and not on the others). promtool comes with Debian's prometheus package,
// which .ci/deps installs; without it the test skips, except in CI.
func TestAlertRulesWithPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is not installed; CI must have it (.ci/deps installs the Debian package prometheus)")
		}
		t.Skip("promtool is not installed (apt-get install prometheus): skipping")
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, promtool, args...)
		cmd.Dir = "prometheus"
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
