package loadtest

import (
	"maps"
	"time"
)

// CaseResult is everything measured in one case (one connection level, or
// one payload size). Workers fill the raw counts; Merge adds workers'
// results up (histograms bucket by bucket); Finish derives the rates. Its
// groups are embedded, so the JSON report stays one flat object per case.
type CaseResult struct {
	Name    string  `json:"name"`
	Mode    Mode    `json:"mode"`
	Payload int     `json:"payload_bytes"`
	QoS     int     `json:"qos"`
	Pubs    int     `json:"publishers"`
	Subs    int     `json:"subscribers"`
	Rate    float64 `json:"rate_per_publisher"`

	ConnCounts // conn mode
	Traffic

	Latency    *Histogram `json:"latency"`     // end to end, send → receive
	AckLatency *Histogram `json:"ack_latency"` // PUBLISH → PUBACK / PUBCOMP
	Connect    *Histogram `json:"connect"`     // dial → CONNACK
	// Wake is conn mode's -wake: PINGREQ → PINGRESP on a connection quiet
	// for -wake-idle; WakeBusy the same right after, on the just-served one.
	// Both nil without -wake.
	Wake     *Histogram `json:"wake,omitempty"`
	WakeBusy *Histogram `json:"wake_busy,omitempty"`

	// PerPub is every publisher's figures, summed over its receivers.
	// Finish condenses it into the Publishers* fields and keeps it in the
	// report only for up to perPubKeep publishers.
	PerPub              *PerPublisher `json:"per_publisher,omitempty"`
	PublishersWithLoss  int           `json:"publishers_with_loss"`
	PublishersWithDups  int           `json:"publishers_with_duplicates"`
	PublishersReordered int           `json:"publishers_reordered"`
	WorstLoss           *PubLoss      `json:"worst_loss,omitempty"`

	Errors       map[string]uint64 `json:"errors,omitempty"`
	ErrorSamples []string          `json:"error_samples,omitempty"`
	Series       []Point           `json:"series,omitempty"`
	Generator    GenStats          `json:"generator"`
	Broker       *BrokerStats      `json:"broker,omitempty"`
	Machine      *MachineStats     `json:"machine,omitempty"`

	Derived // by Finish
}

// ConnCounts is what conn mode counts: the connections it set up, kept
// and lost.
type ConnCounts struct {
	Target      int            `json:"target,omitempty"`
	Established int            `json:"established"`
	Failed      int            `json:"failed"`
	Alive       int            `json:"alive,omitempty"`    // answered PINGREQ after the hold
	Failures    map[string]int `json:"failures,omitempty"` // connect failures by reason
	Lost        map[string]int `json:"lost_during_hold,omitempty"`
	RampNs      int64          `json:"ramp_ns,omitempty"`
}

// Traffic is what the publishers sent and the subscribers received, and
// when each phase ended.
type Traffic struct {
	Published  uint64 `json:"published"`
	Acked      uint64 `json:"acked"`
	Expected   uint64 `json:"expected"` // deliveries the publishers should cause
	Received   uint64 `json:"received"` // every copy with our header
	Unique     uint64 `json:"delivered"`
	Duplicates uint64 `json:"duplicates"`
	Reordered  uint64 `json:"reordered"`
	Stale      uint64 `json:"stale"`   // sent before the run: a persistent session's leftovers
	Foreign    uint64 `json:"foreign"` // not ours
	Skew       uint64 `json:"clock_skew"`
	Reconnects uint64 `json:"reconnects"`
	SendNs     int64  `json:"send_ns"`    // start → publishers told to stop
	PubNs      int64  `json:"pub_ns"`     // start → broker acknowledged the last message
	DeliverNs  int64  `json:"deliver_ns"` // start → last delivery
}

// Derived is what Finish works out from the counts: rates, loss and
// latency summaries.
type Derived struct {
	LostMessages    uint64   `json:"lost"`
	PublishedPerSec float64  `json:"published_per_s"`
	DeliveredPerSec float64  `json:"delivered_per_s"`
	MBPerSec        float64  `json:"mb_per_s"` // payload bytes published, 10^6 per second
	DeliveredRatio  float64  `json:"delivered_ratio"`
	LatencySummary  Summary  `json:"latency_summary"`
	AckSummary      Summary  `json:"ack_latency_summary"`
	ConnectSummary  Summary  `json:"connect_summary"`
	WakeSummary     *Summary `json:"wake_summary,omitempty"`
	WakeBusySummary *Summary `json:"wake_busy_summary,omitempty"`
}

