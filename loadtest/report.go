package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText prints the human tables, in the shape of the published report,
// followed by errors, notes and assertion results.
func WriteText(w io.Writer, rep *Report) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "xmq loadtest: %s against %s (%s, MQTT %s), %s\n\n", rep.Options.Mode, rep.URL, rep.Transport,
		rep.MQTT, rep.Started.Format("2006-01-02 15:04:05 MST"))
	for _, t := range tables(rep) {
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(t.head, "\t")+"\t")
		for _, r := range t.rows {
			fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
		}
		_ = tw.Flush()
		fmt.Fprintln(ew)
	}
	for _, c := range rep.Cases {
		if len(c.Errors) > 0 {
			fmt.Fprintf(ew, "%s: errors: %s\n", c.Name, errorText(c.Errors))
			for _, s := range c.ErrorSamples {
				fmt.Fprintf(ew, "  e.g. %s\n", s)
			}
		}
		if len(c.Lost) > 0 {
			fmt.Fprintf(ew, "%s: lost during the hold: %s\n", c.Name, failureText(c.Lost))
		}
		if w := c.WorstLoss; w != nil {
			fmt.Fprintf(ew, "%s: %d of %d publishers lost messages; worst: publisher %d lost %s of %s\n", c.Name,
				c.PublishersWithLoss, c.Pubs, w.Publisher, commas(w.Lost), commas(w.Expected))
		}
		if c.Stale > 0 || c.Foreign > 0 || c.Skew > 0 {
			fmt.Fprintf(ew, "%s: ignored %s stale and %s foreign messages; %s with clock skew\n", c.Name,
				commas(c.Stale), commas(c.Foreign), commas(c.Skew))
		}
		if c.Broker != nil && c.Broker.Error != "" {
			fmt.Fprintf(ew, "%s: broker sampling: %s\n", c.Name, c.Broker.Error)
		}
		if m := c.Machine; m != nil && m.OtherPct >= busyWarn {
			fmt.Fprintf(ew, "%s: warning: other work used %s of a core on this machine during the case\n", c.Name, pct(m.OtherPct))
		}
	}
	if len(rep.Cases) > 0 {
		g := rep.Cases[len(rep.Cases)-1].Generator
		fmt.Fprintf(ew, "generator: %s of one core (%.1f CPU s over %.1f s, %d process(es), GOMAXPROCS %d)\n",
			pct(g.CPUPercent), g.CPUSeconds, g.WallSeconds, g.Processes, g.GOMAXPROCS)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(ew, "note: %s\n", n)
	}
	for _, a := range rep.Asserts {
		status := "PASS"
		if !a.Pass {
			status = "FAIL"
		}
		note := ""
		if a.Note != "" {
			note = " (" + a.Note + ")"
		}
		fmt.Fprintf(ew, "assert %s %s [%s]: got %s%s\n", status, a.Assertion, a.Case, a.Shown, note)
	}
	return ew.err
}

// busyWarn is the CPU (percent of one core) other work may use before the
// text report warns that the machine was not quiet.
const busyWarn = 10

// WriteJSON writes the report as one JSON object.
func WriteJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// errWriter remembers the first write error so report code can print freely.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, nil
}

