package loadtest

import (
	"syscall"
	"time"
)

// openFilesLimit is 0: Windows has no limit on open sockets per process to
// report (the report leaves the field out).
func openFilesLimit() uint64 { return 0 }

// processUsage is this process's user+system CPU time (GetProcessTimes);
// the peak resident memory is not read on Windows (0: left out of reports).
func processUsage() (cpu time.Duration, maxRSS uint64) {
	h, err := syscall.GetCurrentProcess()
	if err != nil {
		return 0, 0
	}
	var created, exited, kernel, user syscall.Filetime
	if syscall.GetProcessTimes(h, &created, &exited, &kernel, &user) != nil {
		return 0, 0
	}
	// Filetime counts 100 ns intervals; Nanoseconds would subtract the
	// 1601 epoch, which durations do not have.
	ticks := func(f syscall.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) }
	return time.Duration(ticks(kernel)+ticks(user)) * 100, 0
}
