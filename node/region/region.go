// Package region prepares the file node serve exposes: it creates it with
// node's pattern (recording the seed in a sidecar so later runs reuse it),
// sets its page-cache state, measures residency with mincore, and maps it.
//
// The sidecar FILE.rdmasweep is JSON {"seed":…, "size":…}: the first size
// bytes of FILE hold pattern.Fill content for seed. A file with no sidecar
// belongs to the user, and node never writes to it.
//
// node runs on shared hosts, often as root, and a data directory may be
// shared with other users, so nothing it opens follows a symbolic link at
// the file's or the sidecar's path (O_NOFOLLOW): a link planted there
// would have node write pattern bytes into its target, as node's user.
// A file node writes, and a sidecar it believes, must belong to node's
// user; a file node only reads may belong to anyone who lets it read.
package region

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"rdmasweep/internal/atomicfile"
	"rdmasweep/node/pattern"
	"rdmasweep/results"
)

// chunk is the write and warm-read unit: large enough for sequential
// throughput, small enough to keep memory flat.
const chunk = 4 << 20

// ErrUserFile is wrapped when --create meets a file that node did not make.
var ErrUserFile = errors.New("file exists and was not made by node (no sidecar)")

// ErrSymlink is wrapped when the file or its sidecar is a symbolic link.
var ErrSymlink = errors.New("is a symbolic link, and node follows none at the data file's path")

// ErrNotOwner is wrapped when a file node would write, or a sidecar it
// would believe, belongs to another user.
var ErrNotOwner = errors.New("belongs to another user")

// openNoFollow opens path with O_NOFOLLOW; a symbolic link at path gives
// an error wrapping ErrSymlink, with what to do.
func openNoFollow(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|unix.O_NOFOLLOW, perm)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s %w (name the real file, e.g. readlink -f %s)", path, ErrSymlink, path)
	}
	return f, err
}

// checkOwn fails unless f is a regular file owned by node's effective user.
func checkOwn(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", f.Name())
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner in its stat", f.Name())
	}
	if int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("%s %w (uid %d, node runs as uid %d): remove it, or use a path in a directory only you can write", f.Name(), ErrNotOwner, sys.Uid, os.Geteuid())
	}
	return nil
}

// Sidecar records what node wrote into a file.
type Sidecar struct {
	Seed uint64 `json:"seed"`
	Size int64  `json:"size"` // bytes of valid pattern from offset 0
}

