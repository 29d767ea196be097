package counters

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDiskBusyOverItsReads fakes a device that sits idle for a second,
// reads flat out (io_ticks keeping pace with the clock) for 0.8 s, then
// sits idle for a second more, as a cold point's disk does while its
// client starts on a loaded host and after it ends. disk_busy_pct is over
// the span in which the device read, so it says the disk was the bound:
// at least 60 %, where the whole window would give under 30 %.
func TestDiskBusyOverItsReads(t *testing.T) {
	sysfs, file, stat := fakeDisk(t)
	stat(0, 0)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewSample(sysfs)
	s.Disk(ctx, file)
	if len(s.unread) > 0 {
		t.Fatalf("unread: %v", s.unread)
	}
	window := time.Now()
	time.Sleep(time.Second)
	start := time.Now()
	var sectors, ticks int64
	for time.Since(start) < 800*time.Millisecond {
		time.Sleep(20 * time.Millisecond)
		sectors += 2048
		ticks = time.Since(start).Milliseconds()
		stat(sectors, ticks)
	}
	time.Sleep(time.Second)
	c := s.End(nil)
	wall := time.Since(window)
	if c.DiskBusyPct == nil || c.DiskReadBytes == nil {
		t.Fatalf("disk_busy_pct %v, disk_read_bytes %v; want both", c.DiskBusyPct, c.DiskReadBytes)
	}
	t.Logf("busy %.1f %% over its reads; %d ms of io_ticks over the %s window is %.1f %%", *c.DiskBusyPct, ticks, wall.Round(time.Millisecond), 100*float64(ticks)/float64(wall.Milliseconds()))
	if *c.DiskBusyPct < 60 {
		t.Errorf("disk_busy_pct %.1f, want at least 60: the device read flat out for its whole reading span", *c.DiskBusyPct)
	}
	if *c.DiskReadBytes != sectors*SectorBytes {
		t.Errorf("disk_read_bytes %d, want %d", *c.DiskReadBytes, sectors*SectorBytes)
	}
}

// TestDiskMark: a mark counts what the disk read after it, not the
// preparation's reads before it; a sample without a disk marks nothing.
func TestDiskMark(t *testing.T) {
	sysfs, file, stat := fakeDisk(t)
	stat(0, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewSample(sysfs)
	s.Disk(ctx, file)
	stat(1000, 10) // the preparation
	m := s.DiskMark()
	stat(3000, 30) // the clients' reads
	if n, ok := m.Since(); !ok || n != 2000*SectorBytes {
		t.Errorf("Since = %d, %v; want %d bytes", n, ok, 2000*SectorBytes)
	}
	if n, ok := NewSample(sysfs).DiskMark().Since(); ok {
		t.Errorf("a sample without a disk: Since = %d, ok", n)
	}
}

// fakeDisk is a sysfs whose block device holds file, and a function that
// sets its stat's read sectors and io_ticks.
func fakeDisk(t *testing.T) (sysfs, file string, stat func(sectors, ticks int64)) {
	t.Helper()
	sysfs, file = t.TempDir(), filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(file, &st); err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(sysfs, "block", "fake0")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(sysfs, "dev", "block"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dev, filepath.Join(sysfs, "dev", "block", fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)))); err != nil {
		t.Fatal(err)
	}
	stat = func(sectors, ticks int64) {
		line := fmt.Sprintf("0 0 %d 0 0 0 0 0 0 %d %d\n", sectors, ticks, ticks)
		if err := os.WriteFile(filepath.Join(dev, "stat.tmp"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dev, "stat.tmp"), filepath.Join(dev, "stat")); err != nil {
			t.Fatal(err)
		}
	}
	return sysfs, file, stat
}
