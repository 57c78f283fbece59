//go:build !linux && !darwin && !freebsd && !windows

package store

import "errors"

// freeBytes cannot tell on this system (statfs's fields differ on each of
// the other BSDs, Solaris and Plan 9), so MinFreeBytes is not enforced
// there; MaxDiskBytes still is.
func freeBytes(string) (int64, error) {
	return 0, errors.New("store: free space is not measured on this system")
}
