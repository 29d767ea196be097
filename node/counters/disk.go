package counters

import "rdmasweep/results"

// Disk begins counting the block device under file.
func (s *Sample) Disk(file string) {
	b, err := BlockDeviceFor(s.sysfs, file)
	if err != nil {
		s.unread["disk"] = err.Error()
		return
	}
	s.begin(diskGroup{b})
}

// diskGroup is the block device's /sys/block/DEV/stat.
type diskGroup struct{ dev BlockDevice }

func (g diskGroup) name() string            { return "disk" }
func (g diskGroup) read() (Snapshot, error) { return g.dev.Stat() }

func (g diskGroup) fill(c *results.Counters, d Delta) {
	c.DiskDevice = g.dev.String()
	c.DiskReadBytes = ptr(ReadBytes(d))
}