// WriteMarkdown writes a markdown report: environment, command, tables,
// errors, notes and assertions.
func WriteMarkdown(w io.Writer, rep *Report) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "# Load test: %s against %s\n\n", rep.Options.Mode, rep.URL)
	fmt.Fprintf(ew, "Run %s to %s by %s.\n\n", rep.Started.Format("2006-01-02 15:04:05 MST"),
		rep.Finished.Format("15:04:05"), rep.Tool)
	fmt.Fprintln(ew, "## Environment")
	fmt.Fprintln(ew)
	fmt.Fprintln(ew, "| | |")
	fmt.Fprintln(ew, "|---|---|")
	for _, kv := range envRows(rep) {
		fmt.Fprintf(ew, "| %s | %s |\n", mdEscape(kv[0]), mdEscape(kv[1]))
	}
	fmt.Fprintln(ew)
	if len(rep.Command) > 0 {
		fmt.Fprintln(ew, "## Command")
		fmt.Fprintln(ew)
		fmt.Fprintln(ew, "```")
		fmt.Fprintln(ew, shellJoin(rep.Command))
		fmt.Fprintln(ew, "```")
		fmt.Fprintln(ew)
	}
	fmt.Fprintln(ew, "## Results")
	fmt.Fprintln(ew)
	for _, t := range tables(rep) {
		fmt.Fprintln(ew, "| "+strings.Join(t.head, " | ")+" |")
		seps := make([]string, len(t.head))
		for i := range seps {
			seps[i] = "---"
			if t.right[i] {
				seps[i] = "---:"
			}
		}
		fmt.Fprintln(ew, "|"+strings.Join(seps, "|")+"|")
		for _, r := range t.rows {
			cells := make([]string, len(r))
			for i, c := range r {
				cells[i] = mdEscape(c)
			}
			fmt.Fprintln(ew, "| "+strings.Join(cells, " | ")+" |")
		}
		fmt.Fprintln(ew)
	}
	for _, c := range rep.Cases {
		var lines []string
		if len(c.Errors) > 0 {
			lines = append(lines, "errors: "+errorText(c.Errors))
		}
		if len(c.Failures) > 0 {
			lines = append(lines, "connect failures: "+failureText(c.Failures))
		}
		if len(c.Lost) > 0 {
			lines = append(lines, "lost during the hold: "+failureText(c.Lost))
		}
		if c.Mode != ModeConn && c.Mode != ModePub {
			lines = append(lines, fmt.Sprintf("published %s, expected deliveries %s, delivered %s (ratio %.4f), duplicates %s, reordered %s",
				commas(c.Published), commas(c.Expected), commas(c.Unique), c.DeliveredRatio, commas(c.Duplicates), commas(c.Reordered)))
		}
		if c.Mode != ModeConn && c.Mode != ModePub {
			l := fmt.Sprintf("per publisher: %d of %d lost messages, %d had duplicates, %d saw reordering",
				c.PublishersWithLoss, c.Pubs, c.PublishersWithDups, c.PublishersReordered)
			if w := c.WorstLoss; w != nil {
				l += fmt.Sprintf("; worst: publisher %d lost %s of %s", w.Publisher, commas(w.Lost), commas(w.Expected))
			}
			lines = append(lines, l)
		}
		if c.Reconnects > 0 {
			lines = append(lines, fmt.Sprintf("subscriber reconnections (-churn): %s", commas(c.Reconnects)))
		}
		if c.Broker != nil && c.Broker.Samples > 0 {
			lines = append(lines, fmt.Sprintf("broker (%s): CPU %s avg, %s max of one core; RSS %s peak, %s at the end",
				c.Broker.Source, pct(c.Broker.CPUAvg), pct(c.Broker.CPUMax), FormatBytes(c.Broker.RSSMax), FormatBytes(c.Broker.RSSEnd)))
		}
		if m := c.Machine; m != nil {
			lines = append(lines, fmt.Sprintf("load machine: %s of one core busy in all; %s neither generator nor broker (other processes, interrupts, loopback)",
				pct(m.BusyPct), pct(m.OtherPct)))
		}
		g := c.Generator
		lines = append(lines, fmt.Sprintf("generator: %s of one core (%.2f CPU s in %.2f s), peak RSS %s",
			pct(g.CPUPercent), g.CPUSeconds, g.WallSeconds, FormatBytes(g.MaxRSS)))
		fmt.Fprintf(ew, "**%s**\n\n", mdEscape(c.Name))
		for _, l := range lines {
			fmt.Fprintf(ew, "- %s\n", mdEscape(l))
		}
		fmt.Fprintln(ew)
	}
	if len(rep.Notes) > 0 {
		fmt.Fprintln(ew, "## Notes")
		fmt.Fprintln(ew)
		for _, n := range rep.Notes {
			fmt.Fprintf(ew, "- %s\n", mdEscape(n))
		}
		fmt.Fprintln(ew)
	}
	if len(rep.Asserts) > 0 {
		fmt.Fprintln(ew, "## Objectives")
		fmt.Fprintln(ew)
		fmt.Fprintln(ew, "| objective | case | got | result |")
		fmt.Fprintln(ew, "|---|---|---:|---|")
		for _, a := range rep.Asserts {
			res := "pass"
			if !a.Pass {
				res = "**FAIL**"
				if a.Note != "" {
					res += " (" + a.Note + ")"
				}
			}
			fmt.Fprintf(ew, "| `%s` | %s | %s | %s |\n", a.Assertion, mdEscape(a.Case), a.Shown, res)
		}
		fmt.Fprintln(ew)
	}
	return ew.err
}

// envRows is the environment as label/value pairs.
func envRows(rep *Report) [][2]string {
	e := rep.Env
	rows := [][2]string{
		{"broker", rep.URL},
		{"transport", rep.Transport},
		{"MQTT", rep.MQTT},
		{"load machine", e.Hostname},
		{"CPU", fmt.Sprintf("%s, %d cores; generator on %d (GOMAXPROCS %d)", orDash(e.CPUModel), e.Cores, e.Usable, e.GOMAXPROCS)},
		{"memory", FormatBytes(e.MemTotal)},
		{"kernel", fmt.Sprintf("%s %s/%s", orDash(e.Kernel), e.OS, e.Arch)},
		{"Go", e.GoVersion},
		{"ephemeral ports", orDash(e.PortRange)},
		{"open files limit", commas(e.FileLimit)},
	}
	if len(rep.Agents) > 0 {
		rows = append(rows, [2]string{"agents", strings.Join(rep.Agents, ", ")})
		for i, ae := range rep.AgentEnvs {
			rows = append(rows, [2]string{fmt.Sprintf("agent %d", i+1),
				fmt.Sprintf("%s: %s, %d cores, %s", ae.Hostname, orDash(ae.CPUModel), ae.Cores, FormatBytes(ae.MemTotal))})
		}
	}
	return rows
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// mdEscape keeps a cell from breaking a markdown table.
func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// shellJoin quotes args for a shell where needed.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$`\\|&;<>()*?[]#~!{}") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
