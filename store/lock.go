package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// ErrLocked: another process (or another Store of this one) has the store
// open. Nothing is wrong with the data; the message names the holder.
var ErrLocked = errors.New("store: locked")

// openDirs are the stores this process has open, by absolute directory:
// Pebble's lock (a POSIX record lock on DIR/LOCK) does not conflict within
// one process, so a second open here is caught by this list, not by it.
var openDirs struct {
	sync.Mutex
	m map[string]bool
}

// claimDir records dir as open in this process; it fails with ErrLocked
// when it is open already.
func claimDir(dir string) (release func(), err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = filepath.Clean(dir)
	}
	openDirs.Lock()
	defer openDirs.Unlock()
	if openDirs.m[abs] {
		return nil, lockedError(dir, os.Getpid())
	}
	if openDirs.m == nil {
		openDirs.m = map[string]bool{}
	}
	openDirs.m[abs] = true
	return func() {
		openDirs.Lock()
		delete(openDirs.m, abs)
		openDirs.Unlock()
	}, nil
}

// lockedError says who holds dir; pid 0 is unknown.
func lockedError(dir string, pid int) error {
	if pid > 0 {
		return fmt.Errorf("%w: data directory %s in use by another xmq (pid %d)", ErrLocked, dir, pid)
	}
	return fmt.Errorf("%w: data directory %s in use by another process", ErrLocked, dir)
}

// heldBy reports whether another process holds the store's lock, and its
// pid when the system says (0: unknown).
func heldBy(dir string) (pid int, held bool) {
	return lockHolder(filepath.Join(dir, "LOCK"))
}
