package loadtest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Env describes the machine a report was measured on.
type Env struct {
	Hostname   string `json:"hostname"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	Kernel     string `json:"kernel,omitempty"`
	CPUModel   string `json:"cpu_model,omitempty"`
	Cores      int    `json:"cores"`        // online CPUs of the machine
	Usable     int    `json:"usable_cores"` // CPUs this process may run on (taskset)
	GOMAXPROCS int    `json:"gomaxprocs"`
	MemTotal   uint64 `json:"mem_total_bytes,omitempty"`
	GoVersion  string `json:"go_version"`
	PortRange  string `json:"ephemeral_ports,omitempty"`
	FileLimit  uint64 `json:"open_files_limit,omitempty"`
}

// CollectEnv reads the machine's description from the runtime and, on
// Linux, /proc.
func CollectEnv() Env {
	e := Env{OS: runtime.GOOS, Arch: runtime.GOARCH, Cores: runtime.NumCPU(), Usable: runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version()}
	e.Hostname, _ = os.Hostname()
	e.readProc()                   // env_linux.go: kernel, ports, CPU model, memory, cores
	e.FileLimit = openFilesLimit() // rlimit_*.go
	return e
}

func goMaxProcs() int { return runtime.GOMAXPROCS(0) }

// cpuSample is the process's CPU time and peak RSS at one moment.
type cpuSample struct {
	at     time.Time
	cpu    time.Duration
	wall   time.Duration // set by Sub
	maxRSS uint64
}

// processCPU reads this process's user+system CPU time and peak RSS.
func processCPU() cpuSample {
	s := cpuSample{at: time.Now()}
	s.cpu, s.maxRSS = processUsage() // rlimit_*.go
	return s
}

// Sub is the CPU used and the time passed since an earlier sample.
func (s cpuSample) Sub(earlier cpuSample) cpuSample {
	return cpuSample{at: s.at, cpu: s.cpu - earlier.cpu, wall: s.at.Sub(earlier.at), maxRSS: s.maxRSS}
}

// cpuTicks is the machine's CPU time from the first line of /proc/stat,
// and how many CPUs it sums (the cpuN lines); see machineCPU.
type cpuTicks struct {
	busy, total float64
	cpus        int
}

func (t cpuTicks) sub(o cpuTicks) cpuTicks {
	return cpuTicks{busy: t.busy - o.busy, total: t.total - o.total, cpus: t.cpus}
}

// BrokerStats is the broker's CPU and memory during a case, from
// /proc/PID (-broker-pid) or its Prometheus metrics (-metrics-url).
type BrokerStats struct {
	Source  string  `json:"source"`
	Samples int     `json:"samples"`
	CPUAvg  float64 `json:"cpu_avg_pct"` // of one core
	CPUMax  float64 `json:"cpu_max_pct"`
	RSSMax  uint64  `json:"rss_max_bytes"`
	RSSEnd  uint64  `json:"rss_end_bytes"`
	Error   string  `json:"error,omitempty"`
	samples []brokerSample
}

type brokerSample struct {
	at  time.Time
	cpu float64 // cumulative CPU seconds
	rss uint64
}

// brokerProbe reads the broker's cumulative CPU seconds and RSS.
type brokerProbe func(ctx context.Context) (cpu float64, rss uint64, err error)

// metricsProbe scrapes Prometheus text metrics for the standard process
// collector's process_cpu_seconds_total and process_resident_memory_bytes.
func metricsProbe(url string, client *http.Client) brokerProbe {
	return func(ctx context.Context) (float64, uint64, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, 0, fmt.Errorf("loadtest: %s: %s", url, resp.Status)
		}
		cpu, rss, found, err := parseProcessMetrics(io.LimitReader(resp.Body, 16<<20))
		if err != nil {
			return 0, 0, fmt.Errorf("loadtest: %s: %w", url, err)
		}
		if !found {
			return 0, 0, fmt.Errorf("loadtest: %s has no process_cpu_seconds_total", url)
		}
		return cpu, rss, nil
	}
}

// parseProcessMetrics picks the two process metrics out of Prometheus text.
func parseProcessMetrics(r io.Reader) (cpu float64, rss uint64, found bool, err error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return 0, 0, false, err
	}
	if m := mfs["process_resident_memory_bytes"].GetMetric(); len(m) > 0 {
		rss = uint64(metricValue(m[len(m)-1]))
	}
	m := mfs["process_cpu_seconds_total"].GetMetric()
	if len(m) == 0 {
		return 0, rss, false, nil
	}
	return metricValue(m[len(m)-1]), rss, true, nil
}

// metricValue is the value of a counter, gauge or untyped sample.
func metricValue(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return m.GetUntyped().GetValue()
}

// brokerSampler samples a probe once a second in the background.
type brokerSampler struct {
	source string
	probe  brokerProbe
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	s      []brokerSample
	err    error
}

func startBrokerSampler(ctx context.Context, source string, probe brokerProbe) *brokerSampler {
	if probe == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	b := &brokerSampler{source: source, probe: probe, cancel: cancel, done: make(chan struct{})}
	b.sample(ctx)
	go func() {
		defer close(b.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				b.sample(ctx)
			case <-ctx.Done():
				return
			}
		}
	}()
	return b
}

func (b *brokerSampler) sample(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 900*time.Millisecond)
	defer cancel()
	cpu, rss, err := b.probe(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		if b.err == nil && ctx.Err() == nil {
			b.err = err
		}
		return
	}
	b.s = append(b.s, brokerSample{at: time.Now(), cpu: cpu, rss: rss})
}

// stop takes a last sample and returns the statistics.
func (b *brokerSampler) stop(ctx context.Context) *BrokerStats {
	if b == nil {
		return nil
	}
	b.sample(ctx)
	b.cancel()
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	st := &BrokerStats{Source: b.source, Samples: len(b.s), samples: b.s}
	if b.err != nil {
		st.Error = b.err.Error()
	}
	for i, s := range b.s {
		st.RSSMax = max(st.RSSMax, s.rss)
		st.RSSEnd = s.rss
		if i > 0 {
			p := b.s[i-1]
			if d := s.at.Sub(p.at).Seconds(); d > 0 {
				st.CPUMax = max(st.CPUMax, 100*(s.cpu-p.cpu)/d)
			}
		}
	}
	if n := len(b.s); n >= 2 {
		if d := b.s[n-1].at.Sub(b.s[0].at).Seconds(); d > 0 {
			st.CPUAvg = 100 * (b.s[n-1].cpu - b.s[0].cpu) / d
		}
	}
	return st
}

// attach puts the broker's CPU and RSS on the series points they fall in.
func (st *BrokerStats) attach(series []Point, start time.Time) {
	if st == nil {
		return
	}
	for i := 1; i < len(st.samples); i++ {
		s, p := st.samples[i], st.samples[i-1]
		if s.at.Sub(p.at) < 500*time.Millisecond {
			continue // the closing sample: too short to tell a rate at 10ms tick resolution
		}
		t := s.at.Sub(start).Seconds()
		for k := range series {
			if series[k].T >= t-0.5 && series[k].T < t+0.5 {
				if d := s.at.Sub(p.at).Seconds(); d > 0 {
					series[k].BrokerCPU = 100 * (s.cpu - p.cpu) / d
				}
				series[k].BrokerRSS = s.rss
				break
			}
		}
	}
}

// ParseSrcIPs parses -src-ips: a comma-separated list of addresses and
// ranges (127.0.0.2-127.0.0.20, or 127.0.0.2-20 for the last octet).
func ParseSrcIPs(s string) ([]net.IP, error) {
	var out []net.IP
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		first := net.ParseIP(lo).To4()
		if !isRange {
			ip := net.ParseIP(part)
			if ip == nil {
				return nil, fmt.Errorf("loadtest: -src-ips: %q is not an IP address", part)
			}
			out = append(out, ip)
			continue
		}
		if first == nil {
			return nil, fmt.Errorf("loadtest: -src-ips: range %q: ranges are IPv4", part)
		}
		var last net.IP
		if n, err := strconv.Atoi(hi); err == nil && n >= 0 && n < 256 {
			last = net.IPv4(first[0], first[1], first[2], byte(n)).To4()
		} else {
			last = net.ParseIP(hi).To4()
		}
		if last == nil {
			return nil, fmt.Errorf("loadtest: -src-ips: range %q: bad end", part)
		}
		a, b := ip4(first), ip4(last)
		if b < a || b-a > 1<<16 {
			return nil, fmt.Errorf("loadtest: -src-ips: range %q is empty or larger than 65536", part)
		}
		for v := a; v <= b; v++ {
			out = append(out, net.IPv4(byte(v>>24), byte(v>>16), byte(v>>8), byte(v)).To4())
		}
	}
	return out, nil
}

func ip4(ip net.IP) uint32 {
	return uint32(ip[0])<<24 | uint32(ip[1])<<16 | uint32(ip[2])<<8 | uint32(ip[3])
}
