package loadtest

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

func TestBucketLayout(t *testing.T) {
	// Every value lands in a bucket whose range holds it, buckets are
	// contiguous, and a bucket is at most 1/128 of its values wide.
	prevHigh := int64(-1)
	for i := 0; i < nBuckets; i++ {
		lo, w := bucketLow(i), bucketWidth(i)
		if lo != prevHigh+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHigh)
		}
		if lo >= 2*subCount && float64(w)/float64(lo) > 1.0/subCount+1e-12 {
			t.Fatalf("bucket %d [%d,+%d) is wider than 1/%d of its values", i, lo, w, subCount)
		}
		for _, v := range []int64{lo, lo + w/2, lo + w - 1} {
			if got := bucketOf(v); got != i {
				t.Fatalf("bucketOf(%d) = %d, want %d", v, got, i)
			}
		}
		prevHigh = lo + w - 1
	}
	if got := bucketOf(maxValue + 12345); got != nBuckets-1 {
		t.Errorf("bucketOf(above max) = %d, want the last bucket %d", got, nBuckets-1)
	}
	if got := bucketOf(-5); got != 0 {
		t.Errorf("bucketOf(-5) = %d, want 0", got)
	}
}

// exactQuantile is the ⌈q·n⌉-th smallest of sorted values.
func exactQuantile(sorted []int64, q float64) int64 {
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

func TestHistogramQuantilesWithinBucketPrecision(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	var vals []int64
	var sum float64
	for range 100000 {
		v := int64(math.Exp(r.NormFloat64()*2 + 11)) // log-normal around 60µs
		vals = append(vals, v)
		sum += float64(v)
		h.Record(v)
	}
	slices.Sort(vals)
	if h.Count() != uint64(len(vals)) || h.Min() != vals[0] || h.Max() != vals[len(vals)-1] {
		t.Fatalf("count/min/max = %d/%d/%d, want %d/%d/%d", h.Count(), h.Min(), h.Max(), len(vals), vals[0], vals[len(vals)-1])
	}
	if mean := sum / float64(len(vals)); math.Abs(h.Mean()-mean) > 1e-6*mean {
		t.Errorf("Mean = %f, want %f", h.Mean(), mean)
	}
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999} {
		got, want := h.Quantile(q), exactQuantile(vals, q)
		if d := math.Abs(float64(got - want)); d > float64(want)/subCount+1 {
			t.Errorf("Quantile(%v) = %d, want %d within %.2f%%", q, got, want, 100.0/subCount)
		}
	}
	if h.Quantile(0) != h.Min() || h.Quantile(1) != h.Max() {
		t.Errorf("Quantile(0), Quantile(1) = %d, %d; want min %d, max %d", h.Quantile(0), h.Quantile(1), h.Min(), h.Max())
	}
}

func TestHistogramMergeEqualsRecordingEverything(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var all Histogram
	parts := make([]Histogram, 4)
	for i := range 40000 {
		v := r.Int64N(int64(1e9))
		if i%7 == 0 {
			v = r.Int64N(1000) // some tiny values, exact buckets
		}
		all.Record(v)
		parts[i%len(parts)].Record(v)
	}
	var merged Histogram
	merged.Merge(&Histogram{}) // merging an empty one changes nothing
	for i := range parts {
		merged.Merge(&parts[i])
	}
	merged.Merge(nil)
	if merged.Count() != all.Count() || merged.Min() != all.Min() || merged.Max() != all.Max() {
		t.Fatalf("merged count/min/max = %d/%d/%d, want %d/%d/%d", merged.Count(), merged.Min(), merged.Max(),
			all.Count(), all.Min(), all.Max())
	}
	if math.Abs(merged.Mean()-all.Mean()) > 1e-6*all.Mean() {
		t.Errorf("merged mean %f, want %f", merged.Mean(), all.Mean())
	}
	for _, q := range []float64{0.1, 0.5, 0.99, 0.9999} {
		if merged.Quantile(q) != all.Quantile(q) {
			t.Errorf("merged Quantile(%v) = %d, want %d", q, merged.Quantile(q), all.Quantile(q))
		}
	}
	// Merging is not averaging: two very different halves give the p99 of the whole.
	var fast, slow, both Histogram
	for range 990 {
		fast.Record(100_000) // 100µs
	}
	for range 10 {
		slow.Record(50_000_000) // 50ms
	}
	both.Merge(&fast)
	both.Merge(&slow)
	if p := both.Quantile(0.995); p < 49_000_000 {
		t.Errorf("p99.5 of 990×100µs + 10×50ms = %d, want about 50ms", p)
	}
}

