package peer

// fio (3.33), run on the server's host against the server's own file: one
// job (fio), or node's populate readers as jobs over disjoint ranges
// (fio_matched), no server process. The mapping is fioMap, below. Beside it:
//
//	file -> --filename, with --readonly
//	pattern sequential|random -> --rw=read|randread
//	duration -> --runtime, --time_based
//	total (no duration) -> --io_size (fio wraps around --size as node does)
//	cache warm -> --invalidate=0; cold -> fio's default (invalidate=1),
//	              after the node's own cold-cache step
//
// fio reads through the page cache, as node does: no --direct. O_DIRECT
// is no plan field, since node has no such mode to compare it with.
//
// --ioengine=io_uring: the node reads through the page cache, and so does
// fio without --direct. libaio is asynchronous only with O_DIRECT: on a
// buffered file each io_submit blocks until its read is done, so iodepth
// would do nothing. io_uring keeps iodepth reads in flight either way.
// --lat_percentiles=1 gives percentiles of the whole latency (submission
// to completion), which is what node measures, not only of completion.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"rdmasweep/results"
	"rdmasweep/results/param"
)

// Fio reads the server's own file on its host, as a plan's workload
// names it: one job.
const Fio = "fio"

// FioMatched reads it as node's populate does: results.PopulateReaders
// jobs, each over its own range of the file.
const FioMatched = "fio_matched"

var fio = Tool{Name: Fio, Binary: "fio", Debian: "fio", RHEL: "fio", Version: "3.33",
	Roles: []string{"server"}, Map: fioMap, OnServerHost: true, ReadsFile: true, ClockStep: time.Millisecond,
	build: func(p Params) Commands { return buildFio(p, 1) }, parse: parseFio}

var fioMatched = Tool{Name: FioMatched, Binary: "fio", Debian: "fio", RHEL: "fio", Version: "3.33",
	Roles: []string{"server"}, Map: fioMatchedMap(), OnServerHost: true, ReadsFile: true, ClockStep: time.Millisecond,
	build: func(p Params) Commands { return buildFio(p, results.PopulateReaders) }, parse: parseFio}

// fioMatchedMap is fioMap, with each job's range holding a block.
func fioMatchedMap() []Mapping {
	m := slices.Clone(fioMap)
	for i := range m {
		if m[i].Param != param.BlockSize {
			continue
		}
		whole := m[i].Refuse
		m[i].Refuse = func(p Params) string {
			if why := whole(p); why != "" {
				return why
			}
			return refuseIf(p.FileSize > 0 && jobRange(p.FileSize, results.PopulateReaders, p.BlockSize) == 0,
				"%d jobs each read their own range of file_size %d, and a block of %d bytes does not fit in one", results.PopulateReaders, p.FileSize, p.BlockSize)
		}
	}
	return m
}

// jobRange is each of jobs' range of a file of size bytes: an equal
// share, in whole blocks of bs; 0 when a share holds no block.
func jobRange(size int64, jobs int, bs int64) int64 {
	if jobs < 1 || bs < 1 {
		return 0
	}
	return size / int64(jobs) / bs * bs
}

// fioMap is how fio takes the plan's parameters.
var fioMap = []Mapping{
	{Param: param.File, Option: "--filename", Refuse: func(p Params) string {
		return refuseIf(p.File == "", "fio reads the server's file, and the point names none")
	}},
	{Param: param.FileSize, Option: "--size", Refuse: func(p Params) string { // the served bytes
		return refuseIf(p.FileSize <= 0, "fio needs the served size (got %d)", p.FileSize)
	}},
	{Param: param.BlockSize, Option: "--bs", Refuse: func(p Params) string {
		return refuseIf(p.FileSize > 0 && p.BlockSize > p.FileSize, "a block of %d bytes does not fit in file_size %d", p.BlockSize, p.FileSize)
	}},
	{Param: param.QueueDepth, Option: "--iodepth"},
	{Param: param.Pattern, Option: "--rw"},
	{Param: param.Duration, Option: "--runtime", Refuse: func(p Params) string {
		return refuseIf(p.Duration%time.Millisecond != 0 || p.Warmup%time.Millisecond != 0,
			"fio takes whole milliseconds (duration %s, warmup %s)", p.Duration, p.Warmup)
	}},
	{Param: param.Total, Option: "--io_size"},
	{Param: param.Warmup, Option: "--ramp_time"},
	{Param: param.Cache, Option: "--invalidate"},
	{Param: param.Verify, Refuse: func(p Params) string {
		return refuseIf(p.Verify, "fio checks only data it wrote itself, and --readonly writes none")
	}},
	{Param: param.Registration, Refuse: func(p Params) string {
		return refuseIf(p.Registration == "odp", "fio registers no memory")
	}},
	{Param: param.QPs, Refuse: func(p Params) string {
		return refuseIf(p.qps() > 1, "fio reads the file in one job; qps > 1 has no fio mapping")
	}},
	{Param: param.Device, Ignored: true},
	{Param: param.IBPort, Ignored: true},
	{Param: param.GIDIndex, Ignored: true},
	{Param: param.MaxRdAtomic, Ignored: true},
}

