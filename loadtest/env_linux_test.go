package loadtest

import (
	"context"
	"math"
	"os"
	"runtime"
	"testing"

	"github.com/prometheus/procfs"
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

// TestProcFixture reads a /proc fixture and checks the figures the
// generator's own parser gave before procfs read them: ticks of 1/100 s,
// resident pages from statm (not stat's field 24, 999 here), guest time
// left out of the machine's total.
func TestProcFixture(t *testing.T) {
	fs, err := procfs.NewFS("testdata/proc")
	if err != nil {
		t.Fatal(err)
	}
	cpu, rss, err := pidUsage(fs, 4242)
	if want := uint64(777 * os.Getpagesize()); err != nil || cpu != 3 || rss != want {
		t.Errorf("pidUsage = %v, %d, %v; want 3, %d", cpu, rss, err, want)
	}
	if _, _, err := pidUsage(fs, 4243); err == nil {
		t.Error("pidUsage of a missing process succeeded")
	}
	// cpu  1000 20 300 5000 40 6 7 8 9 10: busy 1341 ticks of 6381.
	c := machineCPUOf(fs)
	if busy := 100 * c.busy / c.total * float64(c.cpus); c.cpus != 2 || math.Abs(busy-100*1341.0/6381*2) > 1e-9 {
		t.Errorf("machineCPUOf = %+v (busy %v%%), want 1341/6381 ticks busy on 2 CPUs", c, busy)
	}
	var e Env
	e.readProcFS(fs)
	want := Env{Cores: 2, Kernel: "6.1.0-test", PortRange: "32768-60999 (28232)", MemTotal: 16303428 << 10}
	if runtime.GOARCH == "amd64" || runtime.GOARCH == "386" { // the fixture's cpuinfo is x86's
		want.CPUModel = "Intel(R) Xeon(R) CPU @ 2.20GHz"
	}
	if e != want {
		t.Errorf("readProcFS = %+v\nwant %+v", e, want)
	}
}
