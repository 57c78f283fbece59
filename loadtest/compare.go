package loadtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Compared is one run of a comparison: a report and the label its column
// carries (tcp, ws, xmq, mosquitto …).
type Compared struct {
	Label  string
	Report *Report
}

// ReadReport reads a report as WriteJSON (loadtest -json) wrote it.
func ReadReport(r io.Reader) (*Report, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("loadtest: not a loadtest -json report: %w", err)
	}
	if len(rep.Cases) == 0 {
		return nil, errors.New("loadtest: the report has no cases")
	}
	for _, c := range rep.Cases {
		for _, h := range []**Histogram{&c.Latency, &c.AckLatency, &c.Connect} {
			if *h == nil {
				*h = &Histogram{}
			}
		}
	}
	return &rep, nil
}

// metric is one row of a comparison table.
type metric struct {
	name   string
	get    func(c *CaseResult) float64
	format func(v float64) string
	// lowerIsBetter decides which way a change is an improvement; nil: a
	// change is neither.
	lowerIsBetter *bool
	// optional rows are left out when no run measured them (NaN in all).
	optional bool
}

var (
	lower  = func() *bool { b := true; return &b }()
	higher = func() *bool { b := false; return &b }()
)

func durMetric(name string, f func(s Summary) int64, from func(c *CaseResult) Summary) metric {
	return metric{name: name, get: func(c *CaseResult) float64 { return float64(f(from(c))) },
		format: func(v float64) string { return FormatDuration(int64(v)) }, lowerIsBetter: lower}
}

// percentileMetrics are the latency rows of a summary.
func percentileMetrics(prefix string, from func(c *CaseResult) Summary) []metric {
	return []metric{
		durMetric(prefix+"p50", func(s Summary) int64 { return s.P50 }, from),
		durMetric(prefix+"p90", func(s Summary) int64 { return s.P90 }, from),
		durMetric(prefix+"p99", func(s Summary) int64 { return s.P99 }, from),
		durMetric(prefix+"p99.9", func(s Summary) int64 { return s.P999 }, from),
		durMetric(prefix+"max", func(s Summary) int64 { return s.Max }, from),
	}
}

func countMetric(name string, f func(c *CaseResult) float64, better *bool) metric {
	return metric{name: name, get: f, format: func(v float64) string { return commas(uint64(math.Max(v, 0))) }, lowerIsBetter: better}
}

func rateMetric(name string, f func(c *CaseResult) float64) metric {
	return metric{name: name, get: f, format: rate, lowerIsBetter: higher}
}

// optionalPercentiles are percentileMetrics of a summary a case may not
// have (-wake's): NaN, and the rows left out, where it has none.
func optionalPercentiles(prefix string, from func(c *CaseResult) *Summary) []metric {
	out := percentileMetrics(prefix, func(c *CaseResult) Summary { return *from(c) })
	for i := range out {
		get := out[i].get
		out[i].get = func(c *CaseResult) float64 {
			if s := from(c); s == nil || s.Count == 0 {
				return math.NaN()
			}
			return get(c)
		}
		out[i].optional = true
	}
	return out
}

// brokerMetrics are the generator's and the broker's costs.
var brokerMetrics = []metric{
	{name: "generator CPU", get: func(c *CaseResult) float64 { return c.Generator.CPUPercent }, format: pct, lowerIsBetter: lower},
	{name: "broker CPU", get: func(c *CaseResult) float64 {
		if c.Broker == nil || c.Broker.Samples < 2 {
			return math.NaN()
		}
		return c.Broker.CPUAvg
	}, format: pct, lowerIsBetter: lower},
	{name: "broker RSS", get: func(c *CaseResult) float64 {
		if c.Broker == nil || c.Broker.RSSMax == 0 {
			return math.NaN()
		}
		return float64(c.Broker.RSSMax)
	}, format: func(v float64) string { return FormatBytes(uint64(v)) }, lowerIsBetter: lower},
}

