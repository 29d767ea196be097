// Package outdir opens the files the runner writes on its own machine:
// the results CSV and what goes beside it (the manifest, counters, time
// series, the record of the nodes started), and each point's logs. Its
// rules, held here once for every one of those files:
//   - the directory a file goes in must be the runner's user's and
//     writable by no one else: no group or other write bit, sticky or
//     not. It is judged on a descriptor of it, not its path, and every
//     file is then opened from that descriptor (openat), so a swap of the
//     path after the check changes nothing. A directory reached through a
//     link is judged where it points;
//   - a file is opened with O_NOFOLLOW: a link planted at its name is
//     refused, never followed; and it must be a regular file of the
//     runner's user;
//   - a directory the runner makes is 0755 (0700 for logs, Private).
//
// The logs are Private (0600): they hold the roles' command lines and
// output, which can name a host NQN or other handles of a point.
package outdir

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"rdmasweep/internal/atomicfile"
	"rdmasweep/runner/hint"
)

// ErrUnsafe is wrapped by every refusal of a directory or a file.
var ErrUnsafe = errors.New("unsafe to write")

// Private is the mode of a file only the runner's user may read.
const Private os.FileMode = 0o600

// Dir is an output directory, open and checked.
type Dir struct{ f *os.File }

// Make is Open of a directory made first, with its parents, when
// missing (0755).
func Make(path string) (*Dir, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, err
	}
	return Open(path)
}

// Open opens and checks the directory at path.
func Open(path string) (*Dir, error) {
	f, err := os.OpenFile(path, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	if err := check(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return &Dir{f: f}, nil
}

// Close closes the directory's descriptor.
func (d *Dir) Close() error { return d.f.Close() }

// check refuses a directory that is not the runner's user's, or that
// someone else may write into.
func check(f *os.File, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if uid := uint32(os.Geteuid()); st.Uid != uid {
		return hint.Wrap(fmt.Errorf("%w: %s belongs to uid %d, not the runner's uid %d", ErrUnsafe, path, st.Uid, uid),
			"the runner writes only into a directory of its own user: set output.csv and output.logs (or --out) to one of yours")
	}
	if mode := st.Mode & 0o7777; mode&0o022 != 0 {
		return hint.Wrap(fmt.Errorf("%w: %s is writable by its group or others (mode %04o), who could plant a link where the runner writes", ErrUnsafe, path, mode),
			fmt.Sprintf("chmod go-w %s, or set output.csv and output.logs (or --out) to a directory only you can write", path))
	}
	return nil
}

// OpenFile opens name in d with flag and, when it creates the file,
// perm, never through a link; a file that is not a regular file of the
// runner's user is refused.
func (d *Dir) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	path := filepath.Join(d.f.Name(), name)
	fd, err := unix.Openat(int(d.f.Fd()), name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, uint32(perm.Perm()))
	if errors.Is(err, unix.ELOOP) {
		return nil, hint.Wrap(fmt.Errorf("%w: %s is a symbolic link, which the runner does not follow", ErrUnsafe, path),
			"remove the link, and find out who put it there")
	}
	if errors.Is(err, unix.ENXIO) { // a FIFO with no reader, a device without one
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrUnsafe, path)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	switch uid := uint32(os.Geteuid()); {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		err = fmt.Errorf("%w: %s is not a regular file", ErrUnsafe, path)
	case st.Uid != uid:
		err = fmt.Errorf("%w: %s belongs to uid %d, not the runner's uid %d", ErrUnsafe, path, st.Uid, uid)
	default: // O_NONBLOCK was only so a planted FIFO cannot hold the open
		err = unix.SetNonblock(fd, false)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Mkdir makes name in d with perm (an existing directory is opened), and
// opens and checks it, never through a link.
func (d *Dir) Mkdir(name string, perm os.FileMode) (*Dir, error) {
	path := filepath.Join(d.f.Name(), name)
	if err := unix.Mkdirat(int(d.f.Fd()), name, uint32(perm.Perm())); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, &os.PathError{Op: "mkdir", Path: path, Err: err}
	}
	fd, err := unix.Openat(int(d.f.Fd()), name, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("%w: %s is not a directory (a link is not followed)", ErrUnsafe, path)
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	if err := check(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return &Dir{f: f}, nil
}

// Write writes name in d whole or not at all (atomicfile.WriteIn).
func (d *Dir) Write(name string, perm os.FileMode, write func(io.Writer) error) error {
	return atomicfile.WriteIn(d.f, name, perm, write)
}

// Replace is Write without the sync (atomicfile.ReplaceIn).
func (d *Dir) Replace(name string, perm os.FileMode, write func(io.Writer) error) error {
	return atomicfile.ReplaceIn(d.f, name, perm, write)
}

// OpenFile opens the file at path as Dir.OpenFile does, in its directory
// opened and checked.
func OpenFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	d, err := Open(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.OpenFile(filepath.Base(path), flag, perm)
}

// WriteFile writes data to the file at path, made with perm or cut to
// nothing, as OpenFile opens it.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	f, err := OpenFile(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Write writes the file at path whole or not at all, in its directory
// opened and checked.
func Write(path string, perm os.FileMode, write func(io.Writer) error) error {
	d, err := Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Write(filepath.Base(path), perm, write)
}

// Replace is Write without the sync.
func Replace(path string, perm os.FileMode, write func(io.Writer) error) error {
	d, err := Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Replace(filepath.Base(path), perm, write)
}
