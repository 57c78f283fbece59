package loadtest

import (
	"bytes"
	"encoding/xml"
	"math"
	"regexp"
	"strings"
	"testing"
)

// roundStep reports whether step is 1, 2 or 5 times a power of ten.
func roundStep(step float64) bool {
	m := step / math.Pow(10, math.Floor(math.Log10(step)+1e-9))
	for _, r := range []float64{1, 2, 5} {
		if math.Abs(m-r) < 1e-6 {
			return true
		}
	}
	return false
}

// TestRoundTicks: every axis starts at 0, ends on the first round value
// at or above the largest one, and steps by 1, 2 or 5 times a power of
// ten, in the unit its labels use.
func TestRoundTicks(t *testing.T) {
	for _, max := range []float64{0, 0.3, 1, 3, 7.5, 9.99, 10, 11, 99, 123, 987, 4000, 4001, 98765, 1.23e6, 3.3e9} {
		ticks := linearTicks(max, 4)
		step := ticks[1] - ticks[0]
		if ticks[0] != 0 || ticks[len(ticks)-1] < max || !roundStep(step) || len(ticks) > 6 {
			t.Errorf("linearTicks(%g) = %v", max, ticks)
		}
		for i, v := range ticks {
			if math.Abs(v-float64(i)*step) > step*1e-9 {
				t.Errorf("linearTicks(%g): tick %d is %g, not a multiple of %g", max, i, v, step)
			}
		}
	}
	// Bytes step in their binary unit: 0, 10 MiB, 20 MiB, 30 MiB.
	var labels []string
	for _, v := range bytesAxis.ticks(27.2 * (1 << 20)) {
		labels = append(labels, bytesAxis.label(v))
	}
	if got := strings.Join(labels, " "); got != "0 10 MiB 20 MiB 30 MiB" {
		t.Errorf("byte ticks %q", got)
	}
	labels = labels[:0]
	for _, v := range durationAxis.ticks(4.4e6) {
		labels = append(labels, durationAxis.label(v))
	}
	if got := strings.Join(labels, " "); got != "0 1ms 2ms 3ms 4ms 5ms" {
		t.Errorf("duration ticks %q", got)
	}
	if got := logTicks(30e3, 2e6); len(got) != 6 || got[0] != 50e3 || got[len(got)-1] != 2e6 {
		t.Errorf("logTicks(30µs, 2ms) = %v, want 50µs, 100µs, 200µs, 500µs, 1ms, 2ms", got)
	}
	for _, v := range logTicks(1, 1e12) {
		if m := v / math.Pow(10, math.Floor(math.Log10(v)+1e-9)); math.Abs(m-1) > 1e-9 {
			t.Errorf("logTicks over 12 decades keeps %g: want only powers of ten", v)
		}
	}
}

// TestHTMLReportOperatorItems: the command wraps, p90 and p99.9 are in the
// tables and on the histograms, every case has a percentile-distribution
// chart, and the axis labels of every chart are round numbers.
func TestHTMLReportOperatorItems(t *testing.T) {
	rep := sampleReport(t)
	rep.Command = append(rep.Command, strings.Repeat("-a-very-long-argument ", 20))
	var b bytes.Buffer
	if err := WriteHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"white-space:pre-wrap", `<pre class="cmd">`, "<th>p90</th>", "<th>p99.9</th>",
		"<th>ack p99.9</th>", ">p90 ", ">p99.9 ", "Latency by percentile", "Connect time by percentile", ">99.9%<"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Axis labels: the <text> elements holding only a number and a unit.
	label := regexp.MustCompile(`^(\d+(\.\d+)?)(ns|µs|ms|s|k|M|%| MiB| KiB)?$`)
	nines := regexp.MustCompile(`^(90|99(\.9+)?)%$`) // the percentile axis: round in nines
	dec := xml.NewDecoder(strings.NewReader(page))
	inText := false
	n := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch e := tok.(type) {
		case xml.StartElement:
			inText = e.Name.Local == "text"
		case xml.EndElement:
			inText = false
		case xml.CharData:
			s := string(e)
			m := label.FindStringSubmatch(s)
			if !inText || m == nil || nines.MatchString(s) {
				continue
			}
			n++
			digits := strings.TrimLeft(strings.ReplaceAll(m[1], ".", ""), "0")
			if len(strings.TrimRight(digits, "0")) > 2 {
				t.Errorf("axis label %q is not a round number", s)
			}
		}
	}
	if n < 30 {
		t.Errorf("found %d axis labels, want the ticks of every chart", n)
	}
}

// TestTimeAxisEndsWithTheRun: the time axis of a chart ends at its last
// sample, not at the next round tick past it.
func TestTimeAxisEndsWithTheRun(t *testing.T) {
	xs := []float64{0, 5, 10, 15, 20.2}
	svg := lineChart("t", xs, []lineSeries{{name: "n", color: "#000", ys: []float64{1, 2, 3, 4, 5}}}, countAxis)
	if strings.Contains(svg, ">25s<") {
		t.Errorf("a 20.2 s run drawn to 25 s:\n%s", svg)
	}
	if !strings.Contains(svg, ">20s<") {
		t.Errorf("no 20 s tick:\n%s", svg)
	}
}
