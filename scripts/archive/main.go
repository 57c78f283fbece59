// Command archive packs a directory into a reproducible .tar.gz or .zip
// for make release: entries in name order, every time set to -mtime (the
// commit's time), owner root, modes 0755 for directories and executables
// and 0644 for the rest, and no gzip name or time. The same files give the
// same bytes on any machine, whatever its umask, clock or tar.
//
//	go run ./scripts/archive -mtime 1764550000 -o dist/xmq_0.1.0_linux_amd64.tar.gz -C dist/stage xmq_0.1.0_linux_amd64
package main

import (
	"archive/tar"
	"archive/zip"
	"compress/flate"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func main() {
	out := flag.String("o", "", "archive to write: NAME.tar.gz or NAME.zip")
	dir := flag.String("C", ".", "directory the packed paths are relative to")
	mtime := flag.Int64("mtime", 0, "time of every entry, Unix seconds (SOURCE_DATE_EPOCH)")
	flag.Parse()
	if *out == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: archive -o NAME.tar.gz|NAME.zip [-C DIR] [-mtime SECONDS] PATH")
		os.Exit(2)
	}
	if err := pack(*out, *dir, flag.Arg(0), time.Unix(*mtime, 0).UTC()); err != nil {
		fmt.Fprintln(os.Stderr, "archive:", err)
		os.Exit(1)
	}
}

// entry is one file or directory to pack.
type entry struct {
	name string // slash-separated, relative to the archive's root
	path string // on disk
	dir  bool
	exec bool
}

// collect lists root (relative to dir) and everything below it, in name order.
func collect(dir, root string) ([]entry, error) {
	var es []entry
	err := filepath.WalkDir(filepath.Join(dir, root), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !d.IsDir() && !info.Mode().IsRegular() {
			return fmt.Errorf("%s: only files and directories are packed", p)
		}
		es = append(es, entry{name: filepath.ToSlash(rel), path: p, dir: d.IsDir(), exec: info.Mode()&0o111 != 0})
		return nil
	})
	slices.SortFunc(es, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	return es, err
}

func (e entry) mode() int64 {
	if e.dir || e.exec {
		return 0o755
	}
	return 0o644
}

func pack(out, dir, root string, mtime time.Time) (err error) {
	es, err := collect(dir, root)
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(out)
		}
	}()
	switch {
	case strings.HasSuffix(out, ".tar.gz"):
		return packTarGz(f, es, mtime)
	case strings.HasSuffix(out, ".zip"):
		return packZip(f, es, mtime)
	}
	return errors.New("the archive's name must end in .tar.gz or .zip")
}

func packTarGz(w io.Writer, es []entry, mtime time.Time) error {
	gz, err := gzip.NewWriterLevel(w, gzip.BestCompression) // no Name, ModTime zero: nothing of this machine
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Mode: e.mode(), ModTime: mtime, Uname: "root", Gname: "root", Format: tar.FormatUSTAR}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, e.name+"/"
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			continue
		}
		h.Typeflag = tar.TypeReg
		if err := copyFile(e.path, func(size int64) (io.Writer, error) {
			h.Size = size
			return tw, tw.WriteHeader(h)
		}); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func packZip(w io.Writer, es []entry, mtime time.Time) error {
	zw := zip.NewWriter(w)
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(w, flate.BestCompression)
	})
	for _, e := range es {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: mtime}
		h.SetMode(fs.FileMode(e.mode()))
		if e.dir {
			h.Name, h.Method = path.Clean(e.name)+"/", zip.Store
			h.SetMode(fs.ModeDir | 0o755)
			if _, err := zw.CreateHeader(h); err != nil {
				return err
			}
			continue
		}
		if err := copyFile(e.path, func(int64) (io.Writer, error) { return zw.CreateHeader(h) }); err != nil {
			return err
		}
	}
	return zw.Close()
}

// copyFile copies the file at p to the writer open returns for its size.
func copyFile(p string, open func(size int64) (io.Writer, error)) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	w, err := open(fi.Size())
	if err != nil {
		return err
	}
	n, err := io.Copy(w, f)
	if err == nil && n != fi.Size() {
		err = fmt.Errorf("%s changed while it was packed", p)
	}
	return err
}
