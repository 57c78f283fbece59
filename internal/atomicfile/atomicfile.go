// Package atomicfile writes a file so that a reader, or a crash, sees the
// old content or the new, never half of it: the data goes to a temporary
// file beside the target, is synced, and is renamed over it. It imports
// the standard library only.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write writes data to path with mode (the permission bits, applied
// before any byte is written, so a secret is never readable by others)
// and renames it into place. path's directory must exist. A failed write
// leaves path as it was and no temporary file behind.
func Write(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}
