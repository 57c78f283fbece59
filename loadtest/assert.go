package loadtest

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// An Assertion is one objective of -assert, such as p99<5ms, loss=0 or
// delivered>=0.99. Every case of a run must meet every assertion.
type Assertion struct {
	Raw    string  `json:"raw"`
	Metric string  `json:"metric"`
	Op     string  `json:"op"`
	Value  float64 `json:"value"` // in the metric's unit: ns, ratio, count, bytes, per second, percent
}

// AssertResult is one assertion checked against one case.
type AssertResult struct {
	Assertion string  `json:"assertion"`
	Case      string  `json:"case"`
	Got       float64 `json:"got"`
	Shown     string  `json:"shown"`
	Pass      bool    `json:"pass"`
	Note      string  `json:"note,omitempty"`
}

type metricKind int

const (
	kindDuration metricKind = iota // nanoseconds; written 5ms, 250us, 1.5s
	kindRatio                      // 0..1; written 0.99 or 99%
	kindCount                      // written 0, 1500, 10k, 2M
	kindBytes                      // written 512MB, 1GiB
	kindPercent                    // percent of one core; written 150 or 150%
)

// metricDef names a metric, its unit and how to read it from a case.
type metricDef struct {
	kind metricKind
	help string
	get  func(r *CaseResult) (float64, bool)
}

// mainLatency is the latency a mode is about: connect time for conn,
// acknowledgement time for pub, end-to-end otherwise.
func mainLatency(r *CaseResult) *Histogram {
	switch r.Mode {
	case ModeConn:
		return r.Connect
	case ModePub:
		return r.AckLatency
	}
	return r.Latency
}

func latencyMetric(q float64) func(r *CaseResult) (float64, bool) {
	return quantileOf(mainLatency, q)
}

// quantileOf reads quantile q of the histogram pick returns (-1: the mean,
// 0: the least, 1: the largest); not applicable when it counted nothing.
func quantileOf(pick func(r *CaseResult) *Histogram, q float64) func(r *CaseResult) (float64, bool) {
	return func(r *CaseResult) (float64, bool) {
		h := pick(r)
		if h == nil || h.Count() == 0 {
			return 0, false
		}
		switch q {
		case -1:
			return h.Mean(), true
		case 0:
			return float64(h.Min()), true
		case 1:
			return float64(h.Max()), true
		}
		return float64(h.Quantile(q)), true
	}
}

func wakeHist(r *CaseResult) *Histogram     { return r.Wake }
func wakeBusyHist(r *CaseResult) *Histogram { return r.WakeBusy }

func traffic(f func(r *CaseResult) float64) func(r *CaseResult) (float64, bool) {
	return func(r *CaseResult) (float64, bool) {
		if r.Mode == ModeConn {
			return 0, false
		}
		return f(r), true
	}
}

func delivery(f func(r *CaseResult) float64) func(r *CaseResult) (float64, bool) {
	return func(r *CaseResult) (float64, bool) {
		if r.Mode == ModeConn || r.Mode == ModePub || r.Expected == 0 && r.Published > 0 {
			return 0, false
		}
		return f(r), true
	}
}

func connOnly(f func(r *CaseResult) float64) func(r *CaseResult) (float64, bool) {
	return func(r *CaseResult) (float64, bool) {
		if r.Mode != ModeConn || r.Target == 0 {
			return 0, false
		}
		return f(r), true
	}
}

