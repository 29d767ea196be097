package counters

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// SectorBytes is the unit of /sys/block/*/stat's sector fields, whatever
// the device's own sector size (Documentation/block/stat.rst).
const SectorBytes = 512

// statFields are the names of /sys/block/DEV/stat's fields, in order
// (Documentation/block/stat.rst). Older kernels give only the first 11.
var statFields = []string{
	"read_ios", "read_merges", "read_sectors", "read_ticks",
	"write_ios", "write_merges", "write_sectors", "write_ticks",
	"in_flight", "io_ticks", "time_in_queue",
	"discard_ios", "discard_merges", "discard_sectors", "discard_ticks",
	"flush_ios", "flush_ticks",
}

// BlockDevice is the block device under a file, as far as the kernel lets
// its I/O be counted.
type BlockDevice struct {
	Name string // the device whose stat is read, e.g. nvme0n1p1 or dm-0
	Kind string // disk, partition, dm or md
	// Under names what Name sits on: the whole disk of a partition, the
	// slaves of a dm or md device. The stat read is Name's own: the
	// kernel accounts a partition's, dm's and md's I/O on it.
	Under []string
	Dir   string // Name's directory in sysfs
}

// String says which device is counted, for the manifest.
func (b BlockDevice) String() string {
	if len(b.Under) == 0 {
		return b.Name + " (" + b.Kind + ")"
	}
	return fmt.Sprintf("%s (%s on %s)", b.Name, b.Kind, strings.Join(b.Under, ","))
}

// ErrNoBlockDevice is returned for a file on a filesystem with no block
// device under it (tmpfs, an initramfs, overlay, NFS): its reads cannot
// be counted at a disk.
var ErrNoBlockDevice = fmt.Errorf("no block device under the file")

// BlockDeviceFor finds the block device that holds path. sysfs is the
// /sys mount.
func BlockDeviceFor(sysfs, path string) (BlockDevice, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return BlockDevice{}, fmt.Errorf("find the disk under %s: %w", path, err)
	}
	maj, min := unix.Major(st.Dev), unix.Minor(st.Dev)
	link := filepath.Join(sysfs, "dev", "block", fmt.Sprintf("%d:%d", maj, min))
	dir, err := filepath.EvalSymlinks(link)
	if err != nil {
		return BlockDevice{}, fmt.Errorf("find the disk under %s (device %d:%d): %w", path, maj, min, ErrNoBlockDevice)
	}
	return describe(dir), nil
}

// describe names the device whose sysfs directory is dir.
func describe(dir string) BlockDevice {
	b := BlockDevice{Name: filepath.Base(dir), Kind: "disk", Dir: dir}
	switch {
	case exists(filepath.Join(dir, "partition")):
		b.Kind = "partition"
		b.Under = []string{filepath.Base(filepath.Dir(dir))}
	case exists(filepath.Join(dir, "dm")):
		b.Kind = "dm"
		b.Under = slaves(dir)
	case exists(filepath.Join(dir, "md")):
		b.Kind = "md"
		b.Under = slaves(dir)
	}
	return b
}

func slaves(dir string) []string {
	entries, _ := os.ReadDir(filepath.Join(dir, "slaves"))
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Stat reads the device's stat line, keyed by statFields' names.
func (b BlockDevice) Stat() (Snapshot, error) {
	raw, err := os.ReadFile(filepath.Join(b.Dir, "stat"))
	if err != nil {
		return nil, fmt.Errorf("read %s's stat: %w", b.Name, err)
	}
	return parseStat(string(raw))
}

func parseStat(line string) (Snapshot, error) {
	f := strings.Fields(line)
	if len(f) < 11 {
		return nil, fmt.Errorf("parse block stat %q: want at least 11 fields, got %d", line, len(f))
	}
	s := Snapshot{}
	for i, v := range f {
		if i >= len(statFields) {
			break
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("parse block stat field %s: %w", statFields[i], err)
		}
		s[statFields[i]] = n
	}
	return s, nil
}

// ReadBytes is the bytes a stat delta says were read from the device.
func ReadBytes(d Delta) int64 { return d["read_sectors"] * SectorBytes }
