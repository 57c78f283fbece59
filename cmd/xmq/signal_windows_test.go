package main

import "testing"

// sighup skips the rest of the test: Windows has no SIGHUP, so there xmq
// reloads its files only on their timers (tls.reload_interval,
// auth.reload_interval).
func sighup(t *testing.T) {
	t.Helper()
	t.Skip("Windows has no SIGHUP")
}
