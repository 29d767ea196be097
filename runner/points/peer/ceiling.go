package peer

// The disk's ceiling: what the disk under the server's file reads at its
// best, measured by fio with O_DIRECT, so no page cache serves any of it
// and none is left warm, over io_uring. A short probe (1 MiB blocks, 4 in
// flight, one job) comes first; then the grid: large blocks (1 MiB and
// 128 KiB), deep queues (32 and 128) and 1 and 4 jobs, each job over its
// own range of the file (--offset_increment), read once, leaving out the
// runs that would keep more bytes in flight than the probe read in a
// second: a slow or throttled device is not sent a queue it cannot take.
// The probe reads for CeilingRuntime after CeilingRamp (time-based,
// round its range again if it gets there first): the start, where a
// throttle's bucket is still full, is not in the figure. The grid's runs
// read their ranges once, for at most CeilingGridRuntime: in the guests'
// emulated NVMe, deep queues held for the whole of a time-based run
// under a loaded host came back as I/O errors.
// The best run's MB/s is the ceiling every disk claim is a share of
// (docs/ssd.md). A buffered read, fio's or node's, competes with the
// kernel's readahead for the same disk; this one does not.

import (
	"fmt"
	"strconv"
)

// CeilingBlocks, CeilingDepths and CeilingJobs are the ceiling's grid;
// CeilingProbeBlock and CeilingProbeDepth its probe.
var (
	CeilingBlocks = []int64{1 << 20, 128 << 10}
	CeilingDepths = []int{32, 128}
	CeilingJobs   = []int{1, 4}
)

// CeilingMaxRequests caps a grid run's requests in flight (jobs ×
// depth): an NVMe's sequential reads are at their best well below it, and
// in the guests' emulated NVMe under a loaded host, 512 in flight lost
// requests for good (nvme timeouts, then resets that never completed).
const CeilingMaxRequests = 128

const (
	CeilingProbeBlock  = 1 << 20
	CeilingProbeDepth  = 4
	CeilingRamp        = "250ms"
	CeilingRuntime     = "500ms"
	CeilingGridRuntime = "2s"
)

// CeilingProbe is the fio argv of the ceiling's probe over the first size
// bytes of file, or nil when the file holds no probe block.
func CeilingProbe(file string, size int64) []string {
	if size < CeilingProbeBlock {
		return nil
	}
	argv := ceilingArgv(file, CeilingProbeBlock, CeilingProbeDepth, 1, size/CeilingProbeBlock*CeilingProbeBlock)
	return append(argv[:len(argv)-1], "--time_based", "--ramp_time="+CeilingRamp, "--runtime="+CeilingRuntime, "--output-format=json")
}

// CeilingRuns are the fio argvs of the ceiling's grid over the first size
// bytes of file: one per point of the grid whose jobs' ranges each hold a
// block, whose bytes in flight (jobs × depth × block) are at most
// inFlight, and whose requests in flight are at most CeilingMaxRequests.
// None writes (--readonly).
func CeilingRuns(file string, size, inFlight int64) [][]string {
	var runs [][]string
	for _, bs := range CeilingBlocks {
		for _, depth := range CeilingDepths {
			for _, jobs := range CeilingJobs {
				r := jobRange(size, jobs, bs)
				if r == 0 || int64(jobs)*int64(depth)*bs > inFlight || jobs*depth > CeilingMaxRequests {
					continue
				}
				runs = append(runs, ceilingArgv(file, bs, depth, jobs, r))
			}
		}
	}
	return runs
}

// ceilingArgv reads jobs ranges of r bytes of file, each its own job, in
// bs blocks, depth in flight.
func ceilingArgv(file string, bs int64, depth, jobs int, r int64) []string {
	return []string{"fio", "--name=ceiling", "--filename=" + file, "--readonly",
		"--direct=1", "--ioengine=io_uring", "--rw=read",
		"--bs=" + strconv.FormatInt(bs, 10), "--iodepth=" + strconv.Itoa(depth),
		"--numjobs=" + strconv.Itoa(jobs), "--size=" + strconv.FormatInt(r, 10),
		"--offset_increment=" + strconv.FormatInt(r, 10), "--group_reporting",
		"--runtime=" + CeilingGridRuntime, "--output-format=json"}
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