// metricsFor lists the rows a case of mode m compares.
func metricsFor(m Mode) []metric {
	switch m {
	case ModeConn:
		out := []metric{
			countMetric("established", func(c *CaseResult) float64 { return float64(c.Established) }, higher),
			countMetric("failed", func(c *CaseResult) float64 { return float64(c.Failed) }, lower),
			countMetric("alive after the hold", func(c *CaseResult) float64 { return float64(c.Alive) }, higher),
			rateMetric("connections/s", func(c *CaseResult) float64 {
				if c.RampNs <= 0 {
					return math.NaN()
				}
				return float64(c.Established) / (float64(c.RampNs) / 1e9)
			}),
		}
		out = append(out, percentileMetrics("connect ", func(c *CaseResult) Summary { return c.ConnectSummary })...)
		out = append(out, optionalPercentiles("wake ", func(c *CaseResult) *Summary { return c.WakeSummary })...)
		out = append(out, optionalPercentiles("busy ", func(c *CaseResult) *Summary { return c.WakeBusySummary })...)
		return append(out, brokerMetrics...)
	case ModePub:
		out := []metric{
			rateMetric("published/s", func(c *CaseResult) float64 { return c.PublishedPerSec }),
			{name: "MB/s", get: func(c *CaseResult) float64 { return c.MBPerSec },
				format: func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }, lowerIsBetter: higher},
			countMetric("errors", func(c *CaseResult) float64 { return float64(c.ErrorTotal()) }, lower),
		}
		out = append(out, percentileMetrics("ack ", func(c *CaseResult) Summary { return c.AckSummary })...)
		return append(out, brokerMetrics...)
	}
	out := []metric{
		rateMetric("published/s", func(c *CaseResult) float64 { return c.PublishedPerSec }),
		rateMetric("delivered/s", func(c *CaseResult) float64 { return c.DeliveredPerSec }),
		countMetric("lost", func(c *CaseResult) float64 { return float64(c.LostMessages) }, lower),
		countMetric("duplicates", func(c *CaseResult) float64 { return float64(c.Duplicates) }, lower),
		countMetric("reordered", func(c *CaseResult) float64 { return float64(c.Reordered) }, lower),
		countMetric("errors", func(c *CaseResult) float64 { return float64(c.ErrorTotal()) }, lower),
		durMetric("avg", func(s Summary) int64 { return int64(s.Mean) }, func(c *CaseResult) Summary { return c.LatencySummary }),
	}
	out = append(out, percentileMetrics("", func(c *CaseResult) Summary { return c.LatencySummary })...)
	return append(out, brokerMetrics...)
}

// compareRow is one metric across the runs, as text cells.
type compareRow struct {
	name   string
	cells  []string
	change string // second run against the first, for two runs
}

// compareCase is the i-th case of every run.
type compareCase struct {
	title string
	cases []*CaseResult // nil where a run has no such case, or one of another mode
	rows  []compareRow
}

// compareCases pairs the runs' cases by position (runs of the same
// command have the same cases) and builds their rows.
func compareCases(runs []Compared) []compareCase {
	n := 0
	for _, r := range runs {
		n = max(n, len(r.Report.Cases))
	}
	var out []compareCase
	for i := range n {
		cc := compareCase{cases: make([]*CaseResult, len(runs))}
		var first *CaseResult
		for k, r := range runs {
			if i >= len(r.Report.Cases) {
				continue
			}
			c := r.Report.Cases[i]
			if first == nil {
				first = c
			}
			if c.Mode == first.Mode {
				cc.cases[k] = c
			}
		}
		cc.title = string(first.Mode) + " " + first.Name
		if first.Mode != ModeConn && first.Mode != ModePub {
			cc.title = string(first.Mode) + ": " + condition(first)
		}
		for _, m := range metricsFor(first.Mode) {
			row := compareRow{name: m.name}
			vals := make([]float64, len(runs))
			for k, c := range cc.cases {
				vals[k] = math.NaN()
				if c != nil {
					vals[k] = m.get(c)
				}
				if math.IsNaN(vals[k]) {
					row.cells = append(row.cells, "-")
				} else {
					row.cells = append(row.cells, m.format(vals[k]))
				}
			}
			if m.optional && !slices.ContainsFunc(vals, func(v float64) bool { return !math.IsNaN(v) }) {
				continue
			}
			if len(runs) == 2 {
				row.change = change(vals[0], vals[1], m.lowerIsBetter)
			}
			cc.rows = append(cc.rows, row)
		}
		out = append(out, cc)
	}
	return out
}

