package loadtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"
)

// The histograms are log-linear, in the manner of HdrHistogram: values
// below 2·subCount are counted exactly, and every power-of-two range above
// that is split into subCount equal buckets, so a bucket's width is at most
// 1/subCount (0.8 %) of the values in it. Values are nanoseconds; anything at
// or above maxValue (2^40 ns, about 18 minutes) lands in the last bucket.
const (
	subBits  = 7
	subCount = 1 << subBits // buckets per power of two
	maxBits  = 40
	maxValue = int64(1)<<maxBits - 1
	nBuckets = (maxBits - subBits + 1) * subCount
)

// bucketOf is the index of the bucket that counts v.
func bucketOf(v int64) int {
	if v < 0 {
		v = 0
	} else if v > maxValue {
		v = maxValue
	}
	u := uint64(v)
	if u < 2*subCount {
		return int(u)
	}
	shift := bits.Len64(u) - 1 - subBits
	return shift*subCount + int(u>>uint(shift))
}

// bucketLow is the smallest value bucket i counts; bucketWidth how many
// consecutive values it counts.
func bucketLow(i int) int64 {
	if i < 2*subCount {
		return int64(i)
	}
	shift := i/subCount - 1
	return int64(i-shift*subCount) << uint(shift)
}

func bucketWidth(i int) int64 {
	if i < 2*subCount {
		return 1
	}
	return int64(1) << uint(i/subCount-1)
}

// Histogram counts values (nanoseconds) in log-linear buckets. Two
// histograms merge exactly, bucket by bucket, which is what lets the
// controller combine agents' latencies rather than average their
// percentiles. The zero value is empty and ready to use; a Histogram is not
// safe for concurrent use (Recorder is).
type Histogram struct {
	counts   []uint64 // nBuckets long once anything is recorded
	n        uint64
	sum      float64 // float: a sum of nanosecond values overflows int64 on long runs
	min, max int64
	lo, hi   int // the non-zero buckets lie in [lo, hi]
}

// Record counts one value.
func (h *Histogram) Record(v int64) { h.RecordN(v, 1) }

// RecordN counts value v n times.
func (h *Histogram) RecordN(v int64, n uint64) {
	if n == 0 {
		return
	}
	if v < 0 {
		v = 0
	}
	i := bucketOf(v)
	h.add(i, n)
	h.sum += float64(v) * float64(n)
	if h.n == n || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
}

// add counts n in bucket i and keeps n, lo and hi; sum, min and max are the caller's.
func (h *Histogram) add(i int, n uint64) {
	if h.counts == nil {
		h.counts = make([]uint64, nBuckets)
		h.lo, h.hi = i, i
	}
	if h.n == 0 || i < h.lo {
		h.lo = i
	}
	if h.n == 0 || i > h.hi {
		h.hi = i
	}
	h.counts[i] += n
	h.n += n
}

// Merge adds every value counted in o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.n == 0 {
		return
	}
	first := h.n == 0
	for i := o.lo; i <= o.hi; i++ {
		if c := o.counts[i]; c != 0 {
			h.add(i, c)
		}
	}
	h.sum += o.sum
	if first || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
}

// Reset empties h and keeps its memory.
func (h *Histogram) Reset() {
	if h.counts != nil && h.n > 0 {
		clear(h.counts[h.lo : h.hi+1])
	}
	h.n, h.sum, h.min, h.max, h.lo, h.hi = 0, 0, 0, 0, 0, 0
}

// Count is the number of values recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Min and Max are the exact extreme values recorded; 0 when empty.
func (h *Histogram) Min() int64 { return h.min }

// Max is the largest value recorded; 0 when empty.
func (h *Histogram) Max() int64 { return h.max }

