package peer

// ib_read_bw (perftest 4.5). Both sides get the same flags; the client
// adds the server's address. The mapping:
//
//	block_size -> -s          queue_depth -> -t       qps -> -q
//	rdma.max_rd_atomic -> -o  rdma.device -> -d       rdma.ib_port -> -i
//	rdma.cq_moderation -> -Q  (auto, the default, gives none: perftest's
//	                          own default, which node's auto follows)
//	rdma.gid_index -> -x      port -> -p
//	duration d, warmup w -> -D d+2w --margin w   (perftest measures
//	                          between its two margins, so the measured
//	                          window is d and -D > 2*margin always holds)
//	total t (no duration) -> -n ceil(t / (block_size*qps))  (per QP)
//
// --out_json writes a file, never stdout: each side writes its own with
// --out_json_file. perftest 4.5's "JSON" is not JSON: its keys and some
// values are bare words, and every entry ends in a comma, so it has its
// own reader (relaxedJSON). --cpu_util is passed only with -D: perftest
// measures it only in duration mode (and says so on stderr otherwise).

import (
	"fmt"
	"path"
	"strconv"
)

// ib_read_bw's limits (perftest_parameters.h, 4.5-0.17).
const (
	ibMinIters = 5
	ibMaxIters = 100000000
	ibMaxTx    = 15000
	ibMaxSize  = 1<<31 - 1 // UINT_MAX/2
)

func checkIBReadBW(p Params) []*ParamError {
	c := &paramErrs{peer: IBReadBW}
	c.common(p)
	if p.Verify {
		c.add("verify", "ib_read_bw reads its own buffer, not the server's file, so there are no bytes to verify")
	}
	if p.Pattern == "random" {
		c.add("pattern", "ib_read_bw always reads the same buffer from its start; it has no random order")
	}
	if p.Registration == "odp" {
		c.add("registration", "ib_read_bw registers its own anonymous buffer; odp on it says nothing about the file")
	}
	if p.Direct {
		c.add("direct", "only fio reads the file with O_DIRECT")
	}
	if p.BlockSize > ibMaxSize {
		c.add("block_size", "ib_read_bw's -s takes at most %d bytes (got %d)", ibMaxSize, p.BlockSize)
	}
	if p.QueueDepth > ibMaxTx {
		c.add("queue_depth", "ib_read_bw's -t takes at most %d (got %d)", ibMaxTx, p.QueueDepth)
	}
	if p.Duration > 0 {
		if _, ok := wholeSeconds(p.Duration); !ok {
			c.add("duration", "ib_read_bw's -D takes whole seconds (got %s)", p.Duration)
		}
		if _, ok := wholeSeconds(p.Warmup); !ok {
			c.add("warmup", "ib_read_bw's --margin takes whole seconds (got %s)", p.Warmup)
		}
	} else {
		if p.Warmup > 0 {
			c.add("warmup", "ib_read_bw warms up only in a duration-based run (its --margin needs -D); set duration, or no warmup")
		}
		if p.BlockSize > 0 {
			if n := ibIters(p); n < ibMinIters || n > ibMaxIters {
				c.add("total", "ib_read_bw's -n must be %d..%d reads per QP, and total %d at block_size %d over %d QPs is %d", ibMinIters, ibMaxIters, p.total(), p.BlockSize, p.qps(), n)
			}
		}
	}
	return c.errs
}

// ibIters is -n: the reads per QP that cover the point's total.
func ibIters(p Params) int64 {
	per := p.BlockSize * int64(p.qps())
	return (p.total() + per - 1) / per
}