// change prints b against a: "+12%", "-3.5% (better)"; "" when either
// is missing or a is 0.
func change(a, b float64, lowerIsBetter *bool) string {
	if math.IsNaN(a) || math.IsNaN(b) || a == 0 {
		return ""
	}
	d := (b - a) / math.Abs(a) * 100
	if math.Abs(d) < 0.05 {
		return "0%"
	}
	s := strconv.FormatFloat(d, 'f', 1, 64)
	if math.Abs(d) >= 10 {
		s = strconv.FormatFloat(d, 'f', 0, 64)
	}
	if d >= 0 {
		s = "+" + s
	}
	s += "%"
	if lowerIsBetter != nil && math.Abs(d) >= 0.5 {
		if (d < 0) == *lowerIsBetter {
			s += " better"
		} else {
			s += " worse"
		}
	}
	return s
}

// runRows describe each run: what was measured, where and how.
func runRows(runs []Compared) [][2][]string {
	var rows [][2][]string
	add := func(name string, f func(r *Report) string) {
		cells := make([]string, len(runs))
		for k, r := range runs {
			cells[k] = f(r.Report)
		}
		rows = append(rows, [2][]string{{name}, cells})
	}
	add("broker", func(r *Report) string { return r.URL })
	add("transport", func(r *Report) string { return r.Transport })
	add("MQTT", func(r *Report) string { return r.MQTT })
	add("started", func(r *Report) string { return r.Started.Format("2006-01-02 15:04:05 MST") })
	add("load machine", func(r *Report) string {
		return fmt.Sprintf("%s, %s, %d cores", r.Env.Hostname, orDash(r.Env.CPUModel), r.Env.Cores)
	})
	return rows
}

