package peer

// The disk's ceiling: what the disk under the server's file reads at its
// best, measured by fio with O_DIRECT, so no page cache serves any of it
// and none is left warm, over io_uring. The grid is large blocks (1 MiB
// and 128 KiB), deep queues (32 and 128) and 1 and 4 jobs, each job over
// its own range of the file (--offset_increment), read once. The best
// run's MB/s is the ceiling every disk claim is a share of
// (docs/ssd.md). A buffered read, fio's or node's, competes with the
// kernel's readahead for the same disk; this one does not.

import (
	"fmt"
	"strconv"
)

// CeilingBlocks, CeilingDepths and CeilingJobs are the ceiling's grid.
var (
	CeilingBlocks = []int64{1 << 20, 128 << 10}
	CeilingDepths = []int{32, 128}
	CeilingJobs   = []int{1, 4}
)

// CeilingRuns are the fio argvs of the ceiling of file, whose first size
// bytes are read: one per point of the grid whose jobs' ranges each hold
// a block. None writes (--readonly).
func CeilingRuns(file string, size int64) [][]string {
	var runs [][]string
	for _, bs := range CeilingBlocks {
		for _, depth := range CeilingDepths {
			for _, jobs := range CeilingJobs {
				r := jobRange(size, jobs, bs)
				if r == 0 {
					continue
				}
				runs = append(runs, []string{"fio", "--name=ceiling", "--filename=" + file, "--readonly",
					"--direct=1", "--ioengine=io_uring", "--rw=read",
					"--bs=" + strconv.FormatInt(bs, 10), "--iodepth=" + strconv.Itoa(depth),
					"--numjobs=" + strconv.Itoa(jobs), "--size=" + strconv.FormatInt(r, 10),
					"--offset_increment=" + strconv.FormatInt(r, 10), "--group_reporting",
					"--output-format=json"})
			}
		}
	}
	return runs
}

// Ceiling is the best MB/s (10^6 bytes/s) among the reports of
// CeilingRuns, and which run (its index) gave it.
func Ceiling(reports [][]byte) (mbs float64, best int, err error) {
	if len(reports) == 0 {
		return 0, 0, fmt.Errorf("no ceiling run reported")
	}
	for i, b := range reports {
		r, err := parseFio(b)
		if err != nil {
			return 0, 0, fmt.Errorf("read ceiling run %d's report: %w", i+1, err)
		}
		if r.BandwidthMBs > mbs {
			mbs, best = r.BandwidthMBs, i
		}
	}
	return mbs, best, nil
}