func buildIBReadBW(p Params) Commands {
	var args []string
	add := func(a ...string) { args = append(args, a...) }
	add("-s", strconv.FormatInt(p.BlockSize, 10), "-q", strconv.Itoa(p.qps()))
	if p.QueueDepth > 0 {
		add("-t", strconv.Itoa(p.QueueDepth))
	}
	if p.RDMAMaxRdAtomic > 0 {
		add("-o", strconv.Itoa(p.RDMAMaxRdAtomic))
	}
	if p.RDMACQMod > 0 {
		add("-Q", strconv.Itoa(p.RDMACQMod))
	}
	if p.RDMADevice != "" {
		add("-d", p.RDMADevice)
	}
	if p.RDMAIBPort > 0 {
		add("-i", strconv.Itoa(p.RDMAIBPort))
	}
	if p.RDMAGIDIndex >= 0 {
		add("-x", strconv.Itoa(p.RDMAGIDIndex))
	}
	port := p.Port
	if port == 0 {
		port = 18515 // perftest's DEF_PORT
	}
	add("-p", strconv.Itoa(port))
	if p.Duration > 0 {
		d, _ := wholeSeconds(p.Duration)
		w, _ := wholeSeconds(p.Warmup)
		add("-D", strconv.FormatInt(d+2*w, 10), "--margin", strconv.FormatInt(w, 10), "--cpu_util")
	} else {
		add("-n", strconv.FormatInt(ibIters(p), 10))
	}
	report := func(role string) string { return path.Join(p.OutDir, "ib_read_bw."+role+".json") }
	srvReport, cliReport := report("server"), report("client")
	server := append([]string{"ib_read_bw"}, args...)
	server = append(server, "--out_json", "--out_json_file="+srvReport)
	client := append([]string{"ib_read_bw"}, args...)
	client = append(client, "--out_json", "--out_json_file="+cliReport, p.ServerAddr)
	return Commands{Server: server, Client: client, ClientHost: "client", ReadyPort: port, ClientReport: cliReport, ServerReport: srvReport}
}

// ibReport is what ib_read_bw's --out_json file holds under "results".
type ibReport struct {
	msgSize  int64
	iters    int64
	bwAvgMiB float64
	msgRate  float64 // millions of reads per second
	cpuUtil  *float64
}

func parseIBReadBW(b []byte, o ParseOptions) (Result, error) {
	doc, err := parseRelaxed(b)
	if err != nil {
		return Result{}, err
	}
	res, ok := doc["results"].(map[string]any)
	if !ok {
		return Result{}, fmt.Errorf("no results object")
	}
	var rep ibReport
	var errs []string
	num := func(key string) float64 {
		v, ok := res[key].(float64)
		if !ok {
			errs = append(errs, key)
		}
		return v
	}
	msg, iters := num("MsgSize"), num("n_iterations")
	rep.bwAvgMiB, rep.msgRate = num("BW_average"), num("MsgRate")
	if len(errs) > 0 {
		return Result{}, fmt.Errorf("results lack the numbers %v", errs)
	}
	if !(msg >= 1 && iters >= 1 && msg <= 1<<40 && iters <= 1<<50 && rep.bwAvgMiB > 0 && finite(rep.bwAvgMiB)) {
		return Result{}, fmt.Errorf("results hold no measurement (MsgSize %v, n_iterations %v, BW_average %v)", msg, iters, rep.bwAvgMiB)
	}
	rep.msgSize, rep.iters = int64(msg), int64(iters)
	if v, ok := res["CPU_util"].(float64); ok && v >= 0 && v <= 100 {
		rep.cpuUtil = &v
	}
	r := Result{Bytes: rep.msgSize * rep.iters}
	// BW_average is MiB/s (perftest's "MB/sec" is 2^20); the seconds
	// follow from it, since the report has no duration of its own.
	bw := rep.bwAvgMiB * (1 << 20)
	r.Seconds = float64(r.Bytes) / bw
	r.BandwidthMBs = bw / 1e6
	if rep.msgRate > 0 && finite(rep.msgRate) {
		r.IOPS = ptr(rep.msgRate * 1e6)
	}
	// CPU_util is the host's user time over user+idle time, from
	// /proc/stat, as a percentage of all its CPUs.
	if rep.cpuUtil != nil && o.ClientCPUs > 0 {
		r.CPUClient = ptr(*rep.cpuUtil / 100 * float64(o.ClientCPUs))
	}
	return r, nil
}