// buildFio is fio's argv for p with jobs jobs: one reads the whole file;
// more each read their own range of it (--offset_increment), totals
// shared alike, and report as one (--group_reporting).
func buildFio(p Params, jobs int) Commands {
	rw := "read"
	if p.Pattern == "random" {
		rw = "randread"
	}
	size, total := p.FileSize, p.total()
	if jobs > 1 {
		size = jobRange(p.FileSize, jobs, p.BlockSize)
		total = max(total/int64(jobs)/p.BlockSize, 1) * p.BlockSize
	}
	args := []string{"fio", "--name=rdmasweep", "--filename=" + p.File, "--readonly",
		"--ioengine=io_uring", "--rw=" + rw,
		"--bs=" + strconv.FormatInt(p.BlockSize, 10),
		"--iodepth=" + strconv.Itoa(max(p.QueueDepth, 1)),
		"--size=" + strconv.FormatInt(size, 10)}
	if jobs > 1 {
		args = append(args, "--numjobs="+strconv.Itoa(jobs), "--offset_increment="+strconv.FormatInt(size, 10), "--group_reporting")
	}
	if p.Duration > 0 {
		args = append(args, fmt.Sprintf("--runtime=%dms", p.Duration.Milliseconds()), "--time_based")
	} else {
		args = append(args, "--io_size="+strconv.FormatInt(total, 10))
	}
	if p.Warmup > 0 {
		args = append(args, fmt.Sprintf("--ramp_time=%dms", p.Warmup.Milliseconds()))
	}
	if p.Cache == "warm" {
		args = append(args, "--invalidate=0")
	}
	args = append(args, "--lat_percentiles=1", "--output-format=json")
	return Commands{Client: args, ClientHost: "server"}
}

// fioReport is the part of fio's JSON that Parse reads.
type fioReport struct {
	Jobs []struct {
		Error int `json:"error"`
		Read  struct {
			IOBytes int64   `json:"io_bytes"`
			Runtime int64   `json:"runtime"` // ms
			IOPS    float64 `json:"iops"`
			TotalIO int64   `json:"total_ios"`
			Lat     struct {
				Max        float64            `json:"max"`
				Mean       float64            `json:"mean"`
				N          int64              `json:"N"`
				Percentile map[string]float64 `json:"percentile"`
			} `json:"lat_ns"`
		} `json:"read"`
		UsrCPU float64 `json:"usr_cpu"`
		SysCPU float64 `json:"sys_cpu"`
	} `json:"jobs"`
}

func parseFio(b []byte) (Result, error) {
	// fio may print notes (e.g. "note: both iodepth >= 1 and
	// synchronous I/O engine are selected") before the JSON.
	if i := indexJSON(b); i > 0 {
		b = b[i:]
	}
	var rep fioReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return Result{}, err
	}
	if len(rep.Jobs) != 1 {
		return Result{}, fmt.Errorf("%d jobs, want the one job (or group) rdmasweep runs", len(rep.Jobs))
	}
	j := rep.Jobs[0]
	if j.Error != 0 {
		return Result{}, fmt.Errorf("fio's job failed with error %d", j.Error)
	}
	rd := j.Read
	if rd.IOBytes <= 0 || rd.Runtime <= 0 {
		return Result{}, fmt.Errorf("the job read nothing (io_bytes %d in %d ms)", rd.IOBytes, rd.Runtime)
	}
	r := Result{Bytes: rd.IOBytes, Seconds: float64(rd.Runtime) / 1e3}
	r.BandwidthMBs = float64(r.Bytes) / r.Seconds / 1e6
	if rd.IOPS > 0 && finite(rd.IOPS) {
		r.IOPS = ptr(rd.IOPS)
	}
	pc := rd.Lat.Percentile
	p50, ok50 := pc["50.000000"]
	p99, ok99 := pc["99.000000"]
	p999, ok999 := pc["99.900000"]
	if rd.Lat.N > 0 && ok50 && ok99 && ok999 && p50 >= 0 && p99 >= 0 && p999 >= 0 && rd.Lat.Mean >= 0 && rd.Lat.Max >= 0 {
		// fio's percentiles are its histogram buckets' values, which can
		// sit a little above the exact maximum; cap them there, as node's
		// own histogram summary does.
		mx := rd.Lat.Max
		r.Latency = &Latency{AvgUs: rd.Lat.Mean / 1e3, P50Us: min(p50, mx) / 1e3, P99Us: min(p99, mx) / 1e3, P999Us: min(p999, mx) / 1e3, MaxUs: mx / 1e3}
	}
	// usr_cpu and sys_cpu are the job's own getrusage times over its
	// runtime, 100 = one CPU.
	r.Reported = reported(map[string]float64{"usr_cpu": j.UsrCPU, "sys_cpu": j.SysCPU})
	return r, nil
}

// indexJSON returns where the first line that opens a JSON object starts.
func indexJSON(b []byte) int {
	for i := 0; i < len(b); {
		if b[i] == '{' {
			return i
		}
		j := i
		for j < len(b) && b[j] != '\n' {
			j++
		}
		i = j + 1
	}
	return -1
}
