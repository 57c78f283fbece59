//go:build !(aix || darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris)

package store

// lockHolder cannot ask the system here; a store locked by another
// process is reported as the engine's error.
func lockHolder(string) (pid int, held bool) { return 0, false }