func TestHistogramJSONRoundTrip(t *testing.T) {
	var h Histogram
	for _, v := range []int64{0, 1, 255, 256, 1000, 73_000, 1_900_000_000, maxValue * 2} {
		h.RecordN(v, 3)
	}
	b, err := json.Marshal(&h)
	if err != nil {
		t.Fatal(err)
	}
	var back Histogram
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("Unmarshal(%s): %v", b, err)
	}
	if back.Summary() != h.Summary() {
		t.Errorf("round trip: %+v, want %+v", back.Summary(), h.Summary())
	}
	var empty Histogram
	b, _ = json.Marshal(&empty)
	if err := json.Unmarshal(b, &back); err != nil || back.Count() != 0 {
		t.Errorf("empty round trip: %v, count %d", err, back.Count())
	}
	for _, bad := range []string{
		`{"layout":"other","n":0,"buckets":[]}`,
		`{"layout":"` + histLayout + `","n":1,"buckets":[[99999,1]]}`,
		`{"layout":"` + histLayout + `","n":5,"buckets":[[3,1]]}`,
	} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("Unmarshal(%s) succeeded", bad)
		}
	}
}

func TestRecorderConcurrentSnapshotAndInterval(t *testing.T) {
	r := NewRecorder(4)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 5000 {
				r.Record(w, int64(1000+i))
			}
		})
	}
	var mid Histogram
	r.SnapshotInto(&mid) // while recording: must not race or tear badly
	wg.Wait()
	var all Histogram
	r.SnapshotInto(&all)
	if all.Count() != 40000 || all.Min() != 1000 || all.Max() != 5999 {
		t.Fatalf("snapshot count/min/max = %d/%d/%d, want 40000/1000/5999", all.Count(), all.Min(), all.Max())
	}
	if want := 1000 + 4999.0/2; math.Abs(all.Mean()-want) > 0.01 {
		t.Errorf("mean %f, want %f", all.Mean(), want)
	}
	// An interval is the difference of two snapshots.
	r.Record(0, 1_000_000)
	r.Record(1, 2_000_000)
	var now, iv Histogram
	r.SnapshotInto(&now)
	diffInto(&iv, &now, &all)
	if iv.Count() != 2 || iv.Min() > 1_000_000 || iv.Max() < 2_000_000 {
		t.Errorf("interval count/min/max = %d/%d/%d, want 2 values 1ms and 2ms", iv.Count(), iv.Min(), iv.Max())
	}
	diffInto(&iv, &now, &Histogram{})
	if iv.Count() != now.Count() {
		t.Errorf("interval from nothing = %d values, want %d", iv.Count(), now.Count())
	}
}

func TestHistogramResetKeepsWorking(t *testing.T) {
	var h Histogram
	h.Record(5000)
	h.Reset()
	if h.Count() != 0 || h.Quantile(0.5) != 0 || h.Mean() != 0 {
		t.Fatalf("after Reset: count %d p50 %d mean %f", h.Count(), h.Quantile(0.5), h.Mean())
	}
	h.Record(7)
	if h.Min() != 7 || h.Max() != 7 || h.Quantile(0.5) != 7 {
		t.Errorf("after Reset and Record(7): min %d max %d p50 %d", h.Min(), h.Max(), h.Quantile(0.5))
	}
}
