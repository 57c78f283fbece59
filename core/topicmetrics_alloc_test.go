package core

import (
	"fmt"
	"testing"
)

// TestTopicMetricsAllocations: the publish → deliver path allocates no more
// with MaxTopicMetrics entries registered (exact topics and filters, some
// matching the published topic) than with none.
func TestTopicMetricsAllocations(t *testing.T) {
	srv, roundTrip := pipeRoundTrip(t, "a/t")
	without := testing.AllocsPerRun(500, roundTrip)

	for _, f := range []string{"a/t", "a/+", "#", "+/t"} {
		if err := srv.AddTopicMetric(f); err != nil {
			t.Fatal(err)
		}
	}
	for i := 4; i < MaxTopicMetrics; i++ {
		f := fmt.Sprintf("other/%d", i)
		if i%2 == 0 {
			f += "/#"
		}
		if err := srv.AddTopicMetric(f); err != nil {
			t.Fatal(err)
		}
	}
	with := testing.AllocsPerRun(500, roundTrip)
	t.Logf("allocations per publish → deliver: %.2f with no topic metric, %.2f with %d", without, with, MaxTopicMetrics)
	if with > without {
		t.Errorf("topic metrics cost %.2f allocations per message (%.2f without)", with-without, without)
	}
	for _, m := range srv.TopicMetrics()[:4] {
		if m.MessagesIn < 500 || m.MessagesOut < 500 {
			t.Errorf("%q: in %d, out %d, want at least 500 each", m.Topic, m.MessagesIn, m.MessagesOut)
		}
	}
}