// Mean is the exact average of the values recorded; 0 when empty.
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// Quantile returns the value at quantile q (0 ≤ q ≤ 1): the midpoint of the
// bucket holding the ⌈q·n⌉-th smallest value, kept within [Min, Max]. The
// error is at most half a bucket, under 0.4 %.
func (h *Histogram) Quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	if q <= 0 {
		return h.min
	}
	if q >= 1 {
		return h.max
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i := h.lo; i <= h.hi; i++ {
		seen += h.counts[i]
		if seen >= rank {
			v := bucketLow(i) + (bucketWidth(i)-1)/2
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}

// Buckets calls f for every non-empty bucket in ascending order with the
// bucket's value range [low, high] and its count.
func (h *Histogram) Buckets(f func(low, high int64, count uint64)) {
	if h.n == 0 {
		return
	}
	for i := h.lo; i <= h.hi; i++ {
		if c := h.counts[i]; c != 0 {
			f(bucketLow(i), bucketLow(i)+bucketWidth(i)-1, c)
		}
	}
}

// Summary is a histogram reduced to the figures reports print.
type Summary struct {
	Count uint64  `json:"count"`
	Min   int64   `json:"min_ns"`
	Mean  float64 `json:"avg_ns"`
	P50   int64   `json:"p50_ns"`
	P90   int64   `json:"p90_ns"`
	P99   int64   `json:"p99_ns"`
	P999  int64   `json:"p999_ns"`
	Max   int64   `json:"max_ns"`
}

// Summary reduces h to its usual percentiles.
func (h *Histogram) Summary() Summary {
	return Summary{Count: h.n, Min: h.min, Mean: h.Mean(), P50: h.Quantile(0.5), P90: h.Quantile(0.9),
		P99: h.Quantile(0.99), P999: h.Quantile(0.999), Max: h.max}
}

// SparseHistogram is the wire form of a Histogram: its non-empty buckets
// as [bucket, count] pairs, with the bucket layout named so that a
// mismatched peer is refused, not misread.
type SparseHistogram struct {
	Layout  string      `json:"layout"`
	N       uint64      `json:"n"`
	Sum     float64     `json:"sum"`
	Min     int64       `json:"min"`
	Max     int64       `json:"max"`
	Buckets [][2]uint64 `json:"buckets"`
}

var histLayout = fmt.Sprintf("log-linear/ns/sub%d/max%d", subBits, maxBits)

// ErrHistLayout reports a serialized histogram with another bucket layout.
var ErrHistLayout = errors.New("loadtest: histogram bucket layout differs")

// Sparse returns h's exact contents in wire form.
func (h *Histogram) Sparse() SparseHistogram {
	j := SparseHistogram{Layout: histLayout, N: h.n, Sum: h.sum, Min: h.min, Max: h.max, Buckets: [][2]uint64{}}
	if h.n > 0 {
		for i := h.lo; i <= h.hi; i++ {
			if c := h.counts[i]; c != 0 {
				j.Buckets = append(j.Buckets, [2]uint64{uint64(i), c})
			}
		}
	}
	return j
}

// setSparse replaces h's contents with j's.
func (h *Histogram) setSparse(j *SparseHistogram) error {
	if j.Layout != histLayout {
		return fmt.Errorf("%w: %q, want %q", ErrHistLayout, j.Layout, histLayout)
	}
	h.Reset()
	for _, b := range j.Buckets {
		if b[0] >= nBuckets {
			return fmt.Errorf("loadtest: histogram bucket %d out of range", b[0])
		}
		if b[1] != 0 {
			h.add(int(b[0]), b[1])
		}
	}
	if h.n != j.N {
		return fmt.Errorf("loadtest: histogram counts add up to %d, header says %d", h.n, j.N)
	}
	if h.n > 0 {
		h.sum, h.min, h.max = j.Sum, j.Min, j.Max
	}
	return nil
}

// MarshalJSON encodes the non-empty buckets exactly, so that a histogram
// sent by an agent merges at the controller without loss.
func (h *Histogram) MarshalJSON() ([]byte, error) { return json.Marshal(h.Sparse()) }

// UnmarshalJSON decodes what MarshalJSON wrote, replacing h's contents.
func (h *Histogram) UnmarshalJSON(b []byte) error {
	var j SparseHistogram
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	return h.setSparse(&j)
}

// Recorder is a Histogram that many goroutines record into at once. It is
// split into shards, each a set of atomic counters; a worker records into
// the shard its index picks, so workers seldom touch the same cache lines,
// and Snapshot adds the shards up without stopping anyone.
type Recorder struct {
	shards []recShard
}

type recShard struct {
	counts []atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Uint64 // nanoseconds: 2^64 ns is 584 years of summed latency
	min    atomic.Int64  // valid when n > 0; math.MaxInt64 before
	max    atomic.Int64
	_      [64]byte // keep shards' headers off each other's cache line
}

// NewRecorder returns a Recorder with n shards (at least 1).
func NewRecorder(n int) *Recorder {
	r := &Recorder{shards: make([]recShard, max(n, 1))}
	for i := range r.shards {
		r.shards[i].counts = make([]atomic.Uint64, nBuckets)
		r.shards[i].min.Store(math.MaxInt64)
	}
	return r
}

// Record counts v in the shard that worker picks.
func (r *Recorder) Record(worker int, v int64) {
	s := &r.shards[uint(worker)%uint(len(r.shards))]
	if v < 0 {
		v = 0
	}
	s.counts[bucketOf(v)].Add(1)
	s.n.Add(1)
	s.sum.Add(uint64(v))
	for m := s.min.Load(); v < m && !s.min.CompareAndSwap(m, v); m = s.min.Load() {
	}
	for m := s.max.Load(); v > m && !s.max.CompareAndSwap(m, v); m = s.max.Load() {
	}
}

// SnapshotInto replaces dst's contents with everything recorded so far.
// Concurrent records may be half-counted (in a bucket, not yet in n); the
// snapshot's n is recomputed from the buckets so it is self-consistent.
func (r *Recorder) SnapshotInto(dst *Histogram) {
	dst.Reset()
	minV, maxV := int64(math.MaxInt64), int64(0)
	var sum float64
	for si := range r.shards {
		s := &r.shards[si]
		if s.n.Load() == 0 {
			continue
		}
		for i := range s.counts {
			if c := s.counts[i].Load(); c != 0 {
				dst.add(i, c)
			}
		}
		sum += float64(s.sum.Load())
		minV = min(minV, s.min.Load())
		maxV = max(maxV, s.max.Load())
	}
	if dst.n > 0 {
		dst.sum, dst.min, dst.max = sum, minV, maxV
	}
}

// diffInto sets dst to cur minus prev, two snapshots of one Recorder taken
// in that order: what was recorded between them. Min and max of the
// interval are known only to bucket precision.
func diffInto(dst, cur, prev *Histogram) {
	dst.Reset()
	if cur.n == 0 {
		return
	}
	for i := cur.lo; i <= cur.hi; i++ {
		c := cur.counts[i]
		if prev.counts != nil && prev.n > 0 && i >= prev.lo && i <= prev.hi {
			c -= min(c, prev.counts[i])
		}
		if c != 0 {
			dst.add(i, c)
		}
	}
	if dst.n == 0 {
		return
	}
	dst.sum = max(cur.sum-prev.sum, 0)
	dst.min = bucketLow(dst.lo)
	dst.max = bucketLow(dst.hi) + bucketWidth(dst.hi) - 1
}
