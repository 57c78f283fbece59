package atomicfile

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestWrite: the file holds the new data with its mode, replaces an old
// one, and nothing else is left in the directory; a failed write leaves
// the old file.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, tt := range []struct {
		data string
		mode os.FileMode
	}{{"first", 0o600}, {"second", 0o644}} {
		if err := Write(path, []byte(tt.data), tt.mode); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != tt.data {
			t.Fatalf("read %q %v, want %q", got, err, tt.data)
		}
		fi, _ := os.Stat(path)
		if runtime.GOOS != "windows" && fi.Mode().Perm() != tt.mode {
			t.Errorf("mode %v, want %v", fi.Mode().Perm(), tt.mode)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries, want the file only", len(entries))
	}
	if err := Write(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600); err == nil {
		t.Error("a write into a missing directory succeeded")
	}
}
