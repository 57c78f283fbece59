//go:build aix || darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris

package store

import (
	"io"
	"os"
	"syscall"
)

// lockHolder asks the system (F_GETLK) whether another process holds a
// write lock on the file, as Pebble's running engine does on its LOCK
// file, and which process. Unlike a pid file it is never stale: the lock
// ends with its process.
func lockHolder(path string) (pid int, held bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil || lk.Type == syscall.F_UNLCK {
		return 0, false
	}
	return int(lk.Pid), true
}
