package loadtest

import (
	"fmt"
	"html"
	"io"
)

// WriteHTML writes a self-contained page: the report's tables and charts
// drawn as inline SVG (latency histogram, latency by percentile,
// throughput and latency over time, broker CPU and memory when sampled),
// on axes with round ticks. The command wraps. It loads nothing from the
// network. The markup is well-formed XML as well as HTML.
func WriteHTML(w io.Writer, rep *Report) error {
	ew := &errWriter{w: w}
	esc := html.EscapeString
	title := fmt.Sprintf("Load test: %s against %s", rep.Options.Mode, rep.URL)
	fmt.Fprintf(ew, `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"/><title>%s</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
th{background:#f3f3f3}
pre{background:#f6f6f6;padding:.6em;white-space:pre-wrap;overflow-wrap:anywhere}
.charts{display:flex;flex-wrap:wrap;gap:12px}
svg{background:#fff;border:1px solid #ddd}
svg text{font:11px sans-serif;fill:#444}
.fail{color:#b00;font-weight:bold}
</style></head>
<body>
<h1>%s</h1>
<p>%s to %s.</p>
`, esc(title), esc(title), esc(rep.Started.Format("2006-01-02 15:04:05 MST")), esc(rep.Finished.Format("15:04:05")))
	fmt.Fprintln(ew, "<h2>Environment</h2>\n<table>")
	for _, kv := range envRows(rep) {
		fmt.Fprintf(ew, "<tr><th>%s</th><td>%s</td></tr>\n", esc(kv[0]), esc(kv[1]))
	}
	fmt.Fprintln(ew, "</table>")
	if len(rep.Command) > 0 {
		fmt.Fprintf(ew, "<h2>Command</h2>\n<pre class=\"cmd\">%s</pre>\n", esc(shellJoin(rep.Command)))
	}
	fmt.Fprintln(ew, "<h2>Results</h2>")
	for _, t := range tables(rep) {
		fmt.Fprintln(ew, "<table><tr>")
		for _, h := range t.head {
			fmt.Fprintf(ew, "<th>%s</th>", esc(h))
		}
		fmt.Fprintln(ew, "</tr>")
		for _, r := range t.rows {
			fmt.Fprint(ew, "<tr>")
			for i, c := range r {
				class := ""
				if t.right[i] {
					class = ` class="n"`
				}
				fmt.Fprintf(ew, "<td%s>%s</td>", class, esc(c))
			}
			fmt.Fprintln(ew, "</tr>")
		}
		fmt.Fprintln(ew, "</table>")
	}
	for _, c := range rep.Cases {
		fmt.Fprintf(ew, "<h3>%s</h3>\n<div class=\"charts\">\n", esc(string(c.Mode)+" "+c.Name))
		writeCaseCharts(ew, c)
		fmt.Fprintln(ew, "</div>")
		if len(c.Errors) > 0 {
			fmt.Fprintf(ew, "<p>Errors: %s</p>\n", esc(errorText(c.Errors)))
		}
		g := c.Generator
		fmt.Fprintf(ew, "<p>Generator: %s of one core (%.2f CPU s in %.2f s), peak RSS %s.</p>\n",
			esc(pct(g.CPUPercent)), g.CPUSeconds, g.WallSeconds, esc(FormatBytes(g.MaxRSS)))
	}
	if len(rep.Notes) > 0 {
		fmt.Fprintln(ew, "<h2>Notes</h2>\n<ul>")
		for _, n := range rep.Notes {
			fmt.Fprintf(ew, "<li>%s</li>\n", esc(n))
		}
		fmt.Fprintln(ew, "</ul>")
	}
	if len(rep.Asserts) > 0 {
		fmt.Fprintln(ew, "<h2>Objectives</h2>\n<table><tr><th>objective</th><th>case</th><th>got</th><th>result</th></tr>")
		for _, a := range rep.Asserts {
			res := "pass"
			if !a.Pass {
				res = `<span class="fail">FAIL</span>`
				if a.Note != "" {
					res += " " + esc(a.Note)
				}
			}
			fmt.Fprintf(ew, "<tr><td><code>%s</code></td><td>%s</td><td class=\"n\">%s</td><td>%s</td></tr>\n",
				esc(a.Assertion), esc(a.Case), esc(a.Shown), res)
		}
		fmt.Fprintln(ew, "</table>")
	}
	fmt.Fprintln(ew, "</body></html>")
	return ew.err
}

