package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// TestRunLockedStore: a data directory in use by a running xmq is refused
// as in use, naming that process, with advice that never says to move the
// store aside (which would throw its data away); `xmq store check` says
// the same. A damaged store still gets the store check advice
// (TestStoreCheck).
func TestRunLockedStore(t *testing.T) {
	dataDir := t.TempDir()
	b := startBroker(t, dataDir)
	want := fmt.Sprintf("in use by another xmq (pid %d)", b.cmd.Process.Pid)
	err := run(t.Context(), []string{"-listen", "127.0.0.1:0", "-web", "", "-data", dataDir}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "aside") ||
		strings.Contains(err.Error(), "cannot be read") || !strings.Contains(err.Error(), "fix: stop that xmq first") {
		t.Errorf("start on a store in use: %v\nwant %q and no advice to move it", err, want)
	}
	var out bytes.Buffer
	err = run(t.Context(), []string{"store", "check", dataDir}, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "aside") {
		t.Errorf("store check of a store in use: %v\nwant %q and no advice to move it", err, want)
	}
	b.stop(t)
	if err := run(t.Context(), []string{"store", "check", dataDir}, &out, io.Discard); err != nil {
		t.Errorf("store check once the broker stopped: %v", err)
	}
}
