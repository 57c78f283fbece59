package loadtest

import (
	"errors"
	"testing"
	"time"
)

func TestParseAssertions(t *testing.T) {
	tests := []struct {
		in   string
		want []Assertion
	}{
		{"p99<5ms,loss=0,delivered>=0.99", []Assertion{
			{Raw: "p99<5ms", Metric: "p99", Op: "<", Value: float64(5 * time.Millisecond)},
			{Raw: "loss=0", Metric: "loss", Op: "=", Value: 0},
			{Raw: "delivered>=0.99", Metric: "delivered", Op: ">=", Value: 0.99},
		}},
		{" p50 <= 250us , avg<1.5ms ", []Assertion{
			{Raw: "p50 <= 250us", Metric: "p50", Op: "<=", Value: float64(250 * time.Microsecond)},
			{Raw: "avg<1.5ms", Metric: "avg", Op: "<", Value: float64(1500 * time.Microsecond)},
		}},
		{"p999<2µs", []Assertion{{Raw: "p999<2µs", Metric: "p999", Op: "<", Value: 2000}}},
		{"delivered>=99.5%", []Assertion{{Raw: "delivered>=99.5%", Metric: "delivered", Op: ">=", Value: 0.995}}},
		{"rate>10k,errors==0,dups!=3", []Assertion{
			{Raw: "rate>10k", Metric: "rate", Op: ">", Value: 10000},
			{Raw: "errors==0", Metric: "errors", Op: "=", Value: 0},
			{Raw: "dups!=3", Metric: "dups", Op: "!=", Value: 3},
		}},
		{"broker_rss<512MB,broker_cpu<150%,gen_cpu<=90", []Assertion{
			{Raw: "broker_rss<512MB", Metric: "broker_rss", Op: "<", Value: 512e6},
			{Raw: "broker_cpu<150%", Metric: "broker_cpu", Op: "<", Value: 150},
			{Raw: "gen_cpu<=90", Metric: "gen_cpu", Op: "<=", Value: 90},
		}},
		{"established>=1,max<0", []Assertion{
			{Raw: "established>=1", Metric: "established", Op: ">=", Value: 1},
			{Raw: "max<0", Metric: "max", Op: "<", Value: 0},
		}},
		{"", nil},
	}
	for _, tt := range tests {
		got, err := ParseAssertions(tt.in)
		if err != nil {
			t.Errorf("ParseAssertions(%q): %v", tt.in, err)
			continue
		}
		if len(got) != len(tt.want) {
			t.Errorf("ParseAssertions(%q) = %+v, want %+v", tt.in, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("ParseAssertions(%q)[%d] = %+v, want %+v", tt.in, i, got[i], tt.want[i])
			}
		}
	}
}

func TestParseAssertionsErrors(t *testing.T) {
	for _, in := range []string{"p99", "p99<", "<5ms", "latency<5ms", "p99<5", "p99<fast", "delivered>=most", "loss=some",
		"broker_rss<lots", "p99~5ms"} {
		if _, err := ParseAssertions(in); !errors.Is(err, ErrAssertSyntax) {
			t.Errorf("ParseAssertions(%q) = %v, want ErrAssertSyntax", in, err)
		}
	}
}

func TestEvaluate(t *testing.T) {
	lat := &Histogram{}
	for range 99 {
		lat.Record(int64(time.Millisecond))
	}
	lat.Record(int64(20 * time.Millisecond))
	flow := &CaseResult{Name: "64 B", Mode: ModePubSub, Traffic: Traffic{Published: 100, Expected: 1000, Unique: 990}, Latency: lat}
	flow.Finish()
	pub := &CaseResult{Name: "pub", Mode: ModePub, Traffic: Traffic{Published: 100}}
	pub.Finish()
	conn := &CaseResult{Name: "1000 connections", Mode: ModeConn,
		ConnCounts: ConnCounts{Target: 1000, Established: 990, Failures: map[string]int{FailRefused: 10}},
		Connect:    lat, Wake: lat, WakeBusy: &Histogram{}}
	conn.WakeBusy.Record(int64(time.Microsecond))
	conn.Finish()
	rep := &Report{Cases: []*CaseResult{flow}}
	as, err := ParseAssertions("p99<5ms,p50<5ms,loss=0,loss<=10,delivered>=0.99,delivered>0.995,errors=0")
	if err != nil {
		t.Fatal(err)
	}
	got := Evaluate(rep, as)
	want := []bool{true, true, false, true, true, false, true}
	for i, r := range got {
		if r.Pass != want[i] {
			t.Errorf("%s: pass = %v (got %s), want %v", r.Assertion, r.Pass, r.Shown, want[i])
		}
	}
	// p99 is the 99th of 100 values: 1ms. p999 catches the 20ms one.
	if r := Evaluate(rep, mustParse(t, "p999<5ms"))[0]; r.Pass {
		t.Errorf("p999<5ms passed with %s", r.Shown)
	}
	// Metrics a case does not measure fail rather than pass by accident.
	rep = &Report{Cases: []*CaseResult{pub, conn}}
	for _, r := range Evaluate(rep, mustParse(t, "loss=0,p99<1s")) {
		if r.Case == "pub" && r.Pass {
			t.Errorf("%s passed on QoS 0 pub, which measures neither", r.Assertion)
		}
	}
	for _, r := range Evaluate(rep, mustParse(t, "established>=0.99,failed<=10,established>=0.999")) {
		if r.Case != "1000 connections" {
			if r.Pass {
				t.Errorf("%s passed on a pub case", r.Assertion)
			}
			continue
		}
		if wantPass := r.Assertion != "established>=0.999"; r.Pass != wantPass {
			t.Errorf("%s on conn: pass %v (got %s), want %v", r.Assertion, r.Pass, r.Shown, wantPass)
		}
	}
	// -wake's figures: the conn case has them, the pub case does not.
	for _, r := range Evaluate(rep, mustParse(t, "wake_p50<5ms,wake_max<5ms,wake_p99<=2ms,busy_p50<2us")) {
		wantPass := r.Case == "1000 connections" && r.Assertion != "wake_max<5ms"
		if r.Pass != wantPass {
			t.Errorf("%s on %s: pass %v (got %s), want %v", r.Assertion, r.Case, r.Pass, r.Shown, wantPass)
		}
	}
	rep.Asserts = Evaluate(rep, mustParse(t, "failed<=10"))
	if n := len(rep.AssertFailures()); n != 1 {
		t.Errorf("AssertFailures = %d, want 1 (the pub case)", n)
	}
}

func mustParse(t *testing.T, s string) []Assertion {
	t.Helper()
	as, err := ParseAssertions(s)
	if err != nil {
		t.Fatal(err)
	}
	return as
}
