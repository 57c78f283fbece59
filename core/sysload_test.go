package core

import (
	"math"
	"testing"
)

// TestLoadAverage: the load figures are per-minute rates averaged over 1,
// 5 and 15 minutes, as Mosquitto's: a steady 10 per second settles at 600
// in each, the shorter window first, and decays when the counter stops.
func TestLoadAverage(t *testing.T) {
	var l loadAvg
	var n int64
	for range 30 { // 30 s at 10/s, sampled every second
		n += 10
		l.update(n, 1)
	}
	if !(l.avg[0] > l.avg[1] && l.avg[1] > l.avg[2] && l.avg[0] < 600) {
		t.Fatalf("after 30 s: %v, want 1min > 5min > 15min, all below 600", l.avg)
	}
	// 1 - e^(-30/60) of the way to 600 after 30 seconds.
	if want := 600 * (1 - math.Exp(-0.5)); math.Abs(l.avg[0]-want) > 0.01 {
		t.Errorf("1min after 30 s = %.3f, want %.3f", l.avg[0], want)
	}
	for range 3 * 3600 / 10 { // 3 hours more, sampled every 10 s
		n += 100
		l.update(n, 10)
	}
	for i, v := range l.avg {
		if math.Abs(v-600) > 0.01 {
			t.Errorf("%s = %.3f after hours at 10/s, want 600", loadWindows[i].name, v)
		}
	}
	l.update(n, 60) // a minute without a message
	if want := 600 * math.Exp(-1); math.Abs(l.avg[0]-want) > 0.01 {
		t.Errorf("1min a minute after the counter stopped = %.3f, want %.3f", l.avg[0], want)
	}
}
