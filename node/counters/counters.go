// Package counters reads the kernel's counters around a measured phase and
// keeps their deltas under the kernel's own names: the RDMA port's
// counters/ and hw_counters/, a netdev's statistics/, a block device's stat
// line, and the process's own resource usage. A file that cannot be read,
// or does not hold one unsigned integer, is left out, never read as 0: a
// device that lacks a counter must not seem to report none.
package counters

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Snapshot is a set of counters by name, as read at one instant.
type Snapshot map[string]uint64

// Delta is what each counter moved between two snapshots, by the
// counter's name. A counter missing from either side is left out.
type Delta map[string]int64

// Sub returns after − before for every counter both hold. A counter that
// went backwards (a reset, or a 32-bit counter that wrapped) gives a
// negative delta, which the caller can tell from a real figure.
func Sub(before, after Snapshot) Delta {
	d := make(Delta, len(after))
	for name, a := range after {
		if b, ok := before[name]; ok {
			d[name] = int64(a - b)
		}
	}
	return d
}

// Nonzero returns the names of the counters that moved, sorted.
func (d Delta) Nonzero() []string {
	var names []string
	for n, v := range d {
		if v != 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// ReadDir reads every file of dir that holds one unsigned integer, keyed by
// prefix + the file's name. A missing dir is no error (the device has no
// such counters); any other failure to list it is.
func ReadDir(dir, prefix string, into Snapshot) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read counters in %s: %w", dir, err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		v, ok := readUint(filepath.Join(dir, e.Name()))
		if ok {
			into[prefix+e.Name()] = v
		}
	}
	return nil
}

func readUint(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// RDMAPort reads the port's counters/ and hw_counters/ under sysfs (the
// /sys mount, "/sys" on a host), keyed "counters/NAME" and
// "hw_counters/NAME". The device's own hw_counters/ (outside the port),
// where a driver keeps some, are keyed "device/hw_counters/NAME".
func RDMAPort(sysfs, dev string, port int) (Snapshot, error) {
	base := filepath.Join(sysfs, "class", "infiniband", dev)
	pdir := filepath.Join(base, "ports", strconv.Itoa(port))
	if _, err := os.Stat(pdir); err != nil {
		return nil, fmt.Errorf("read counters of %s port %d: %w", dev, port, err)
	}
	s := Snapshot{}
	for _, d := range []struct{ dir, prefix string }{
		{filepath.Join(pdir, "counters"), "counters/"},
		{filepath.Join(pdir, "hw_counters"), "hw_counters/"},
		{filepath.Join(base, "hw_counters"), "device/hw_counters/"},
	} {
		if err := ReadDir(d.dir, d.prefix, s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Netdev reads /sys/class/net/IFACE/statistics, keyed by the file's name.
func Netdev(sysfs, iface string) (Snapshot, error) {
	dir := filepath.Join(sysfs, "class", "net", iface, "statistics")
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("read statistics of %s: %w", iface, err)
	}
	s := Snapshot{}
	return s, ReadDir(dir, "", s)
}
