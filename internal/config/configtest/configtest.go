// Package configtest holds the fixtures of the tests that load a
// configuration (internal/config, internal/mosquitto, cmd/xmq), as
// codectest holds codec's.
package configtest

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFile writes body to a file named xmq.yaml in a temporary directory
// of t and returns its path. The name is part of what tests see: errors
// and import comments name a file by its base name.
func WriteFile(t testing.TB, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "xmq.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
