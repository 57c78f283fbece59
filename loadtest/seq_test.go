package loadtest

import (
	"sync"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	b := make([]byte, 64)
	putHeader(b, 1_700_000_000_123_456_789, 0xABCDEF, 4_000_000_000)
	sent, pub, seq, ok := parseHeader(b)
	if !ok || sent != 1_700_000_000_123_456_789 || pub != 0xABCDEF || seq != 4_000_000_000 {
		t.Fatalf("parseHeader = %d, %#x, %d, %v", sent, pub, seq, ok)
	}
	if _, _, _, ok := parseHeader(b[:headerLen-1]); ok {
		t.Error("parseHeader accepted a payload shorter than the header")
	}
	b[8] = 0
	if _, _, _, ok := parseHeader(b); ok {
		t.Error("parseHeader accepted a payload without the magic byte")
	}
}

// observeAll feeds seqs to a fresh tracker and counts the results.
func observeAll(seqs ...uint32) (seqCounts, []seqResult) {
	var tr seqTracker
	var c seqCounts
	var rs []seqResult
	for _, s := range seqs {
		r := tr.observe(s)
		c.add(r)
		rs = append(rs, r)
	}
	return c, rs
}

func TestSeqTrackerAccounting(t *testing.T) {
	tests := []struct {
		name string
		seqs []uint32
		want seqCounts
		// lost is published - unique when the publisher sent `published` messages.
		published uint64
		lost      uint64
	}{
		{"in order", []uint32{0, 1, 2, 3, 4}, seqCounts{Received: 5, Unique: 5}, 5, 0},
		{"gap is loss", []uint32{0, 1, 3, 4}, seqCounts{Received: 4, Unique: 4}, 5, 1},
		{"lost tail", []uint32{0, 1, 2}, seqCounts{Received: 3, Unique: 3}, 5, 2},
		{"duplicate in order", []uint32{0, 1, 1, 2}, seqCounts{Received: 4, Unique: 3, Duplicates: 1}, 3, 0},
		{"duplicate after gap", []uint32{0, 2, 2, 1, 2, 1}, seqCounts{Received: 6, Unique: 3, Duplicates: 3, Reordered: 1}, 3, 0},
		{"reordered", []uint32{0, 2, 1, 3}, seqCounts{Received: 4, Unique: 4, Reordered: 1}, 4, 0},
		{"redelivered burst (QoS 1 reconnect)", []uint32{0, 1, 2, 3, 2, 3, 4}, seqCounts{Received: 7, Unique: 5, Duplicates: 2}, 5, 0},
		{"starts late", []uint32{5, 6, 7}, seqCounts{Received: 3, Unique: 3}, 8, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := observeAll(tt.seqs...)
			if got != tt.want {
				t.Errorf("counts = %+v, want %+v", got, tt.want)
			}
			if lost := tt.published - got.Unique; lost != tt.lost {
				t.Errorf("lost = %d, want %d", lost, tt.lost)
			}
		})
	}
}

func TestSeqTrackerWindowSlides(t *testing.T) {
	var tr seqTracker
	var c seqCounts
	c.add(tr.observe(0))
	// Lose 1, then run far ahead: the window slides past 1 and writes it off.
	for s := uint32(2); s < 2+2*seqWindow; s++ {
		c.add(tr.observe(s))
	}
	if c.Unique != 1+2*seqWindow || c.Duplicates != 0 || c.Reordered != 0 {
		t.Fatalf("after a long run past a gap: %+v", c)
	}
	if !tr.forced || tr.next <= 2 {
		t.Fatalf("window did not slide: next=%d forced=%v", tr.next, tr.forced)
	}
	// 1 arrives very late: beyond the window, counted as new but reordered.
	if r := tr.observe(1); r != seqLate {
		t.Errorf("observe(1) after the window slid = %v, want seqLate", r)
	}
	// A jump larger than the window clears it in one step.
	if r := tr.observe(10 * seqWindow); r != seqInOrder {
		t.Errorf("big jump = %v, want seqInOrder", r)
	}
	if r := tr.observe(10 * seqWindow); r != seqDuplicate {
		t.Errorf("repeat after big jump = %v, want seqDuplicate", r)
	}
}

func TestSeqTrackerInOrderStaysSmall(t *testing.T) {
	var tr seqTracker
	for s := uint32(0); s < 100000; s++ {
		if r := tr.observe(s); r != seqInOrder {
			t.Fatalf("observe(%d) = %v", s, r)
		}
	}
	if tr.ring != nil {
		t.Error("in-order traffic allocated the reorder window")
	}
}

func TestTrackerSetSharedGroup(t *testing.T) {
	// Two members of a shared group split one publisher's messages; the
	// group's tracker sees every number once.
	set := newTrackerSet(10, 2, true)
	var wg sync.WaitGroup
	var counts [2]seqCounts
	for m := range 2 {
		wg.Go(func() {
			for s := uint32(m); s < 2000; s += 2 {
				r, ok := set.observe(10, s)
				if !ok {
					t.Error("publisher 10 not in the set")
					return
				}
				counts[m].add(r)
			}
		})
	}
	wg.Wait()
	if u := counts[0].Unique + counts[1].Unique; u != 2000 || counts[0].Duplicates+counts[1].Duplicates != 0 {
		t.Errorf("group unique = %d (dups %d), want 2000 and none", u, counts[0].Duplicates+counts[1].Duplicates)
	}
	if _, ok := set.observe(9, 0); ok {
		t.Error("publisher 9 below the set was accepted")
	}
	if _, ok := set.observe(12, 0); ok {
		t.Error("publisher 12 above the set was accepted")
	}
}

func TestPerPublisherSummary(t *testing.T) {
	a, b := newPerPublisher(3), newPerPublisher(3)
	// Publisher 0: all in; 1: 5 lost over two agents; 2: duplicates and reordering.
	a.Published[0], a.Expected[0], a.Unique[0] = 10, 20, 12
	b.Unique[0] = 8
	a.Published[1], a.Expected[1], a.Unique[1] = 10, 20, 10
	b.Unique[1] = 5
	b.Published[2], b.Expected[2], b.Unique[2], b.Duplicates[2], b.Reordered[2] = 10, 20, 20, 3, 1
	r := &CaseResult{Mode: ModePubSub, PerPub: a}
	r.Merge(&CaseResult{PerPub: b})
	r.Finish()
	if r.PublishersWithLoss != 1 || r.WorstLoss == nil || *r.WorstLoss != (PubLoss{Publisher: 1, Lost: 5, Expected: 20}) {
		t.Errorf("loss: %d publishers, worst %+v; want publisher 1 losing 5 of 20", r.PublishersWithLoss, r.WorstLoss)
	}
	if r.PublishersWithDups != 1 || r.PublishersReordered != 1 {
		t.Errorf("duplicates %d, reordered %d publishers; want 1 and 1", r.PublishersWithDups, r.PublishersReordered)
	}
}
