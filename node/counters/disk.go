package counters

import (
	"time"

	"rdmasweep/results"
)

// Disk begins counting the block device under file.
func (s *Sample) Disk(file string) {
	b, err := BlockDeviceFor(s.sysfs, file)
	if err != nil {
		s.unread["disk"] = err.Error()
		return
	}
	s.begin(diskGroup{dev: b, begun: time.Now()})
}

// diskGroup is the block device's /sys/block/DEV/stat, read from begun.
type diskGroup struct {
	dev   BlockDevice
	begun time.Time
}

func (g diskGroup) name() string            { return "disk" }
func (g diskGroup) read() (Snapshot, error) { return g.dev.Stat() }

func (g diskGroup) fill(c *results.Counters, d Delta) {
	c.DiskDevice = g.dev.String()
	c.DiskReadBytes = ptr(ReadBytes(d))
	c.DiskBusyPct, c.DiskAvgQueue = Busy(d, time.Since(g.begun))
}

// Busy is a device's busy share of wall, in % (io_ticks, the ms it had
// I/O in flight, at most 100), and its mean queue over wall
// (time_in_queue, the ms its I/Os waited and ran, summed); nil for no
// wall time.
func Busy(d Delta, wall time.Duration) (pct, queue *float64) {
	ms := float64(wall) / float64(time.Millisecond)
	if ms <= 0 {
		return nil, nil
	}
	p := min(100, 100*float64(d["io_ticks"])/ms)
	q := float64(d["time_in_queue"]) / ms
	return &p, &q
}
