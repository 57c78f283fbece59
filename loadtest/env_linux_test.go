package loadtest

import (
	"context"
	"os"
	"testing"
)

// TestPIDProbe reads this process's CPU and RSS from /proc/PID, which only
// Linux has (-broker-pid).
func TestPIDProbe(t *testing.T) {
	cpu, rss, err := pidProbe(os.Getpid())(context.Background())
	if err != nil || cpu < 0 || rss < 1<<20 {
		t.Errorf("pidProbe(self) = %v, %d, %v", cpu, rss, err)
	}
	if _, _, err := pidProbe(1 << 30)(context.Background()); err == nil {
		t.Error("pidProbe of a missing process succeeded")
	}
}
