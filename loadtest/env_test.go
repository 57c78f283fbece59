package loadtest

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const promText = `# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
# HELP process_resident_memory_bytes Resident memory size in bytes.
process_resident_memory_bytes 2.4117248e+07
xmq_messages_received_total{qos="0"} 7
`

func TestParseProcessMetrics(t *testing.T) {
	cpu, rss, ok, err := parseProcessMetrics(strings.NewReader(promText))
	if !ok || cpu != 12.5 || rss != 24117248 || err != nil {
		t.Errorf("parseProcessMetrics = %v, %d, %v, %v; want 12.5, 24117248, true", cpu, rss, ok, err)
	}
	if _, _, ok, err := parseProcessMetrics(strings.NewReader("go_goroutines 5\n")); ok || err != nil {
		t.Errorf("found CPU seconds in metrics without them (%v)", err)
	}
	if _, _, _, err := parseProcessMetrics(strings.NewReader("process_cpu_seconds_total one\n")); err == nil {
		t.Error("parsed a sample whose value is no number")
	}
}

func TestBrokerProbes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, promText)
	}))
	t.Cleanup(srv.Close)
	cpu, rss, err := metricsProbe(srv.URL, srv.Client())(context.Background())
	if err != nil || cpu != 12.5 || rss == 0 {
		t.Errorf("metricsProbe = %v, %d, %v", cpu, rss, err)
	}
	if _, _, err := metricsProbe(srv.URL+"/nothing\x7f", srv.Client())(context.Background()); err == nil {
		t.Error("metricsProbe of a bad URL succeeded")
	}
}

func TestBrokerSamplerAverages(t *testing.T) {
	start := time.Now()
	// A broker using half a core, growing by 1 MiB a second.
	probe := func(context.Context) (float64, uint64, error) {
		d := time.Since(start).Seconds()
		return d / 2, uint64(10<<20 + d*(1<<20)), nil
	}
	s := startBrokerSampler(context.Background(), "fake", probe)
	time.Sleep(1100 * time.Millisecond)
	st := s.stop(context.Background())
	if st.Samples < 2 || math.Abs(st.CPUAvg-50) > 5 || st.RSSMax < 11<<20 || st.RSSEnd != st.RSSMax {
		t.Errorf("sampler stats %+v; want about 50%% CPU and a growing RSS", st)
	}
	series := []Point{{T: 1}, {T: 2}}
	st.attach(series, start)
	if series[0].BrokerCPU == 0 && series[1].BrokerCPU == 0 {
		t.Errorf("no broker CPU on the series: %+v", series)
	}
	var none *brokerSampler
	if none.stop(context.Background()) != nil {
		t.Error("a nil sampler returned stats")
	}
}

func TestCollectEnv(t *testing.T) {
	e := CollectEnv()
	if e.Cores < 1 || e.Usable < 1 || e.Usable > e.Cores || e.GOMAXPROCS < 1 || e.GoVersion == "" || e.OS == "" {
		t.Errorf("CollectEnv = %+v", e)
	}
	if c := machineCPU(); c.cpus != e.Cores || c.total <= 0 {
		t.Errorf("machineCPU = %+v with %d cores", c, e.Cores)
	}
}
