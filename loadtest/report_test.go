package loadtest

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// sampleReport is a report with one case of every kind, as Run would
// return it, with values that need escaping in every format.
func sampleReport(t *testing.T) *Report {
	t.Helper()
	lat := &Histogram{}
	for i := range 1000 {
		lat.Record(int64(50_000 + i*100))
	}
	conn := &CaseResult{Name: "1000 connections", Mode: ModeConn,
		ConnCounts: ConnCounts{Target: 1000, Established: 990, Alive: 990,
			Failures: map[string]int{FailRefused: 8, "CONNACK bad user name or password": 2}, RampNs: int64(time.Second)},
		Connect: lat, Series: []Point{{T: 1, Connected: 500}, {T: 2, Connected: 990, Errors: 10}}}
	pub := &CaseResult{Name: "64 B", Mode: ModePub, Pubs: 10, QoS: 1, Payload: 64,
		Traffic:    Traffic{Published: 1_850_120, Acked: 1_850_120, SendNs: int64(10 * time.Second), PubNs: int64(10 * time.Second)},
		AckLatency: lat,
		Broker:     &BrokerStats{Source: "/proc/1", Samples: 11, CPUAvg: 95, CPUMax: 100, RSSMax: 24 << 20, RSSEnd: 20 << 20}}
	flow := &CaseResult{Name: "64 B", Mode: ModePubSub, Pubs: 10, Subs: 10, Rate: 100, Payload: 64,
		Traffic: Traffic{Published: 9870, Expected: 98700, Unique: 98700, Received: 98700,
			SendNs: int64(10 * time.Second), DeliverNs: int64(10 * time.Second)},
		Latency: lat, Errors: map[string]uint64{"disconnected: <reset> & \"odd\"": 1},
		ErrorSamples: []string{"a | b <c>"},
		Series:       []Point{{T: 1, Published: 987, Delivered: 9870, Lat: sparseOf(lat)}, {T: 2, Published: 987, Delivered: 9870}}}
	for _, c := range []*CaseResult{conn, pub, flow} {
		c.Generator = GenStats{CPUSeconds: 1.5, WallSeconds: 10, Processes: 1, GOMAXPROCS: 2}
		c.Finish()
	}
	rep := &Report{Tool: "xmq loadtest", Started: time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC),
		Finished: time.Date(2026, 7, 1, 12, 1, 0, 0, time.UTC), Command: []string{"loadtest", "-assert", "p99<5ms"},
		Env: CollectEnv(), URL: "mqtt://127.0.0.1:1883", Transport: "tcp", MQTT: "3.1.1", Options: DefaultOptions(),
		Cases: []*CaseResult{conn, pub, flow}, Notes: []string{"QoS 0 & <drops>"}}
	rep.Asserts = Evaluate(rep, []Assertion{{Raw: "p99<5ms", Metric: "p99", Op: "<", Value: 5e6}})
	return rep
}

func sparseOf(h *Histogram) *SparseHistogram { s := h.Sparse(); return &s }

func TestWriteJSON(t *testing.T) {
	rep := sampleReport(t)
	var b bytes.Buffer
	if err := WriteJSON(&b, rep); err != nil {
		t.Fatal(err)
	}
	var back Report
	dec := json.NewDecoder(&b)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&back); err != nil {
		t.Fatalf("report JSON does not decode: %v", err)
	}
	if dec.More() {
		t.Error("more than one JSON value")
	}
	if len(back.Cases) != 3 || back.Cases[2].Unique != 98700 || back.Cases[2].Latency.Count() != 1000 {
		t.Errorf("round trip lost figures: %+v", back.Cases)
	}
	if back.Cases[2].LatencySummary != rep.Cases[2].LatencySummary {
		t.Errorf("latency summary %+v, want %+v", back.Cases[2].LatencySummary, rep.Cases[2].LatencySummary)
	}
	if back.Env.GoVersion == "" || back.Env.Cores == 0 {
		t.Errorf("environment missing: %+v", back.Env)
	}
	if back.Cases[2].Series[0].P50 == 0 || back.Cases[2].Series[0].Lat != nil {
		t.Errorf("series point = %+v, want p50 set and the histogram dropped", back.Cases[2].Series[0])
	}
}

func TestWriteMarkdown(t *testing.T) {
	rep := sampleReport(t)
	var b bytes.Buffer
	if err := WriteMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{"## Environment", "| CPU |", "| kernel |", "## Command", "loadtest -assert 'p99<5ms'",
		"| target | established | failed |", "| publishers | qos | payload | msgs/s | MB/s |",
		"| condition | published/s | delivered/s | avg | p50 | p90 | p99 | p99.9 |", "## Objectives", "`p99<5ms`", "1,850,120"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// Every table row has as many cells as its header.
	var cols int
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "|") {
			cols = 0
			continue
		}
		n := strings.Count(strings.ReplaceAll(line, `\|`, ""), "|") - 1
		if cols == 0 {
			cols = n
		} else if n != cols {
			t.Errorf("row has %d cells, header %d: %s", n, cols, line)
		}
	}
}

func TestWriteHTMLWellFormed(t *testing.T) {
	rep := sampleReport(t)
	var b bytes.Buffer
	if err := WriteHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	dec := xml.NewDecoder(strings.NewReader(page))
	dec.Strict = true
	var stack []string
	svgs := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("HTML is not well-formed: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			stack = append(stack, e.Name.Local)
			if e.Name.Local == "svg" {
				svgs++
			}
			for _, a := range e.Attr {
				if (a.Name.Local == "src" || a.Name.Local == "href") && strings.Contains(a.Value, "//") {
					t.Errorf("page loads %s from the network", a.Value)
				}
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) != 0 {
		t.Errorf("unclosed elements: %v", stack)
	}
	if svgs < 5 {
		t.Errorf("%d SVG charts, want connections, latency histograms and throughput", svgs)
	}
	for _, want := range []string{"<polyline", "Connect time", "End-to-end latency", "Throughput", "Broker CPU",
		"&lt;reset&gt; &amp; &#34;odd&#34;", "p99&lt;5ms"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "http://") && !strings.Contains(page, "http://www.w3.org/2000/svg") {
		t.Error("page has scripts or external references")
	}
}

func TestWriteText(t *testing.T) {
	rep := sampleReport(t)
	var b bytes.Buffer
	if err := WriteText(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"target", "established", "connect p50", "refused 8", "publishers", "msgs/s", "MB/s",
		"pubsub: 10 subs / 10 pubs / 100 msg/s, QoS 0, 64 B", "published/s", "delivered/s", "generator:",
		"assert PASS p99<5ms", "note: QoS 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
}

func TestFormatting(t *testing.T) {
	for _, tt := range []struct {
		ns   int64
		want string
	}{{0, "0"}, {850, "850ns"}, {73_000, "73.0µs"}, {555_400, "555µs"}, {1_060_000, "1.06ms"}, {1_900_000_000, "1.90s"},
		{123 * int64(time.Second), "2m03s"}} {
		if got := FormatDuration(tt.ns); got != tt.want {
			t.Errorf("FormatDuration(%d) = %q, want %q", tt.ns, got, tt.want)
		}
	}
	for _, tt := range []struct {
		n    uint64
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {1353431, "1,353,431"}} {
		if got := commas(tt.n); got != tt.want {
			t.Errorf("commas(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
	if got := FormatBytes(242 << 20); got != "242 MiB" {
		t.Errorf("FormatBytes = %q", got)
	}
}