// ReadSidecar returns the sidecar of path, or an error wrapping
// fs.ErrNotExist when there is none. A sidecar that is a symbolic link, or
// belongs to another user, is an error (ErrSymlink, ErrNotOwner): it
// vouches for nothing.
func ReadSidecar(path string) (Sidecar, error) {
	var s Sidecar
	f, err := openNoFollow(path+results.SidecarSuffix, os.O_RDONLY, 0)
	if err != nil {
		return s, err
	}
	defer f.Close()
	if err := checkOwn(f); err != nil {
		return s, err
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return s, fmt.Errorf("read sidecar %s: %w", f.Name(), err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("read sidecar %s: %w", path+results.SidecarSuffix, err)
	}
	return s, nil
}

// writeSidecar replaces path's sidecar whole: a crash leaves the old one or
// the new one, never a torn one that would vouch for bytes never written.
func writeSidecar(path string, s Sidecar) error {
	b, _ := json.Marshal(s)
	err := atomicfile.Write(path+results.SidecarSuffix, 0o644, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
	if err != nil {
		return fmt.Errorf("write sidecar: %w", err)
	}
	return nil
}

// Options say how to open the file.
type Options struct {
	Size     int64 // bytes of the file to expose (> 0)
	Create   bool  // make or reuse a patterned file
	Writable bool  // open O_RDWR (RDMA registration may need it)
}

// File is an opened, prepared file.
type File struct {
	File      *os.File
	Path      string
	Size      int64
	Seed      uint64
	Patterned bool // the first Size bytes hold the pattern for Seed
	Created   bool // this call wrote pattern bytes
	Writable  bool
}

// Open opens path for serving. With Create it makes the file hold the
// pattern for at least Size bytes, reusing what a sidecar vouches for,
// extending it with the same seed, or rewriting it with a fresh seed; a
// file that exists without a sidecar is refused (ErrUserFile). Cancelling
// ctx stops a long write between chunks. Without
// Create the file must exist and hold at least Size bytes; it is Patterned
// when its sidecar covers Size.
func Open(ctx context.Context, path string, o Options) (*File, error) {
	if o.Size <= 0 {
		return nil, fmt.Errorf("file size must be positive (got %d)", o.Size)
	}
	var created bool
	if o.Create {
		var err error
		if created, err = create(ctx, path, o.Size); err != nil {
			return nil, err
		}
	}
	flag := os.O_RDONLY
	if o.Writable {
		flag = os.O_RDWR
	}
	f, err := openNoFollow(path, flag, 0)
	if err != nil && o.Writable && errors.Is(err, os.ErrPermission) {
		flag = os.O_RDONLY
		f, err = openNoFollow(path, flag, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if o.Create {
		if err := checkOwn(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if st.Size() < o.Size {
		f.Close()
		return nil, fmt.Errorf("%s holds %d bytes, fewer than the file size %d", path, st.Size(), o.Size)
	}
	r := &File{File: f, Path: path, Size: o.Size, Created: created, Writable: flag == os.O_RDWR}
	if sc, err := ReadSidecar(path); err == nil && sc.Size >= o.Size {
		r.Seed, r.Patterned = sc.Seed, true
	}
	return r, nil
}

// create makes path hold the pattern for at least size bytes and reports
// whether it wrote any.
func create(ctx context.Context, path string, size int64) (bool, error) {
	st, statErr := os.Lstat(path)
	sc, scErr := ReadSidecar(path)
	switch {
	case statErr == nil && st.Mode()&os.ModeSymlink != 0:
		return false, fmt.Errorf("create %s: %s %w (name the real file, e.g. readlink -f %s)", path, path, ErrSymlink, path)
	case statErr == nil && scErr != nil && errors.Is(scErr, os.ErrNotExist):
		return false, fmt.Errorf("create %s: %w; refusing to overwrite it (use another path, or drop --create to serve it as is)", path, ErrUserFile)
	case statErr != nil && !errors.Is(statErr, os.ErrNotExist):
		return false, fmt.Errorf("create %s: %w", path, statErr)
	case scErr != nil && (errors.Is(scErr, ErrSymlink) || errors.Is(scErr, ErrNotOwner)):
		return false, fmt.Errorf("create %s: sidecar: %w", path, scErr)
	}
	if statErr == nil && scErr == nil && sc.Size >= size && st.Size() >= sc.Size {
		return false, nil // reuse
	}
	from, seed := int64(0), uint64(0)
	if statErr == nil && scErr == nil && sc.Size > 0 && st.Size() >= sc.Size {
		from, seed = sc.Size, sc.Seed // extend with the same pattern
	} else {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return false, fmt.Errorf("create %s: seed: %w", path, err)
		}
		seed = binary.LittleEndian.Uint64(b[:])
	}
	// A sidecar of size `from` marks the file as ours before a byte is
	// written, so an interrupted write is redone, not refused as the user's.
	if err := writeSidecar(path, Sidecar{Seed: seed, Size: from}); err != nil {
		return false, fmt.Errorf("create %s: %w", path, err)
	}
	// O_NOFOLLOW and the owner check after the open close the race with
	// a link or another user's file planted since the Lstat above.
	f, err := openNoFollow(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return false, fmt.Errorf("create %s: %w", path, err)
	}
	defer f.Close()
	if err := checkOwn(f); err != nil {
		return false, fmt.Errorf("create %s: %w", path, err)
	}
	buf := make([]byte, chunk)
	for off := from; off < size; off += chunk {
		if err := ctx.Err(); err != nil {
			return false, fmt.Errorf("create %s: %w", path, err)
		}
		n := min(int64(chunk), size-off)
		pattern.Fill(buf[:n], off, seed)
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return false, fmt.Errorf("create %s: write at %d: %w", path, off, err)
		}
	}
	if err := f.Sync(); err != nil {
		return false, fmt.Errorf("create %s: fsync: %w", path, err)
	}
	if err := writeSidecar(path, Sidecar{Seed: seed, Size: size}); err != nil {
		return false, fmt.Errorf("create %s: %w", path, err)
	}
	return true, nil
}

// Close closes the file.
func (r *File) Close() error { return r.File.Close() }

// DropCache writes back and evicts the first Size bytes from the page cache
// (fsync, then posix_fadvise DONTNEED). Pages the kernel cannot evict (tmpfs)
// stay; measure with Residency.
func (r *File) DropCache() error {
	if err := r.File.Sync(); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EBADF) {
		return fmt.Errorf("drop cache of %s: fsync: %w", r.Path, err)
	}
	if err := unix.Fadvise(int(r.File.Fd()), 0, r.Size, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("drop cache of %s: fadvise: %w", r.Path, err)
	}
	return nil
}

// Warm reads the first Size bytes once so they sit in the page cache,
// unless mincore says they all do already, through a buffer no bigger
// than the file: a server in node attach warms its file every round, and
// reading it each time was 5 % of a 64-host pairwise sweep's agents' CPU.
func (r *File) Warm() error {
	if in, err := r.Residency(); err == nil && in == 1 {
		return nil
	}
	buf := make([]byte, min(chunk, max(r.Size, 1)))
	if _, err := io.CopyBuffer(io.Discard, io.NewSectionReader(r.File, 0, r.Size), buf); err != nil {
		return fmt.Errorf("warm %s: %w", r.Path, err)
	}
	return nil
}

// Residency returns the fraction (0..1) of the first Size bytes' pages that
// are in the page cache, by mincore over a temporary mapping.
func (r *File) Residency() (float64, error) {
	m, err := unix.Mmap(int(r.File.Fd()), 0, int(r.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, fmt.Errorf("mincore %s: mmap: %w", r.Path, err)
	}
	defer unix.Munmap(m)
	page := int64(os.Getpagesize())
	vec := make([]byte, (r.Size+page-1)/page)
	// x/sys/unix has no Mincore wrapper.
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return 0, fmt.Errorf("mincore %s: %w", r.Path, e)
	}
	in := 0
	for _, v := range vec {
		in += int(v & 1)
	}
	return float64(in) / float64(len(vec)), nil
}

// Map maps the first Size bytes read-only and shared; Unmap releases it.
func (r *File) Map() ([]byte, error) {
	m, err := unix.Mmap(int(r.File.Fd()), 0, int(r.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", r.Path, err)
	}
	return m, nil
}

// Unmap releases a mapping made by Map.
func Unmap(m []byte) error {
	if m == nil {
		return nil
	}
	return unix.Munmap(m)
}
