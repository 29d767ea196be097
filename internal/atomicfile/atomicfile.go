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
	return replace(path, perm, true, write)
}

// Replace is Write without the sync: every reader sees the file whole
// while the machine runs, a crash of the writing process included, but a
// crash of the machine may leave it empty. It is for a file that is about
// this boot alone, such as the runner's record of the nodes it started,
// which a restart makes moot (an empty one reads as no nodes); a sync for
// each node started and stopped cost a pairwise round over 64 hosts a
// quarter of its time.
func Replace(path string, perm os.FileMode, write func(io.Writer) error) error {
	return replace(path, perm, false, write)
}

func replace(path string, perm os.FileMode, sync bool, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if sync {
		if err := tmp.Sync(); err != nil {
			tmp.Close()
			return err
		}
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
