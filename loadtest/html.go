package loadtest

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
)

// WriteHTML writes a self-contained page: the report's tables and charts
// drawn as inline SVG (latency histogram, throughput and latency over time,
// broker CPU and memory when sampled). It loads nothing from the network.
// The markup is well-formed XML as well as HTML.
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
pre{background:#f6f6f6;padding:.6em;overflow-x:auto}
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
		fmt.Fprintf(ew, "<h2>Command</h2>\n<pre>%s</pre>\n", esc(shellJoin(rep.Command)))
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
		xs := make([]float64, len(c.Series))
		for i, p := range c.Series {
			xs[i] = p.T
		}
		col := func(f func(p Point) float64) []float64 {
			ys := make([]float64, len(c.Series))
			for i, p := range c.Series {
				ys[i] = f(p)
			}
			return ys
		}
		if c.Mode == ModeConn {
			fmt.Fprint(ew, lineChart("Connections over time", "s", xs, []lineSeries{
				{"connected", "#1f77b4", col(func(p Point) float64 { return float64(p.Connected) })},
				{"failures", "#d62728", col(func(p Point) float64 { return float64(p.Errors) })},
			}, countLabel))
			fmt.Fprint(ew, histogramChart("Connect time (dial → CONNACK)", c.Connect))
		} else {
			fmt.Fprint(ew, lineChart("Throughput (messages per second)", "s", xs, []lineSeries{
				{"published", "#1f77b4", col(func(p Point) float64 { return float64(p.Published) })},
				{"delivered", "#2ca02c", col(func(p Point) float64 { return float64(p.Delivered) })},
			}, countLabel))
			if c.Latency != nil && c.Latency.Count() > 0 {
				fmt.Fprint(ew, lineChart("Latency over time", "s", xs, []lineSeries{
					{"p50", "#1f77b4", col(func(p Point) float64 { return float64(p.P50) })},
					{"p99", "#ff7f0e", col(func(p Point) float64 { return float64(p.P99) })},
				}, func(v float64) string { return FormatDuration(int64(v)) }))
				fmt.Fprint(ew, histogramChart("End-to-end latency", c.Latency))
			}
			if c.AckLatency != nil && c.AckLatency.Count() > 0 {
				fmt.Fprint(ew, histogramChart("Publish → acknowledgement", c.AckLatency))
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
			fmt.Fprint(ew, lineChart("Broker CPU (% of one core)", "s", bx, []lineSeries{{"CPU %", "#9467bd", cpu}},
				func(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) + "%" }))
			fmt.Fprint(ew, lineChart("Broker resident memory", "s", bx, []lineSeries{{"RSS", "#8c564b", rss}},
				func(v float64) string { return FormatBytes(uint64(v)) }))
		}
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

type lineSeries struct {
	name  string
	color string
	ys    []float64
}

const (
	chartW, chartH         = 520, 240
	padL, padR, padT, padB = 70, 12, 28, 30
	plotW, plotH           = chartW - padL - padR, chartH - padT - padB
)

func countLabel(v float64) string {
	switch {
	case v > 0 && v < 10 && v != math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// anchor keeps the first and last of five axis labels inside the chart.
func anchor(i int) string {
	switch i {
	case 0:
		return "start"
	case 4:
		return "end"
	}
	return "middle"
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// lineChart draws series over a shared x axis as an SVG element.
func lineChart(title, xunit string, xs []float64, series []lineSeries, ylabel func(float64) string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img">`,
		chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<title>%s</title><text x="%d" y="16" style="font-weight:bold">%s</text>`,
		html.EscapeString(title), padL, html.EscapeString(title))
	xmax, ymax := 1.0, 0.0
	for _, x := range xs {
		xmax = max(xmax, x)
	}
	for _, s := range series {
		for _, y := range s.ys {
			ymax = max(ymax, y)
		}
	}
	ymax = niceMax(ymax)
	px := func(x float64) float64 { return padL + x/xmax*plotW }
	py := func(y float64) float64 { return padT + plotH - y/ymax*plotH }
	// axes and grid
	for i := 0; i <= 4; i++ {
		y := ymax * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`, padL, py(y), padL+plotW, py(y))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`, padL-4, py(y)+4, html.EscapeString(ylabel(y)))
	}
	for i := 0; i <= 4; i++ {
		x := xmax * float64(i) / 4
		prec := 0
		if xmax < 10 {
			prec = 1
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="%s">%s%s</text>`, px(x), chartH-10, anchor(i),
			strconv.FormatFloat(x, 'f', prec, 64), xunit)
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`, padL, padT, plotW, plotH)
	for k, s := range series {
		if len(s.ys) > 0 {
			var pts []string
			for i, y := range s.ys {
				if i < len(xs) {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(xs[i]), py(y)))
				}
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`, s.color, strings.Join(pts, " "))
		}
		lx := padL + plotW - 110
		ly := padT + 14 + 14*k
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="3" fill="%s"/><text x="%d" y="%d">%s</text>`,
			lx, ly-4, s.color, lx+14, ly, html.EscapeString(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// histogramChart draws a latency distribution: counts in bins spaced
// evenly on a log scale between the smallest and largest value, with the
// p50 and p99 marked.
func histogramChart(title string, h *Histogram) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img">`,
		chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<title>%s</title><text x="%d" y="16" style="font-weight:bold">%s</text>`,
		html.EscapeString(title), padL, html.EscapeString(title))
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`, padL, padT, plotW, plotH)
	if h == nil || h.Count() == 0 {
		b.WriteString("</svg>\n")
		return b.String()
	}
	const nbins = 60
	lo := math.Log10(float64(max(h.Min(), 1)))
	hi := math.Log10(float64(max(h.Max(), 1)))
	if hi-lo < 0.3 {
		lo, hi = lo-0.15, hi+0.15
	}
	var bins [nbins]uint64
	binOf := func(v float64) int {
		i := int((math.Log10(max(v, 1)) - lo) / (hi - lo) * nbins)
		return min(max(i, 0), nbins-1)
	}
	h.Buckets(func(low, high int64, count uint64) { bins[binOf(float64(low+high)/2)] += count })
	var top uint64
	for _, c := range bins {
		top = max(top, c)
	}
	ymax := niceMax(float64(top))
	bw := float64(plotW) / nbins
	for i, c := range bins {
		if c == 0 {
			continue
		}
		hgt := float64(c) / ymax * plotH
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#1f77b4"/>`,
			padL+float64(i)*bw, padT+plotH-hgt, max(bw-1, 1), hgt)
	}
	xof := func(v float64) float64 { return padL + (math.Log10(max(v, 1))-lo)/(hi-lo)*plotW }
	for i := 0; i <= 4; i++ {
		v := math.Pow(10, lo+(hi-lo)*float64(i)/4)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="%s">%s</text>`, xof(v), chartH-10, anchor(i),
			html.EscapeString(FormatDuration(int64(v))))
	}
	for i := 0; i <= 4; i++ {
		y := ymax * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`, padL-4, padT+plotH-y/ymax*plotH+4,
			html.EscapeString(countLabel(y)))
	}
	for _, m := range []struct {
		name  string
		v     int64
		color string
	}{{"p50", h.Quantile(0.5), "#2ca02c"}, {"p99", h.Quantile(0.99), "#d62728"}} {
		x := xof(float64(m.v))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-dasharray="4 3"/>`,
			x, padT, x, padT+plotH, m.color)
		tx, ta := x+3, "start"
		if x > padL+0.75*plotW { // near the right edge: label on the left of the line
			tx, ta = x-3, "end"
		}
		y := padT + 12
		if m.name == "p99" {
			y += 14 // p50 and p99 can be close: keep their labels apart
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="%s" text-anchor="%s">%s %s</text>`, tx, y, m.color, ta, m.name,
			html.EscapeString(FormatDuration(m.v)))
	}
	b.WriteString("</svg>\n")
	return b.String()
}
