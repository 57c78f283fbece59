package loadtest

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// This file draws the SVG charts of the HTML reports: axes with round
// ticks (1, 2 or 5 times a power of ten, in the unit of the axis), line
// charts over time, latency histograms and HdrHistogram-style percentile
// distributions.

// niceStep is the smallest round step, 1, 2 or 5 times a power of ten,
// that splits span into at most n+1 parts.
func niceStep(span float64, n int) float64 {
	if span <= 0 || n < 1 {
		return 1
	}
	raw := span / float64(n+1)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// linearTicks are 0, step, 2·step … up to the first tick at or above max:
// the axis ends on a round value.
func linearTicks(max float64, n int) []float64 {
	if max <= 0 || math.IsNaN(max) || math.IsInf(max, 0) {
		max = 1
	}
	step := niceStep(max, n)
	ticks := []float64{0}
	for v := step; ; v += step {
		v = math.Round(v/step) * step // no drift from repeated addition
		ticks = append(ticks, v)
		if v >= max*(1-1e-9) || len(ticks) > 2*n+2 {
			return ticks
		}
	}
}

// axis says how an axis picks its ticks and prints them.
type axis struct {
	ticks func(max float64) []float64
	label func(v float64) string
}

// countAxis counts things: 0, 2k, 4k …
var countAxis = axis{ticks: func(max float64) []float64 { return linearTicks(max, 4) }, label: countLabel}

// secondsAxis is time since the start of a case.
var secondsAxis = axis{ticks: func(max float64) []float64 { return linearTicks(max, 5) },
	label: func(v float64) string { return trimZeros(strconv.FormatFloat(v, 'f', 2, 64)) + "s" }}

// durationAxis is a latency in nanoseconds, with round steps in the unit
// the values are shown in (200µs, not 190.7µs).
var durationAxis = axis{ticks: func(max float64) []float64 { return linearTicks(max, 4) }, label: tickDuration}

// percentAxis is a CPU share in percent of one core.
var percentAxis = axis{ticks: func(max float64) []float64 { return linearTicks(max, 4) },
	label: func(v float64) string { return trimZeros(strconv.FormatFloat(v, 'f', 1, 64)) + "%" }}

// bytesAxis is a size, with round steps in the binary unit that suits it.
var bytesAxis = axis{
	ticks: func(max float64) []float64 {
		unit := byteUnit(max)
		t := linearTicks(max/unit, 4)
		for i := range t {
			t[i] *= unit
		}
		return t
	},
	label: func(v float64) string {
		if v == 0 {
			return "0"
		}
		unit := byteUnit(v)
		names := map[float64]string{1: "B", 1 << 10: "KiB", 1 << 20: "MiB", 1 << 30: "GiB", 1 << 40: "TiB"}
		return trimZeros(strconv.FormatFloat(v/unit, 'f', 2, 64)) + " " + names[unit]
	},
}

// byteUnit is the binary unit in which v reads as 1 to 1023.
func byteUnit(v float64) float64 {
	unit := 1.0
	for v >= 1024*unit && unit < 1<<40 {
		unit *= 1024
	}
	return unit
}

// trimZeros drops the zeros after a decimal point: "2.50" → "2.5", "10.0" → "10".
func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// tickDuration prints a round latency without FormatDuration's padding
// zeros: 200µs, 1.5ms, 2s.
func tickDuration(v float64) string {
	ns := int64(math.Round(v))
	switch d := float64(ns); {
	case ns <= 0:
		return "0"
	case ns < 1000:
		return fmt.Sprintf("%dns", ns)
	case d < 1e6:
		return trimZeros(strconv.FormatFloat(d/1e3, 'f', 2, 64)) + "µs"
	case d < 1e9:
		return trimZeros(strconv.FormatFloat(d/1e6, 'f', 2, 64)) + "ms"
	}
	return trimZeros(strconv.FormatFloat(float64(ns)/1e9, 'f', 2, 64)) + "s"
}

// logTicks are the round values (1, 2 and 5 times powers of ten, or only
// the powers when there are many) between lo and hi, both > 0.
func logTicks(lo, hi float64) []float64 {
	var out []float64
	for _, ms := range [][]float64{{1, 2, 5}, {1}} {
		out = out[:0]
		for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
			for _, m := range ms {
				if v := m * math.Pow(10, e); v >= lo*(1-1e-9) && v <= hi*(1+1e-9) {
					out = append(out, v)
				}
			}
		}
		if len(out) <= 8 {
			break
		}
	}
	return out
}

type lineSeries struct {
	name  string
	color string
	xs    []float64 // nil: the chart's shared x values
	ys    []float64
}

