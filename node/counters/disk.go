package counters

import (
	"context"
	"sync"
	"time"

	"rdmasweep/results"
)

// diskTick is how often a disk group reads its device's stat while the
// point runs, to find when the device read.
const diskTick = 100 * time.Millisecond

// Disk begins counting the block device under file, until the sample ends
// or ctx is done.
func (s *Sample) Disk(ctx context.Context, file string) {
	b, err := BlockDeviceFor(s.sysfs, file)
	if err != nil {
		s.unread["disk"] = err.Error()
		return
	}
	g := &diskGroup{dev: b, stop: make(chan struct{}), begun: time.Now()}
	s.begin(g)
	s.disk = &b
	if before, ok := s.before[g.name()]; ok {
		go g.watch(ctx, before["read_sectors"])
	}
}

// DiskMark is the sample's disk at a moment, from which Since counts.
type DiskMark struct {
	dev     *BlockDevice
	sectors uint64
}

// DiskMark marks the sample's disk now; without a disk, or its stat,
// the mark counts nothing.
func (s *Sample) DiskMark() DiskMark {
	if s.disk == nil {
		return DiskMark{}
	}
	snap, err := s.disk.Stat()
	if err != nil {
		return DiskMark{}
	}
	return DiskMark{dev: s.disk, sectors: snap["read_sectors"]}
}

// Since is the bytes the disk read since the mark; ok is false when the
// mark or the stat counts nothing.
func (m DiskMark) Since() (bytes int64, ok bool) {
	if m.dev == nil {
		return 0, false
	}
	snap, err := m.dev.Stat()
	if err != nil || snap["read_sectors"] < m.sectors {
		return 0, false
	}
	return int64(snap["read_sectors"]-m.sectors) * SectorBytes, true
}

// diskGroup is the block device's /sys/block/DEV/stat. Besides the
// window's delta, it reads the stat every diskTick to find the span in
// which the device read: from the tick before its first read to the tick
// after its last. Its busy share is over that span, not the window: the
// seconds of a point before its first read (the client starting, on a
// loaded host) and after its last (the client's end, the teardown) are
// no part of what the disk was asked, and counted idle they made a disk
// that read flat out for 42 s look 86 % busy.
type diskGroup struct {
	dev  BlockDevice
	stop chan struct{}
	once sync.Once

	begun time.Time

	mu          sync.Mutex
	first, last time.Time // the reading span; zero before a read is seen
}

func (g *diskGroup) name() string            { return "disk" }
func (g *diskGroup) read() (Snapshot, error) { return g.dev.Stat() }

// watch reads the stat every diskTick, from prev (read_sectors when the
// group began), and notes the span in which read_sectors moved.
func (g *diskGroup) watch(ctx context.Context, prev uint64) {
	tick := time.NewTicker(diskTick)
	defer tick.Stop()
	prevAt := g.begun
	for {
		select {
		case <-tick.C:
		case <-g.stop:
			return
		case <-ctx.Done():
			return
		}
		if snap, err := g.dev.Stat(); err == nil {
			now := time.Now()
			if snap["read_sectors"] != prev {
				g.mu.Lock()
				if g.first.IsZero() {
					g.first = prevAt
				}
				g.last = now
				g.mu.Unlock()
			}
			prev, prevAt = snap["read_sectors"], now
		}
	}
}

// span is the time the busy share is over: the reading span, stretched
// to now when the device was reading at the last tick; the whole window
// when no read was seen.
func (g *diskGroup) span(now time.Time, d Delta) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.first.IsZero() || d["read_sectors"] == 0 {
		return now.Sub(g.begun)
	}
	if now.Sub(g.last) < 2*diskTick {
		return now.Sub(g.first) // still reading at the end
	}
	return g.last.Sub(g.first)
}

func (g *diskGroup) fill(c *results.Counters, d Delta) {
	g.once.Do(func() { close(g.stop) })
	c.DiskDevice = g.dev.String()
	c.DiskReadBytes = ptr(ReadBytes(d))
	c.DiskBusyPct, c.DiskAvgQueue = Busy(d, g.span(time.Now(), d))
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