// WriteCompareText prints the runs side by side, one table per case, with
// the change of the second run against the first when there are two.
func WriteCompareText(w io.Writer, runs []Compared) error {
	ew := &errWriter{w: w}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	head := []string{""}
	for _, r := range runs {
		head = append(head, r.Label)
	}
	if len(runs) == 2 {
		head = append(head, runs[1].Label+" vs "+runs[0].Label)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, r := range runRows(runs) {
		fmt.Fprintln(tw, r[0][0]+"\t"+strings.Join(r[1], "\t")+"\t")
	}
	_ = tw.Flush()
	for _, cc := range compareCases(runs) {
		fmt.Fprintf(ew, "\n%s\n", cc.title)
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
		for _, r := range cc.rows {
			cells := append([]string{r.name}, r.cells...)
			if len(runs) == 2 {
				cells = append(cells, r.change)
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
		}
		_ = tw.Flush()
	}
	return ew.err
}

// WriteCompareHTML writes a self-contained page with the runs side by
// side: what each run was, a table per case and, per case, their latency
// by percentile, throughput and latency over time drawn over each other.
func WriteCompareHTML(w io.Writer, runs []Compared) error {
	ew := &errWriter{w: w}
	esc := html.EscapeString
	var labels []string
	for _, r := range runs {
		labels = append(labels, r.Label)
	}
	title := "Load test comparison: " + strings.Join(labels, " vs ")
	fmt.Fprintf(ew, `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"/><title>%s</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}
th{background:#f3f3f3}
code.cmd{white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px}
.better{color:#070}
.worse{color:#b00}
.charts{display:flex;flex-wrap:wrap;gap:12px}
svg{background:#fff;border:1px solid #ddd}
svg text{font:11px sans-serif;fill:#444}
</style></head>
<body>
<h1>%s</h1>
<h2>Runs</h2>
<table><tr><th></th>`, esc(title), esc(title))
	for k, r := range runs {
		fmt.Fprintf(ew, `<th><span style="color:%s">■</span> %s</th>`, palette[k%len(palette)], esc(r.Label))
	}
	fmt.Fprintln(ew, "</tr>")
	for _, r := range runRows(runs) {
		fmt.Fprintf(ew, "<tr><th>%s</th>", esc(r[0][0]))
		for _, c := range r[1] {
			fmt.Fprintf(ew, "<td>%s</td>", esc(c))
		}
		fmt.Fprintln(ew, "</tr>")
	}
	fmt.Fprint(ew, "<tr><th>command</th>")
	for _, r := range runs {
		fmt.Fprintf(ew, `<td><code class="cmd">%s</code></td>`, esc(shellJoin(r.Report.Command)))
	}
	fmt.Fprintln(ew, "</tr></table>")
	for _, cc := range compareCases(runs) {
		fmt.Fprintf(ew, "<h2>%s</h2>\n<table><tr><th></th>", esc(cc.title))
		for _, l := range labels {
			fmt.Fprintf(ew, "<th>%s</th>", esc(l))
		}
		if len(runs) == 2 {
			fmt.Fprintf(ew, "<th>%s</th>", esc(labels[1]+" vs "+labels[0]))
		}
		fmt.Fprintln(ew, "</tr>")
		for _, r := range cc.rows {
			fmt.Fprintf(ew, "<tr><th>%s</th>", esc(r.name))
			for _, c := range r.cells {
				fmt.Fprintf(ew, `<td class="n">%s</td>`, esc(c))
			}
			if len(runs) == 2 {
				class := ""
				switch {
				case strings.HasSuffix(r.change, "better"):
					class = "better"
				case strings.HasSuffix(r.change, "worse"):
					class = "worse"
				}
				fmt.Fprintf(ew, `<td class="n %s">%s</td>`, class, esc(r.change))
			}
			fmt.Fprintln(ew, "</tr>")
		}
		fmt.Fprintln(ew, "</table>\n<div class=\"charts\">")
		writeCompareCharts(ew, runs, cc)
		fmt.Fprintln(ew, "</div>")
	}
	fmt.Fprintln(ew, "</body></html>")
	return ew.err
}

// writeCompareCharts draws one case of every run on shared charts.
func writeCompareCharts(w io.Writer, runs []Compared, cc compareCase) {
	var mode Mode
	for _, c := range cc.cases {
		if c != nil {
			mode = c.Mode
			break
		}
	}
	var pcts []pctSeries
	var thr, p99 []lineSeries
	for k, c := range cc.cases {
		if c == nil {
			continue
		}
		color, label := palette[k%len(palette)], runs[k].Label
		xs, _ := seriesCol(c, func(Point) float64 { return 0 })
		col := func(f func(p Point) float64) []float64 { _, ys := seriesCol(c, f); return ys }
		switch mode {
		case ModeConn:
			pcts = append(pcts, pctSeries{label, color, c.Connect})
			thr = append(thr, lineSeries{name: label, color: color, xs: xs, ys: col(func(p Point) float64 { return float64(p.Connected) })})
		case ModePub:
			pcts = append(pcts, pctSeries{label, color, c.AckLatency})
			thr = append(thr, lineSeries{name: label, color: color, xs: xs, ys: col(func(p Point) float64 { return float64(p.Published) })})
		default:
			pcts = append(pcts, pctSeries{label, color, c.Latency})
			thr = append(thr, lineSeries{name: label, color: color, xs: xs, ys: col(func(p Point) float64 { return float64(p.Delivered) })})
			p99 = append(p99, lineSeries{name: label, color: color, xs: xs, ys: col(func(p Point) float64 { return float64(p.P99) })})
		}
	}
	switch mode {
	case ModeConn:
		fmt.Fprint(w, percentileChart("Connect time by percentile", pcts))
		fmt.Fprint(w, lineChart("Connections over time", nil, thr, countAxis))
	case ModePub:
		fmt.Fprint(w, percentileChart("Publish → acknowledgement by percentile", pcts))
		fmt.Fprint(w, lineChart("Published per second", nil, thr, countAxis))
	default:
		fmt.Fprint(w, percentileChart("End-to-end latency by percentile", pcts))
		fmt.Fprint(w, lineChart("Delivered per second", nil, thr, countAxis))
		fmt.Fprint(w, lineChart("p99 latency over time", nil, p99, durationAxis))
	}
}
