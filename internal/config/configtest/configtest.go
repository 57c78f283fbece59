// Package configtest holds the fixtures of the tests that load a
// configuration or a file it names (internal/config, internal/mosquitto,
// cmd/xmq, auth's password files), as codectest holds codec's.
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

// CopyFile copies src (a fixture, such as a password file in a package's
// testdata) to a file called name in a temporary directory of t, mode 0600
// as the broker wants its secrets, and returns its path: tests may change
// the copy.
func CopyFile(t testing.TB, src, name string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
