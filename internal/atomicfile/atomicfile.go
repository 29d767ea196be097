// Package atomicfile writes a file whole or not at all, so a reader (a
// notebook, a later exec, a crash) never sees half of it.
package atomicfile

import (
	"io"
	"os"
	"path/filepath"
)

// Write has write fill a temporary file beside path, then syncs it, gives
// it perm and renames it over path. On any error the temporary file is
// removed and path is left as it was.
func Write(path string, perm os.FileMode, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