// Point is one second of a run. Counts are for that second alone.
type Point struct {
	T         float64          `json:"t"` // seconds since start
	Connected int64            `json:"connected"`
	Published uint64           `json:"published"`
	Delivered uint64           `json:"delivered"`
	Errors    uint64           `json:"errors"`
	P50       int64            `json:"p50_ns,omitempty"`
	P99       int64            `json:"p99_ns,omitempty"`
	Lat       *SparseHistogram `json:"lat,omitempty"` // merged across agents, then dropped
	BrokerCPU float64          `json:"broker_cpu_pct,omitempty"`
	BrokerRSS uint64           `json:"broker_rss_bytes,omitempty"`
}

// GenStats is the load generator's own cost during the measured phase.
type GenStats struct {
	CPUSeconds  float64 `json:"cpu_s"`
	WallSeconds float64 `json:"wall_s"`
	CPUPercent  float64 `json:"cpu_pct"` // of one core, summed over processes
	MaxRSS      uint64  `json:"max_rss_bytes"`
	Processes   int     `json:"processes"`
	GOMAXPROCS  int     `json:"gomaxprocs"`
}

// PerPublisher holds one entry per publisher number: what it published,
// the deliveries that should cause, and what its receivers counted.
type PerPublisher struct {
	Published  []uint64 `json:"published"`
	Expected   []uint64 `json:"expected"`
	Unique     []uint64 `json:"delivered"`
	Duplicates []uint64 `json:"duplicates"`
	Reordered  []uint64 `json:"reordered"`
}

func newPerPublisher(n int) *PerPublisher {
	return &PerPublisher{Published: make([]uint64, n), Expected: make([]uint64, n), Unique: make([]uint64, n),
		Duplicates: make([]uint64, n), Reordered: make([]uint64, n)}
}

func (p *PerPublisher) merge(o *PerPublisher) {
	for _, f := range []struct{ dst, src []uint64 }{{p.Published, o.Published}, {p.Expected, o.Expected},
		{p.Unique, o.Unique}, {p.Duplicates, o.Duplicates}, {p.Reordered, o.Reordered}} {
		for i := range min(len(f.dst), len(f.src)) {
			f.dst[i] += f.src[i]
		}
	}
}

// PubLoss names the publisher that lost the most.
type PubLoss struct {
	Publisher int    `json:"publisher"`
	Lost      uint64 `json:"lost"`
	Expected  uint64 `json:"expected"`
}

// perPubKeep is how many publishers a report lists one by one.
const perPubKeep = 1000

// MachineStats is the load machine's CPU during a case, from /proc/stat,
// in percent of one core: all of it, and what neither the generator nor
// the sampled broker used (other processes, interrupts). A large OtherPct
// means the figures were measured on a busy machine.
type MachineStats struct {
	BusyPct  float64 `json:"busy_pct"`
	OtherPct float64 `json:"other_pct"`
}

// Merge adds o, another worker's result for the same case, into r.
func (r *CaseResult) Merge(o *CaseResult) {
	r.ConnCounts.merge(&o.ConnCounts)
	r.Traffic.merge(&o.Traffic)
	for _, h := range []struct{ dst, src **Histogram }{{&r.Latency, &o.Latency}, {&r.AckLatency, &o.AckLatency}, {&r.Connect, &o.Connect}} {
		if *h.dst == nil {
			*h.dst = &Histogram{}
		}
		(*h.dst).Merge(*h.src)
	}
	// Only one worker wakes connections; the others' stay nil.
	for _, h := range []struct{ dst, src **Histogram }{{&r.Wake, &o.Wake}, {&r.WakeBusy, &o.WakeBusy}} {
		if *h.src != nil {
			if *h.dst == nil {
				*h.dst = &Histogram{}
			}
			(*h.dst).Merge(*h.src)
		}
	}
	if o.Errors != nil {
		if r.Errors == nil {
			r.Errors = map[string]uint64{}
		}
		for k, v := range o.Errors {
			r.Errors[k] += v
		}
	}
	r.ErrorSamples = append(r.ErrorSamples, o.ErrorSamples...)
	r.Series = mergeSeries(r.Series, o.Series)
	if o.PerPub != nil {
		if r.PerPub == nil {
			r.PerPub = newPerPublisher(len(o.PerPub.Published))
		}
		r.PerPub.merge(o.PerPub)
	}
	g := &r.Generator
	g.CPUSeconds += o.Generator.CPUSeconds
	g.WallSeconds = max(g.WallSeconds, o.Generator.WallSeconds)
	g.MaxRSS = max(g.MaxRSS, o.Generator.MaxRSS)
	g.Processes += o.Generator.Processes
	g.GOMAXPROCS += o.Generator.GOMAXPROCS
}

func (c *ConnCounts) merge(o *ConnCounts) {
	c.Target += o.Target
	c.Established += o.Established
	c.Failed += o.Failed
	c.Alive += o.Alive
	c.Failures = addCounts(c.Failures, o.Failures)
	c.Lost = addCounts(c.Lost, o.Lost)
	c.RampNs = max(c.RampNs, o.RampNs)
}