// Metrics are the names -assert understands.
var metrics = map[string]metricDef{
	"avg":            {kindDuration, "mean latency", latencyMetric(-1)},
	"min":            {kindDuration, "smallest latency", latencyMetric(0)},
	"p50":            {kindDuration, "median latency", latencyMetric(0.5)},
	"p90":            {kindDuration, "90th percentile latency", latencyMetric(0.9)},
	"p99":            {kindDuration, "99th percentile latency", latencyMetric(0.99)},
	"p999":           {kindDuration, "99.9th percentile latency", latencyMetric(0.999)},
	"max":            {kindDuration, "largest latency", latencyMetric(1)},
	"loss":           {kindCount, "messages never delivered", delivery(func(r *CaseResult) float64 { return float64(r.LostMessages) })},
	"loss_ratio":     {kindRatio, "lost / expected", delivery(func(r *CaseResult) float64 { return 1 - r.DeliveredRatio })},
	"delivered":      {kindRatio, "delivered / expected (published × fan-out)", delivery(func(r *CaseResult) float64 { return r.DeliveredRatio })},
	"dups":           {kindCount, "duplicate deliveries", delivery(func(r *CaseResult) float64 { return float64(r.Duplicates) })},
	"reordered":      {kindCount, "deliveries out of order", delivery(func(r *CaseResult) float64 { return float64(r.Reordered) })},
	"rate":           {kindCount, "messages published per second", traffic(func(r *CaseResult) float64 { return r.PublishedPerSec })},
	"delivered_rate": {kindCount, "messages delivered per second", delivery(func(r *CaseResult) float64 { return r.DeliveredPerSec })},
	"mbps":           {kindCount, "payload MB (10^6) published per second", traffic(func(r *CaseResult) float64 { return r.MBPerSec })},
	"errors":         {kindCount, "errors of any kind", func(r *CaseResult) (float64, bool) { return float64(r.ErrorTotal()), true }},
	"established":    {kindRatio, "connections established / target", connOnly(func(r *CaseResult) float64 { return float64(r.Established) / float64(r.Target) })},
	"alive":          {kindRatio, "connections answering PINGREQ after the hold / target", connOnly(func(r *CaseResult) float64 { return float64(r.Alive) / float64(r.Target) })},
	"failed":         {kindCount, "connections that failed", connOnly(func(r *CaseResult) float64 { return float64(r.Failed) })},
	"wake_p50":       {kindDuration, "conn -wake: median PINGREQ round trip on a connection idle -wake-idle", quantileOf(wakeHist, 0.5)},
	"wake_p99":       {kindDuration, "conn -wake: 99th percentile of the same", quantileOf(wakeHist, 0.99)},
	"wake_max":       {kindDuration, "conn -wake: largest of the same", quantileOf(wakeHist, 1)},
	"busy_p50":       {kindDuration, "conn -wake: median PINGREQ round trip right after one (a busy connection)", quantileOf(wakeBusyHist, 0.5)},
	"gen_cpu":        {kindPercent, "generator CPU, % of one core", func(r *CaseResult) (float64, bool) { return r.Generator.CPUPercent, true }},
	"broker_cpu": {kindPercent, "broker CPU, % of one core (needs -broker-pid or -metrics-url)", func(r *CaseResult) (float64, bool) {
		return brokerFigure(r, func(b *BrokerStats) float64 { return b.CPUAvg })
	}},
	"broker_rss": {kindBytes, "broker peak resident memory (needs -broker-pid or -metrics-url)", func(r *CaseResult) (float64, bool) {
		return brokerFigure(r, func(b *BrokerStats) float64 { return float64(b.RSSMax) })
	}},
}

func brokerFigure(r *CaseResult, f func(*BrokerStats) float64) (float64, bool) {
	if r.Broker == nil || r.Broker.Samples < 2 {
		return 0, false
	}
	return f(r.Broker), true
}

// MetricHelp lists the metrics -assert understands, one per line.
func MetricHelp() string {
	names := make([]string, 0, len(metrics))
	for n := range metrics {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "  %-15s %s\n", n, metrics[n].help)
	}
	return b.String()
}

var ops = []string{"<=", ">=", "==", "!=", "<", ">", "="}

// ErrAssertSyntax reports an -assert that cannot be parsed.
var ErrAssertSyntax = errors.New("loadtest: -assert")

