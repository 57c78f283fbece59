//go:build linux || darwin || freebsd

package loadtest

import (
	"runtime"
	"syscall"
	"time"
)

// openFilesLimit is the soft limit on open files (RLIMIT_NOFILE), which
// caps the connections one process can open; 0 if unknown.
func openFilesLimit() uint64 {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) != nil {
		return 0
	}
	return uint64(rl.Cur) // int64 on FreeBSD
}

// processUsage is this process's user+system CPU time and peak resident
// memory in bytes (getrusage).
func processUsage() (cpu time.Duration, maxRSS uint64) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0
	}
	maxRSS = uint64(ru.Maxrss)
	if runtime.GOOS != "darwin" {
		maxRSS <<= 10 // kilobytes on Linux and FreeBSD, bytes on macOS
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), maxRSS
}
