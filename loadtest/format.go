package loadtest

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// FormatDuration prints nanoseconds with three significant digits in the
// unit that suits them: 850ns, 73.4µs, 1.06ms, 1.90s, 2m03s.
func FormatDuration(ns int64) string {
	if ns <= 0 {
		return "0"
	}
	sig := func(v float64, unit string) string {
		switch {
		case v >= 100:
			return strconv.FormatFloat(v, 'f', 0, 64) + unit
		case v >= 10:
			return strconv.FormatFloat(v, 'f', 1, 64) + unit
		}
		return strconv.FormatFloat(v, 'f', 2, 64) + unit
	}
	switch d := float64(ns); {
	case ns < 1000:
		return fmt.Sprintf("%dns", ns)
	case d < 999.5e3:
		return sig(d/1e3, "µs")
	case d < 999.5e6:
		return sig(d/1e6, "ms")
	case d < 60e9:
		return sig(d/1e9, "s")
	}
	t := time.Duration(ns).Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(t.Minutes()), int(t.Seconds())%60)
}

// FormatBytes prints a size in binary units: 512 B, 4.0 KiB, 242 MiB.
func FormatBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), 0
	names := []string{"KiB", "MiB", "GiB", "TiB"}
	for v /= unit; v >= unit && i < len(names)-1; i++ {
		v /= unit
	}
	if v >= 100 {
		return fmt.Sprintf("%.0f %s", v, names[i])
	}
	return fmt.Sprintf("%.1f %s", v, names[i])
}