// seriesCol is one column of a case's per-second series.
func seriesCol(c *CaseResult, f func(p Point) float64) (xs, ys []float64) {
	for _, p := range c.Series {
		xs, ys = append(xs, p.T), append(ys, f(p))
	}
	return xs, ys
}

// writeCaseCharts draws one case's charts: over time, the distribution
// and, by percentile, the latencies; the broker's CPU and memory when
// sampled.
func writeCaseCharts(w io.Writer, c *CaseResult) {
	xs, _ := seriesCol(c, func(Point) float64 { return 0 })
	col := func(f func(p Point) float64) []float64 { _, ys := seriesCol(c, f); return ys }
	if c.Mode == ModeConn {
		fmt.Fprint(w, lineChart("Connections over time", xs, []lineSeries{
			{name: "connected", color: "#1f77b4", ys: col(func(p Point) float64 { return float64(p.Connected) })},
			{name: "failures", color: "#d62728", ys: col(func(p Point) float64 { return float64(p.Errors) })},
		}, countAxis))
		fmt.Fprint(w, histogramChart("Connect time (dial → CONNACK)", c.Connect))
		fmt.Fprint(w, percentileChart("Connect time by percentile", []pctSeries{{"connect", "#1f77b4", c.Connect}}))
		if c.Wake != nil && c.Wake.Count() > 0 {
			fmt.Fprint(w, percentileChart("PINGREQ → PINGRESP by percentile (-wake)", []pctSeries{
				{"idle connection", "#d62728", c.Wake}, {"busy connection", "#2ca02c", c.WakeBusy}}))
		}
	} else {
		fmt.Fprint(w, lineChart("Throughput (messages per second)", xs, []lineSeries{
			{name: "published", color: "#1f77b4", ys: col(func(p Point) float64 { return float64(p.Published) })},
			{name: "delivered", color: "#2ca02c", ys: col(func(p Point) float64 { return float64(p.Delivered) })},
		}, countAxis))
		var pcts []pctSeries
		if c.Latency != nil && c.Latency.Count() > 0 {
			fmt.Fprint(w, lineChart("Latency over time", xs, []lineSeries{
				{name: "p50", color: "#1f77b4", ys: col(func(p Point) float64 { return float64(p.P50) })},
				{name: "p99", color: "#ff7f0e", ys: col(func(p Point) float64 { return float64(p.P99) })},
			}, durationAxis))
			fmt.Fprint(w, histogramChart("End-to-end latency", c.Latency))
			pcts = append(pcts, pctSeries{"end to end", "#1f77b4", c.Latency})
		}
		if c.AckLatency != nil && c.AckLatency.Count() > 0 {
			fmt.Fprint(w, histogramChart("Publish → acknowledgement", c.AckLatency))
			pcts = append(pcts, pctSeries{"publish → ack", "#ff7f0e", c.AckLatency})
		}
		if len(pcts) > 0 {
			fmt.Fprint(w, percentileChart("Latency by percentile", pcts))
		}
	}
	if c.Broker != nil && c.Broker.Samples > 1 {
		// Only the seconds a broker sample fell in (RSS is never 0 then).
		var bx, cpu, rss []float64
		for _, p := range c.Series {
			if p.BrokerRSS > 0 {
				bx, cpu, rss = append(bx, p.T), append(cpu, p.BrokerCPU), append(rss, float64(p.BrokerRSS))
			}
		}
		fmt.Fprint(w, lineChart("Broker CPU (% of one core)", bx, []lineSeries{{name: "CPU", color: "#9467bd", ys: cpu}}, percentAxis))
		fmt.Fprint(w, lineChart("Broker resident memory", bx, []lineSeries{{name: "RSS", color: "#8c564b", ys: rss}}, bytesAxis))
	}
}
