//go:build !linux && !darwin && !freebsd && !windows

package loadtest

import "time"

// openFilesLimit is 0 (unknown) on this system: Rlimit's field types
// differ on each of the other BSDs, Solaris and Plan 9.
func openFilesLimit() uint64 { return 0 }

// processUsage is unknown on this system; reports leave CPU and RSS out.
func processUsage() (time.Duration, uint64) { return 0, 0 }