// commas prints n with thousands separators: 1,353,431.
func commas(n uint64) string {
	s := strconv.FormatUint(n, 10)
	if len(s) <= 3 {
		return s
	}
	var b strings.Builder
	pre := len(s) % 3
	if pre > 0 {
		b.WriteString(s[:pre])
	}
	for i := pre; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// rate prints a per-second figure: commas above 100, one decimal below.
func rate(v float64) string {
	if math.IsNaN(v) || v <= 0 {
		return "0"
	}
	if v >= 100 {
		return commas(uint64(math.Round(v)))
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func pct(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) + "%" }

// condition describes a traffic case the way the published report does:
// "10 subs / 10 pubs / 100 msg/s, QoS 0, 64 B".
func condition(r *CaseResult) string {
	var parts []string
	if r.Subs > 0 {
		parts = append(parts, fmt.Sprintf("%s subs", commas(uint64(r.Subs))))
	}
	parts = append(parts, fmt.Sprintf("%s pubs", commas(uint64(r.Pubs))))
	if r.Rate > 0 {
		parts = append(parts, strconv.FormatFloat(r.Rate, 'g', 4, 64)+" msg/s")
	} else {
		parts = append(parts, "unlimited")
	}
	return strings.Join(parts, " / ") + fmt.Sprintf(", QoS %d, %d B", r.QoS, r.Payload)
}

// failureText lists failure reasons by count: "refused 120, timeout 1".
func failureText(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	type kv struct {
		k string
		v int
	}
	var s []kv
	for k, v := range m {
		s = append(s, kv{k, v})
	}
	sort.Slice(s, func(i, j int) bool { return s[i].v > s[j].v || s[i].v == s[j].v && s[i].k < s[j].k })
	var parts []string
	for _, e := range s {
		parts = append(parts, fmt.Sprintf("%s %s", e.k, commas(uint64(e.v))))
	}
	return strings.Join(parts, ", ")
}

func errorText(m map[string]uint64) string {
	c := make(map[string]int, len(m))
	for k, v := range m {
		c[k] = int(v)
	}
	return failureText(c)
}

// brokerText is "CPU 95% avg / 100% max, RSS 24.1 MiB" or "-".
func brokerCPU(b *BrokerStats) string {
	if b == nil || b.Samples < 2 {
		return "-"
	}
	return pct(b.CPUAvg)
}

func brokerRSS(b *BrokerStats) string {
	if b == nil || b.Samples < 1 || b.RSSMax == 0 {
		return "-"
	}
	return FormatBytes(b.RSSMax)
}

// table is a report table: a header and rows of cells, printed as text
// (aligned), markdown or HTML.
type table struct {
	head []string
	rows [][]string
	// right marks numeric columns, right-aligned.
	right []bool
}

// tables builds the human tables of a report, grouped by mode.
func tables(rep *Report) []table {
	var conn, pub, flow table
	conn.head = []string{"target", "established", "failed", "alive", "connect p50", "p90", "p99", "p99.9", "max", "ramp", "conn/s",
		"failures"}
	conn.right = []bool{true, true, true, true, true, true, true, true, true, true, true, false}
	pub.head = []string{"publishers", "qos", "payload", "msgs/s", "MB/s", "published", "acked", "ack p50", "ack p90", "ack p99",
		"ack p99.9", "gen CPU", "broker CPU", "broker RSS"}
	pub.right = []bool{true, true, true, true, true, true, true, true, true, true, true, true, true, true}
	flow.head = []string{"condition", "published/s", "delivered/s", "avg", "p50", "p90", "p99", "p99.9", "max", "lost", "dup",
		"reordered", "gen CPU", "broker CPU", "broker RSS"}
	flow.right = []bool{false, true, true, true, true, true, true, true, true, true, true, true, true, true, true}
	// -wake adds columns: waking a parked connection, and a busy one.
	wake := false
	for _, r := range rep.Cases {
		wake = wake || r.WakeSummary != nil
	}
	if wake { // before the last column, the failures' text
		n := len(conn.head) - 1
		conn.head = append(conn.head[:n:n], "wake p50", "wake p99", "wake max", "busy p50", conn.head[n])
		conn.right = append(conn.right[:n:n], true, true, true, true, conn.right[n])
	}
	for _, r := range rep.Cases {
		switch r.Mode {
		case ModeConn:
			cps := "-"
			if r.RampNs > 0 {
				cps = rate(float64(r.Established) / (float64(r.RampNs) / 1e9))
			}
			c := r.ConnectSummary
			row := []string{commas(uint64(r.Target)), commas(uint64(r.Established)),
				commas(uint64(r.Failed)), commas(uint64(r.Alive)), FormatDuration(c.P50), FormatDuration(c.P90),
				FormatDuration(c.P99), FormatDuration(c.P999), FormatDuration(c.Max), FormatDuration(r.RampNs), cps}
			if wake {
				if s, b := r.WakeSummary, r.WakeBusySummary; s != nil && b != nil && s.Count > 0 {
					row = append(row, FormatDuration(s.P50), FormatDuration(s.P99), FormatDuration(s.Max), FormatDuration(b.P50))
				} else {
					row = append(row, "-", "-", "-", "-")
				}
			}
			conn.rows = append(conn.rows, append(row, failureText(r.Failures)))
		case ModePub:
			acked, p50, p90, p99, p999 := "-", "-", "-", "-", "-"
			if a := r.AckSummary; r.QoS > 0 {
				acked, p50, p90, p99, p999 = commas(r.Acked), FormatDuration(a.P50), FormatDuration(a.P90), FormatDuration(a.P99),
					FormatDuration(a.P999)
			}
			pub.rows = append(pub.rows, []string{commas(uint64(r.Pubs)), strconv.Itoa(r.QoS), fmt.Sprintf("%d B", r.Payload),
				rate(r.PublishedPerSec), strconv.FormatFloat(r.MBPerSec, 'f', 1, 64), commas(r.Published), acked, p50, p90, p99,
				p999, pct(r.Generator.CPUPercent), brokerCPU(r.Broker), brokerRSS(r.Broker)})
		default:
			l := r.LatencySummary
			flow.rows = append(flow.rows, []string{string(r.Mode) + ": " + condition(r), rate(r.PublishedPerSec),
				rate(r.DeliveredPerSec), FormatDuration(int64(l.Mean)), FormatDuration(l.P50), FormatDuration(l.P90),
				FormatDuration(l.P99), FormatDuration(l.P999), FormatDuration(l.Max), commas(r.LostMessages), commas(r.Duplicates), commas(r.Reordered),
				pct(r.Generator.CPUPercent), brokerCPU(r.Broker), brokerRSS(r.Broker)})
		}
	}
	var out []table
	for _, t := range []table{conn, pub, flow} {
		if len(t.rows) > 0 {
			out = append(out, t)
		}
	}
	return out
}