// palette colours the runs of a comparison and the series of a chart.
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

const (
	chartW, chartH         = 520, 240
	padL, padR, padT, padB = 70, 12, 28, 30
	plotW, plotH           = chartW - padL - padR, chartH - padT - padB
)

func countLabel(v float64) string {
	switch {
	case v > 0 && v < 10 && v != math.Trunc(v):
		return trimZeros(strconv.FormatFloat(v, 'f', 2, 64))
	case v >= 1e6:
		return trimZeros(strconv.FormatFloat(v/1e6, 'f', 2, 64)) + "M"
	case v >= 1e3:
		return trimZeros(strconv.FormatFloat(v/1e3, 'f', 2, 64)) + "k"
	}
	return fmt.Sprintf("%.0f", v)
}

// anchor keeps the first and last axis labels inside the chart.
func anchor(i, n int) string {
	switch i {
	case 0:
		return "start"
	case n - 1:
		return "end"
	}
	return "middle"
}

// svgOpen starts a chart with its title.
func svgOpen(b *strings.Builder, title string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img">`,
		chartW, chartH, chartW, chartH)
	fmt.Fprintf(b, `<title>%s</title><text x="%d" y="16" style="font-weight:bold">%s</text>`,
		html.EscapeString(title), padL, html.EscapeString(title))
}

// yGrid draws the horizontal grid lines and labels of ticks (0 … top).
func yGrid(b *strings.Builder, ticks []float64, label func(float64) string) {
	top := ticks[len(ticks)-1]
	for _, v := range ticks {
		y := padT + plotH - v/top*plotH
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`, padL, y, padL+plotW, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`, padL-4, y+4, html.EscapeString(label(v)))
	}
}

// legend lists the series' names in the top right corner.
func legend(b *strings.Builder, names, colors []string) {
	w := 0
	for _, n := range names {
		w = max(w, len(n))
	}
	lx := padL + plotW - 20 - 6*w
	for k, n := range names {
		ly := padT + 14 + 14*k
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="10" height="3" fill="%s"/><text x="%d" y="%d">%s</text>`,
			lx, ly-4, colors[k], lx+14, ly, html.EscapeString(n))
	}
}

// lineChart draws series over x (seconds, by default shared) with round
// ticks on both axes.
func lineChart(title string, xs []float64, series []lineSeries, y axis) string {
	var b strings.Builder
	svgOpen(&b, title)
	xmax, ymax := 0.0, 0.0
	for _, s := range series {
		sx := s.xs
		if sx == nil {
			sx = xs
		}
		for _, x := range sx {
			xmax = max(xmax, x)
		}
		for _, v := range s.ys {
			ymax = max(ymax, v)
		}
	}
	xt, yt := secondsAxis.ticks(xmax), y.ticks(ymax)
	// Time ends where the samples do: a 20.1 s run is not drawn to 25 s.
	if len(xt) > 2 && xt[len(xt)-1] > xmax {
		xt = xt[:len(xt)-1]
	}
	xtop, ytop := max(xmax, xt[len(xt)-1]), yt[len(yt)-1]
	px := func(x float64) float64 { return padL + x/xtop*plotW }
	py := func(v float64) float64 { return padT + plotH - v/ytop*plotH }
	yGrid(&b, yt, y.label)
	for i, x := range xt {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="%s">%s</text>`, px(x), chartH-10, anchor(i, len(xt)),
			html.EscapeString(secondsAxis.label(x)))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`, padL, padT, plotW, plotH)
	var names, colors []string
	for _, s := range series {
		sx := s.xs
		if sx == nil {
			sx = xs
		}
		var pts []string
		for i, v := range s.ys {
			if i < len(sx) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(sx[i]), py(v)))
			}
		}
		if len(pts) > 0 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`, s.color, strings.Join(pts, " "))
		}
		names, colors = append(names, s.name), append(colors, s.color)
	}
	legend(&b, names, colors)
	b.WriteString("</svg>\n")
	return b.String()
}

