//go:build unix

package main

import (
	"os"
	"syscall"
	"testing"
)

// sighup sends this process SIGHUP, as `kill -HUP` does to a broker.
func sighup(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}