// ParseAssertions parses a comma-separated list such as
// "p99<5ms,loss=0,delivered>=0.99".
func ParseAssertions(s string) ([]Assertion, error) {
	var out []Assertion
	for _, raw := range strings.Split(s, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		a, err := parseAssertion(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func parseAssertion(raw string) (Assertion, error) {
	i, op := -1, ""
	for _, o := range ops {
		if j := strings.Index(raw, o); j > 0 && (i < 0 || j < i || j == i && len(o) > len(op)) {
			i, op = j, o
		}
	}
	if i < 0 {
		return Assertion{}, fmt.Errorf("%w %q: want METRIC OP VALUE, e.g. p99<5ms (ops: < <= > >= = !=)", ErrAssertSyntax, raw)
	}
	name := strings.TrimSpace(raw[:i])
	val := strings.TrimSpace(raw[i+len(op):])
	m, ok := metrics[name]
	if !ok {
		return Assertion{}, fmt.Errorf("%w %q: unknown metric %q; known:\n%s", ErrAssertSyntax, raw, name, MetricHelp())
	}
	if op == "==" {
		op = "="
	}
	v, err := parseValue(m.kind, val)
	if err != nil {
		return Assertion{}, fmt.Errorf("%w %q: %w", ErrAssertSyntax, raw, err)
	}
	return Assertion{Raw: raw, Metric: name, Op: op, Value: v}, nil
}

func parseValue(k metricKind, s string) (float64, error) {
	switch k {
	case kindDuration:
		if f, err := strconv.ParseFloat(s, 64); err == nil && f == 0 {
			return 0, nil
		}
		d, err := time.ParseDuration(strings.ReplaceAll(s, "µs", "us"))
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration such as 5ms", s)
		}
		return float64(d), nil
	case kindRatio:
		if p, ok := strings.CutSuffix(s, "%"); ok {
			f, err := strconv.ParseFloat(p, 64)
			if err != nil {
				return 0, fmt.Errorf("%q is not a percentage", s)
			}
			return f / 100, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a ratio such as 0.99 or 99%%", s)
		}
		return f, nil
	case kindPercent:
		f, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a percentage", s)
		}
		return f, nil
	case kindBytes:
		return parseBytes(s)
	}
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "K"):
		mult, s = 1e3, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mult, s = 1e6, s[:len(s)-1]
	case strings.HasSuffix(s, "G"):
		mult, s = 1e9, s[:len(s)-1]
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return f * mult, nil
}

func parseBytes(s string) (float64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	for _, u := range units {
		if p, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil {
				return 0, fmt.Errorf("%q is not a size such as 512MB", s)
			}
			return f * u.mult, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size such as 512MB", s)
	}
	return f, nil
}

func (a Assertion) holds(got float64) bool {
	const eps = 1e-9
	switch a.Op {
	case "<":
		return got < a.Value
	case "<=":
		return got <= a.Value+eps
	case ">":
		return got > a.Value
	case ">=":
		return got >= a.Value-eps
	case "=":
		return math.Abs(got-a.Value) <= eps*math.Max(1, math.Abs(a.Value))
	case "!=":
		return math.Abs(got-a.Value) > eps*math.Max(1, math.Abs(a.Value))
	}
	return false
}

// Evaluate checks every assertion against every case. A metric a case did
// not measure (p99 of QoS 0 ingest, loss without subscribers) fails, so a
// gate never passes by accident.
func Evaluate(rep *Report, as []Assertion) []AssertResult {
	var out []AssertResult
	for _, c := range rep.Cases {
		for _, a := range as {
			m := metrics[a.Metric]
			r := AssertResult{Assertion: a.Raw, Case: c.Name}
			got, ok := m.get(c)
			if !ok {
				r.Note = "not measured in this case"
				r.Shown = "n/a"
			} else {
				r.Got, r.Pass, r.Shown = got, a.holds(got), formatMetric(m.kind, got)
			}
			out = append(out, r)
		}
	}
	return out
}

// formatMetric prints a value in its metric's unit.
func formatMetric(k metricKind, v float64) string {
	switch k {
	case kindDuration:
		return FormatDuration(int64(v))
	case kindRatio:
		return strconv.FormatFloat(v, 'f', 4, 64)
	case kindPercent:
		return strconv.FormatFloat(v, 'f', 1, 64) + "%"
	case kindBytes:
		return FormatBytes(uint64(v))
	}
	if v == math.Trunc(v) {
		return commas(uint64(max(v, 0)))
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// AssertFailures is the assertions a report failed.
func (r *Report) AssertFailures() []AssertResult {
	var out []AssertResult
	for _, a := range r.Asserts {
		if !a.Pass {
			out = append(out, a)
		}
	}
	return out
}
