package web

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// nodeJSON is the overview's node card: what the broker's process uses.
// A figure the platform does not report (open files outside Linux) is
// absent.
type nodeJSON struct {
	// CPUPercent is the process's CPU time over the time since the
	// previous overview, in percent of one core (200 is two cores busy).
	CPUPercent    *float64 `json:"cpu_percent,omitempty"`
	CPUSeconds    *float64 `json:"cpu_seconds_total,omitempty"`
	CPUs          int      `json:"cpus"` // GOMAXPROCS
	RSSBytes      *float64 `json:"rss_bytes,omitempty"`
	HeapBytes     uint64   `json:"heap_bytes"` // live Go heap objects
	OpenFiles     *float64 `json:"open_files,omitempty"`
	MaxFiles      *float64 `json:"max_files,omitempty"`
	Goroutines    int      `json:"goroutines"`
	StoreBytes    *int64   `json:"store_bytes,omitempty"`        // nil: state in memory
	StoreBudget   int64    `json:"store_budget_bytes,omitempty"` // 0: no budget
	MemoryLimit   int64    `json:"memory_limit_bytes,omitempty"` // GOMEMLIMIT; absent when unlimited
	SampleSeconds float64  `json:"cpu_window_seconds,omitempty"`
}

// nodeStats reads the process figures from client_golang's process
// collector (procfs on Linux, the platform's calls elsewhere), on a
// registry of its own so that a dashboard refresh reads nothing else.
// mu guards the last CPU reading, from which the next one's rate comes.
type nodeStats struct {
	reg  *prometheus.Registry
	heap []metrics.Sample

	mu      sync.Mutex
	lastT   time.Time
	lastCPU float64
	lastPct *float64 // the rate last measured, for a read too soon after it
	lastWin float64
}

func newNodeStats() *nodeStats {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &nodeStats{reg: reg, heap: []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}}
}

// read takes the figures now. With 100,000 connections the open file count
// lists as many descriptors, about a millisecond: once per overview
// request, as a Prometheus scrape does.
func (n *nodeStats) read(store func() StoreUsage) nodeJSON {
	out := nodeJSON{CPUs: runtime.GOMAXPROCS(0), Goroutines: runtime.NumGoroutine()}
	if fams, err := n.reg.Gather(); err == nil {
		for _, f := range fams {
			if len(f.Metric) != 1 {
				continue
			}
			m := f.Metric[0]
			var v float64
			switch {
			case m.Counter != nil:
				v = m.Counter.GetValue()
			case m.Gauge != nil:
				v = m.Gauge.GetValue()
			default:
				continue
			}
			switch f.GetName() {
			case "process_cpu_seconds_total":
				out.CPUSeconds = &v
			case "process_resident_memory_bytes":
				out.RSSBytes = &v
			case "process_open_fds":
				out.OpenFiles = &v
			case "process_max_fds":
				out.MaxFiles = &v
			}
		}
	}
	if out.CPUSeconds != nil {
		now := time.Now()
		n.mu.Lock()
		switch dt := now.Sub(n.lastT).Seconds(); {
		case n.lastT.IsZero():
			n.lastT, n.lastCPU = now, *out.CPUSeconds
		case dt >= 0.2:
			// CPU time is counted in ticks: over less than a fifth of a
			// second the rate would be mostly rounding.
			pct := max(*out.CPUSeconds-n.lastCPU, 0) / dt * 100
			n.lastT, n.lastCPU, n.lastPct, n.lastWin = now, *out.CPUSeconds, &pct, dt
		}
		out.CPUPercent, out.SampleSeconds = n.lastPct, n.lastWin
		n.mu.Unlock()
	}
	metrics.Read(n.heap)
	if v := n.heap[0].Value; v.Kind() == metrics.KindUint64 {
		out.HeapBytes = v.Uint64()
	}
	if limit := debug.SetMemoryLimit(-1); limit != math.MaxInt64 { // -1 reads it
		out.MemoryLimit = limit
	}
	if store != nil {
		u := store()
		out.StoreBytes, out.StoreBudget = &u.DiskBytes, u.BudgetBytes
	}
	return out
}