// histogramChart draws a latency distribution: counts in bins spaced
// evenly on a log scale between the smallest and largest value, with
// p50, p90, p99 and p99.9 marked.
func histogramChart(title string, h *Histogram) string {
	var b strings.Builder
	svgOpen(&b, title)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`, padL, padT, plotW, plotH)
	if h == nil || h.Count() == 0 {
		b.WriteString("</svg>\n")
		return b.String()
	}
	const nbins = 60
	// The axis runs from a round value below the smallest to one above the
	// largest, so that its ticks fall inside it.
	lo := math.Pow(10, math.Floor(math.Log10(float64(max(h.Min(), 1)))))
	hi := math.Pow(10, math.Ceil(math.Log10(float64(max(h.Max(), 1))+1e-9)))
	llo, lhi := math.Log10(lo), math.Log10(hi)
	var bins [nbins]uint64
	binOf := func(v float64) int {
		i := int((math.Log10(max(v, 1)) - llo) / (lhi - llo) * nbins)
		return min(max(i, 0), nbins-1)
	}
	h.Buckets(func(low, high int64, count uint64) { bins[binOf(float64(low+high)/2)] += count })
	var top uint64
	for _, c := range bins {
		top = max(top, c)
	}
	yt := countAxis.ticks(float64(top))
	ytop := yt[len(yt)-1]
	yGrid(&b, yt, countLabel)
	bw := float64(plotW) / nbins
	for i, c := range bins {
		if c == 0 {
			continue
		}
		hgt := float64(c) / ytop * plotH
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#1f77b4"/>`,
			padL+float64(i)*bw, padT+plotH-hgt, max(bw-1, 1), hgt)
	}
	xof := func(v float64) float64 { return padL + (math.Log10(max(v, 1))-llo)/(lhi-llo)*plotW }
	xt := logTicks(lo, hi)
	for i, v := range xt {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="%s">%s</text>`, xof(v), chartH-10, anchor(i, len(xt)),
			html.EscapeString(tickDuration(v)))
	}
	for k, m := range []struct {
		name  string
		q     float64
		color string
	}{{"p50", 0.5, "#2ca02c"}, {"p90", 0.9, "#9467bd"}, {"p99", 0.99, "#d62728"}, {"p99.9", 0.999, "#8c564b"}} {
		v := h.Quantile(m.q)
		x := xof(float64(v))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-dasharray="4 3"/>`,
			x, padT, x, padT+plotH, m.color)
		tx, ta := x+3, "start"
		if x > padL+0.75*plotW { // near the right edge: label on the left of the line
			tx, ta = x-3, "end"
		}
		// The markers can be close together: each label has its own line.
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="%s" text-anchor="%s">%s %s</text>`, tx, padT+12+13*k, m.color, ta, m.name,
			html.EscapeString(FormatDuration(v)))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// pctSeries is one latency distribution of a percentile chart.
type pctSeries struct {
	name  string
	color string
	h     *Histogram
}

// percentileChart draws latency against percentile, HdrHistogram's
// percentile distribution: the x axis is 1/(1-p) on a log scale, so 90%,
// 99%, 99.9% … are equally spaced and the tail shows as clearly as the
// median; the y axis is linear, in round steps.
func percentileChart(title string, series []pctSeries) string {
	var b strings.Builder
	svgOpen(&b, title)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`, padL, padT, plotW, plotH)
	// As far to the right as the largest sample supports: with n values,
	// percentile 1-1/n is the last that one of them stands for.
	var n uint64
	var ymax float64
	for _, s := range series {
		if s.h != nil {
			n = max(n, s.h.Count())
			ymax = max(ymax, float64(s.h.Max()))
		}
	}
	if n == 0 {
		b.WriteString("</svg>\n")
		return b.String()
	}
	nines := min(max(math.Ceil(math.Log10(float64(n))), 2), 6) // 99% … 99.9999%
	yt := durationAxis.ticks(ymax)
	ytop := yt[len(yt)-1]
	yGrid(&b, yt, tickDuration)
	px := func(x float64) float64 { return padL + x/nines*plotW }
	py := func(v float64) float64 { return padT + plotH - v/ytop*plotH }
	for k := 0; k <= int(nines); k++ {
		label := "0%"
		if k > 0 {
			label = strconv.FormatFloat(100*(1-math.Pow(10, -float64(k))), 'f', max(k-2, 0), 64) + "%"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`, px(float64(k)), padT, px(float64(k)), padT+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="%s">%s</text>`, px(float64(k)), chartH-10,
			anchor(k, int(nines)+1), label)
	}
	var names, colors []string
	for _, s := range series {
		if s.h == nil || s.h.Count() == 0 {
			continue
		}
		const steps = 150
		var pts []string
		last := math.Log10(float64(s.h.Count())) // this series' own last supported percentile
		for i := 0; i <= steps; i++ {
			x := nines * float64(i) / steps
			if x > last {
				break
			}
			v := s.h.Quantile(1 - math.Pow(10, -x))
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(x), py(float64(v))))
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(min(last, nines)), py(float64(s.h.Max()))))
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`, s.color, strings.Join(pts, " "))
		names, colors = append(names, s.name), append(colors, s.color)
	}
	legend(&b, names, colors)
	b.WriteString("</svg>\n")
	return b.String()
}