func (t *Traffic) merge(o *Traffic) {
	t.Published += o.Published
	t.Acked += o.Acked
	t.Expected += o.Expected
	t.Received += o.Received
	t.Unique += o.Unique
	t.Duplicates += o.Duplicates
	t.Reordered += o.Reordered
	t.Stale += o.Stale
	t.Foreign += o.Foreign
	t.Skew += o.Skew
	t.Reconnects += o.Reconnects
	t.SendNs = max(t.SendNs, o.SendNs)
	t.PubNs = max(t.PubNs, o.PubNs)
	t.DeliverNs = max(t.DeliverNs, o.DeliverNs)
}

func addCounts(dst, src map[string]int) map[string]int {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = map[string]int{}
	}
	for k, v := range src {
		dst[k] += v
	}
	return dst
}

// mergeSeries adds b's seconds to a's, second by second; latency
// histograms merge exactly.
func mergeSeries(a, b []Point) []Point {
	for i, p := range b {
		if i >= len(a) {
			a = append(a, p)
			continue
		}
		q := &a[i]
		q.T = max(q.T, p.T)
		q.Connected += p.Connected
		q.Published += p.Published
		q.Delivered += p.Delivered
		q.Errors += p.Errors
		if p.Lat != nil {
			if q.Lat == nil {
				q.Lat = p.Lat
			} else {
				var h Histogram
				_ = h.setSparse(q.Lat)
				var o Histogram
				_ = o.setSparse(p.Lat)
				h.Merge(&o)
				sp := h.Sparse()
				q.Lat = &sp
			}
		}
	}
	return a
}

// summaryOf is h's summary, nil for a histogram not measured.
func summaryOf(h *Histogram) *Summary {
	if h == nil {
		return nil
	}
	s := h.Summary()
	return &s
}

// Finish derives rates, loss and summaries from the counts, once every
// worker's result is merged. It drops the per-second histograms.
func (r *CaseResult) Finish() {
	for _, h := range []**Histogram{&r.Latency, &r.AckLatency, &r.Connect} {
		if *h == nil {
			*h = &Histogram{}
		}
	}
	r.LatencySummary = r.Latency.Summary()
	r.AckSummary = r.AckLatency.Summary()
	r.ConnectSummary = r.Connect.Summary()
	r.WakeSummary, r.WakeBusySummary = summaryOf(r.Wake), summaryOf(r.WakeBusy)
	if r.Mode == ModeConn {
		r.Failed = 0
		for _, v := range r.Failures {
			r.Failed += v
		}
	}
	secs := func(ns int64) float64 { return float64(ns) / float64(time.Second) }
	if d := secs(max(r.PubNs, r.SendNs)); d > 0 {
		r.PublishedPerSec = float64(r.Published) / d
		r.MBPerSec = r.PublishedPerSec * float64(r.Payload) / 1e6
	}
	if d := secs(r.DeliverNs); d > 0 {
		r.DeliveredPerSec = float64(r.Unique) / d
	}
	if r.Expected > r.Unique {
		r.LostMessages = r.Expected - r.Unique
	} else {
		r.LostMessages = 0
	}
	if r.Expected > 0 {
		r.DeliveredRatio = float64(r.Unique) / float64(r.Expected)
	}
	if pp := r.PerPub; pp != nil {
		r.PublishersWithLoss, r.PublishersWithDups, r.PublishersReordered, r.WorstLoss = 0, 0, 0, nil
		for i := range pp.Expected {
			if lost := pp.Expected[i] - min(pp.Unique[i], pp.Expected[i]); lost > 0 {
				r.PublishersWithLoss++
				if r.WorstLoss == nil || lost > r.WorstLoss.Lost {
					r.WorstLoss = &PubLoss{Publisher: i, Lost: lost, Expected: pp.Expected[i]}
				}
			}
			if pp.Duplicates[i] > 0 {
				r.PublishersWithDups++
			}
			if pp.Reordered[i] > 0 {
				r.PublishersReordered++
			}
		}
		if len(pp.Expected) > perPubKeep {
			r.PerPub = nil
		}
	}
	if g := &r.Generator; g.WallSeconds > 0 {
		g.CPUPercent = 100 * g.CPUSeconds / g.WallSeconds
	}
	for i := range r.Series {
		p := &r.Series[i]
		if p.Lat != nil {
			var h Histogram
			if h.setSparse(p.Lat) == nil {
				p.P50, p.P99 = h.Quantile(0.5), h.Quantile(0.99)
			}
			p.Lat = nil
		}
	}
	r.Errors = maps.Clone(r.Errors)
	if len(r.ErrorSamples) > 10 {
		r.ErrorSamples = r.ErrorSamples[:10]
	}
}

// ErrorTotal is the number of errors of every kind.
func (r *CaseResult) ErrorTotal() uint64 {
	var n uint64
	for _, v := range r.Errors {
		n += v
	}
	return n
}
