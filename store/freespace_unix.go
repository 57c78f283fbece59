//go:build linux || darwin || freebsd

package store

import "syscall"

// freeBytes is how many bytes of dir's file system an unprivileged user may
// still write (statfs: available blocks times the block size, whose field
// types differ between these systems).
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
