package loadtest

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestCompare: two reports, read back from their JSON, side by side: a
// table per case with each run's figures and the change of the second
// against the first, and a page whose charts draw both runs.
func TestCompare(t *testing.T) {
	var runs []Compared
	for i, label := range []string{"tcp", "ws"} {
		rep := sampleReport(t)
		if i == 1 {
			// The second run is slower: every latency doubled.
			for _, c := range rep.Cases {
				slow := &Histogram{}
				for _, h := range []*Histogram{c.Latency} {
					h.Buckets(func(low, high int64, n uint64) { slow.RecordN(2*(low+high)/2, n) })
				}
				c.Latency, c.AckLatency, c.Connect = slow, slow, slow
				if c.Mode == ModeConn { // only this run measured -wake
					c.Wake, c.WakeBusy = &Histogram{}, &Histogram{}
					c.Wake.Record(300_000)
					c.WakeBusy.Record(20_000)
				}
				c.Finish()
			}
		}
		var b bytes.Buffer
		if err := WriteJSON(&b, rep); err != nil {
			t.Fatal(err)
		}
		back, err := ReadReport(&b)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, Compared{Label: label, Report: back})
	}
	var text bytes.Buffer
	if err := WriteCompareText(&text, runs); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, want := range []string{"ws vs tcp", "conn 1000 connections", "pub 64 B", "pubsub: 10 subs / 10 pubs / 100 msg/s",
		"p99.9", "connect p90", "ack p50", "+100% worse", "broker RSS", "wake p50", "busy max"} {
		if !strings.Contains(out, want) {
			t.Errorf("comparison lacks %q:\n%s", want, out)
		}
	}
	// Without -wake in any run, its rows are left out.
	text.Reset()
	if err := WriteCompareText(&text, runs[:1]); err != nil || strings.Contains(text.String(), "wake") {
		t.Errorf("a run without -wake shows wake rows (%v):\n%s", err, text.String())
	}

	var page bytes.Buffer
	if err := WriteCompareHTML(&page, runs); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(strings.NewReader(page.String()))
	dec.Strict = true
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("comparison page is not well-formed: %v", err)
		}
	}
	p := page.String()
	for _, want := range []string{"End-to-end latency by percentile", "Connect time by percentile", "Publish → acknowledgement by percentile",
		`class="n worse"`, `code class="cmd"`} {
		if !strings.Contains(p, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Each percentile chart draws one line per run, in the run's colour.
	for _, color := range palette[:2] {
		if strings.Count(p, `stroke="`+color+`" stroke-width="1.8"`) < 3 {
			t.Errorf("the runs' lines in %s are missing from the charts", color)
		}
	}
	if _, err := ReadReport(strings.NewReader(`{"tool":"x"}`)); err == nil {
		t.Error("a report without cases was accepted")
	}
}
