package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// tree makes a release-like directory; perm and when vary what a machine
// (umask, clock) would change and the archive must not show.
func tree(t *testing.T, perm os.FileMode, when time.Time) string {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "xmq_0.1.0_linux_amd64")
	for name, mode := range map[string]os.FileMode{"xmq": 0o755, "LICENSE": perm, "man/xmq.1": perm} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("contents of "+name), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, when, when); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestPackIsReproducible(t *testing.T) {
	mtime := time.Unix(1764550000, 0).UTC()
	for _, ext := range []string{".tar.gz", ".zip"} {
		t.Run(ext, func(t *testing.T) {
			var outs [][]byte
			for _, tr := range []string{tree(t, 0o644, time.Now()), tree(t, 0o600, time.Unix(1, 0))} {
				out := filepath.Join(t.TempDir(), "a"+ext)
				if err := pack(out, tr, "xmq_0.1.0_linux_amd64", mtime); err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				outs = append(outs, b)
			}
			if !bytes.Equal(outs[0], outs[1]) {
				t.Fatal("two trees with the same files give different archives")
			}
			got := list(t, ext, outs[0])
			want := []string{
				"xmq_0.1.0_linux_amd64/ 755",
				"xmq_0.1.0_linux_amd64/LICENSE 644",
				"xmq_0.1.0_linux_amd64/man/ 755",
				"xmq_0.1.0_linux_amd64/man/xmq.1 644",
				"xmq_0.1.0_linux_amd64/xmq 755",
			}
			if len(got) != len(want) {
				t.Fatalf("entries %v, want %q", got, want)
			}
			for i := range want {
				if got[i].line != want[i] || !got[i].mtime.Equal(mtime) {
					t.Errorf("entry %d: %q at %v, want %q at %v", i, got[i].line, got[i].mtime, want[i], mtime)
				}
			}
		})
	}
	if err := pack(filepath.Join(t.TempDir(), "a.rar"), tree(t, 0o644, time.Now()), "xmq_0.1.0_linux_amd64", mtime); err == nil {
		t.Error("packed a .rar")
	}
}

type listed struct {
	line  string
	mtime time.Time
}

// list reads an archive back: "name mode" and time of each entry.
func list(t *testing.T, ext string, b []byte) []listed {
	t.Helper()
	var out []listed
	if ext == ".zip" {
		zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range zr.File {
			out = append(out, listed{f.Name + " " + modeString(int64(f.Mode().Perm())), f.Modified})
		}
		return out
	}
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if gz.Name != "" || !gz.ModTime.IsZero() {
		t.Errorf("gzip header holds name %q, time %v", gz.Name, gz.ModTime)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "root" {
			t.Errorf("%s owned by %d/%s", h.Name, h.Uid, h.Uname)
		}
		out = append(out, listed{h.Name + " " + modeString(h.Mode), h.ModTime})
	}
	return out
}

func modeString(m int64) string { return strconv.FormatInt(m&0o777, 8) }
