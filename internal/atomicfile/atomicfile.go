// Package atomicfile writes a file whole or not at all, so a reader (a
// notebook, a later exec, a crash) never sees half of it.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Write has write fill a temporary file beside path, then syncs it, gives
// it perm and renames it over path. On any error the temporary file is
// removed and path is left as it was.
func Write(path string, perm os.FileMode, write func(io.Writer) error) error {
	return replacePath(path, perm, true, write)
}

// Replace is Write without the sync: every reader sees the file whole
// while the machine runs, a crash of the writing process included, but a
// crash of the machine may leave it empty. It is for a file that is about
// this boot alone, such as the runner's record of the nodes it started,
// which a restart makes moot (an empty one reads as no nodes); a sync for
// each node started and stopped cost a pairwise round over 64 hosts a
// quarter of its time.
func Replace(path string, perm os.FileMode, write func(io.Writer) error) error {
	return replacePath(path, perm, false, write)
}

// WriteIn is Write of the file name in the open directory dir, and
// ReplaceIn is Replace: the temporary file is created there (never
// through a link) and renamed there, so what the directory's path names
// meanwhile does not matter.
func WriteIn(dir *os.File, name string, perm os.FileMode, write func(io.Writer) error) error {
	return replaceIn(dir, name, perm, true, write)
}

// ReplaceIn is Replace in the open directory dir (WriteIn).
func ReplaceIn(dir *os.File, name string, perm os.FileMode, write func(io.Writer) error) error {
	return replaceIn(dir, name, perm, false, write)
}

func replacePath(path string, perm os.FileMode, sync bool, write func(io.Writer) error) error {
	dir, err := os.OpenFile(filepath.Dir(path), unix.O_DIRECTORY|unix.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer dir.Close()
	return replaceIn(dir, filepath.Base(path), perm, sync, write)
}

func replaceIn(dir *os.File, name string, perm os.FileMode, sync bool, write func(io.Writer) error) error {
	var rnd [8]byte
	rand.Read(rnd[:])
	tmpName := "." + name + ".tmp-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(int(dir.Fd()), tmpName, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "create", Path: filepath.Join(dir.Name(), tmpName), Err: err}
	}
	tmp := os.NewFile(uintptr(fd), filepath.Join(dir.Name(), tmpName))
	defer unix.Unlinkat(int(dir.Fd()), tmpName, 0) // fails harmlessly once renamed
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
	if err := unix.Renameat(int(dir.Fd()), tmpName, int(dir.Fd()), name); err != nil {
		return &os.LinkError{Op: "rename", Old: tmpName, New: filepath.Join(dir.Name(), name), Err: err}
	}
	return nil
}
