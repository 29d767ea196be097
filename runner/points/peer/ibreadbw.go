package peer

// ib_read_bw (perftest 4.5). Both sides get the same flags; the client
// adds the server's address. The mapping is ibReadBWMap, below. Beside it:
//
//	queue_depth, qps -> -t the depth per QP (perftest's tx depth is per
//	    QP, node's queue_depth the total), -q the QPs.
//	rdma.cq_moderation -> -Q always, the value node uses at the same
//	    point (results.CQModeration): perftest's own default differs above
//	    8 KiB (docs/rdma.md).
//	duration d, warmup w -> -D d+2w --margin w: perftest measures between
//	    its two margins, so the measured window is d and -D > 2*margin
//	    always holds.
//	total t (no duration) -> -n ceil(t / (block_size*qps)), per QP.
//	device, ib_port, gid_index at auto -> -d, -i, -x of what node chose
//	    on that side's host (Params.Chosen), so perftest does not take
//	    GID 0. With rdma.connect cm (-R) rdma_cm resolves all three from
//	    the address, as it does for node, and traffic_class is -T, the
//	    cm_id's TOS: perftest takes --tclass only over its own exchange.
//
// --out_json writes a file, never stdout: each side writes its own with
// --out_json_file. perftest 4.5's "JSON" is not JSON: its keys and some
// values are bare words, and every entry ends in a comma, so it has its
// own reader (relaxedJSON). --cpu_util, the host's share, is passed only
// with -D: perftest measures it only in duration mode (and says so on
// stderr otherwise). It goes to the counters sidecar, not the row.

import (
	"fmt"
	"path"
	"strconv"

	"rdmasweep/results"
	"rdmasweep/results/param"
)

// IBReadBW is perftest's RDMA READ bandwidth test, as a plan's workload
// names it.
const IBReadBW = "ib_read_bw"

var ibReadBW = Tool{Name: IBReadBW, Binary: "ib_read_bw", Debian: "perftest", RHEL: "perftest", Version: "4.5",
	Transport: results.TransportRDMA, Roles: []string{"server", "client"}, HasServer: true, Map: ibReadBWMap,
	build: buildIBReadBW, parse: parseIBReadBW}

// ib_read_bw's limits (perftest_parameters.h, 4.5-0.17).
const (
	ibMinIters = 5
	ibMaxIters = 100000000
	ibMaxTx    = 15000
	ibMaxSize  = 1<<31 - 1 // UINT_MAX/2
)

// ibReadBWMap is how ib_read_bw takes the plan's parameters.
var ibReadBWMap = []Mapping{
	{Param: param.BlockSize, Option: "-s", Refuse: func(p Params) string {
		return refuseIf(p.BlockSize > ibMaxSize, "ib_read_bw's -s takes at most %d bytes (got %d)", ibMaxSize, p.BlockSize)
	}},
	{Param: param.QPs, Option: "-q"},
	{Param: param.QueueDepth, Option: "-t", Refuse: func(p Params) string {
		per := results.DepthPerQP(p.QueueDepth, p.qps())
		return refuseIf(per > ibMaxTx, "ib_read_bw's -t, the depth per QP, takes at most %d (got %d)", ibMaxTx, per)
	}},
	{Param: param.MaxRdAtomic, Option: "-o"}, // auto: none, the device's maximum
	{Param: param.CQModeration, Option: "-Q"},
	{Param: param.Device, Option: "-d"},             // auto: node's device on that host (Params.Chosen)
	{Param: param.IBPort, Option: "-i"},             // auto: node's port there
	{Param: param.GIDIndex, Option: "-x"},           // auto: the GID index node resolved there
	{Param: param.Connect, Option: "-R"},            // cm: rdma_cm, ready when its cm_id listens
	{Param: param.TrafficClass, Option: "--tclass"}, // cm: -T, the TOS, as node sets it; auto: none, as node's
	{Param: param.Port, Option: "-p"},               // 0: perftest's 18515
	{Param: param.Duration, Option: "-D", Refuse: func(p Params) string {
		_, whole := wholeSeconds(p.Duration)
		return refuseIf(p.Duration > 0 && !whole, "ib_read_bw's -D takes whole seconds (got %s)", p.Duration)
	}},
	{Param: param.Warmup, Option: "--margin", Refuse: func(p Params) string {
		if _, whole := wholeSeconds(p.Warmup); p.Duration > 0 && !whole {
			return fmt.Sprintf("ib_read_bw's --margin takes whole seconds (got %s)", p.Warmup)
		}
		return refuseIf(p.Duration <= 0 && p.Warmup > 0, "ib_read_bw warms up only in a duration-based run (its --margin needs -D); set duration, or no warmup")
	}},
	{Param: param.Total, Option: "-n", Refuse: func(p Params) string {
		if p.Duration > 0 || p.BlockSize <= 0 {
			return ""
		}
		n := ibIters(p)
		return refuseIf(n < ibMinIters || n > ibMaxIters, "ib_read_bw's -n must be %d..%d reads per QP, and total %d at block_size %d over %d QPs is %d", ibMinIters, ibMaxIters, p.total(), p.BlockSize, p.qps(), n)
	}},
	{Param: param.Verify, Refuse: func(p Params) string {
		return refuseIf(p.Verify, "ib_read_bw reads its own buffer, not the server's file, so there are no bytes to verify")
	}},
	{Param: param.Pattern, Refuse: func(p Params) string {
		return refuseIf(p.Pattern == "random", "ib_read_bw always reads the same buffer from its start; it has no random order")
	}},
	{Param: param.Registration, Refuse: func(p Params) string {
		return refuseIf(p.Registration == "odp", "ib_read_bw registers its own anonymous buffer; odp on it says nothing about the file")
	}},
	{Param: param.Cache, Ignored: true},
	{Param: param.File, Ignored: true},
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
		add("-t", strconv.Itoa(results.DepthPerQP(p.QueueDepth, p.qps())))
	}
	if p.RDMAMaxRdAtomic > 0 {
		add("-o", strconv.Itoa(p.RDMAMaxRdAtomic))
	}
	if p.QueueDepth > 0 {
		add("-Q", strconv.Itoa(results.CQModeration(p.RDMACQMod, p.QueueDepth, p.qps(), false)))
	}
	cm := p.RDMAConnect == results.ConnectCM
	dev, port, gid := p.RDMADevice, p.RDMAIBPort, p.RDMAGIDIndex
	if cm { // rdma_cm resolves device, port and GID from the address, for both
		dev, port, gid = "", 0, -1
	} else if c := p.Chosen; c != nil { // node's own choice where the plan says auto
		if dev == "" {
			dev = c.Device
		}
		if port <= 0 {
			port = c.IBPort
		}
		if gid < 0 {
			gid = c.GIDIndex
		}
	}
	if dev != "" {
		add("-d", dev)
	}
	if port > 0 {
		add("-i", strconv.Itoa(port))
	}
	if gid >= 0 {
		add("-x", strconv.Itoa(gid))
	}
	// The GRH's traffic class: over perftest's own exchange as the
	// address vector's, over rdma_cm as the cm_id's TOS, as node sets it.
	switch {
	case cm && p.RDMATClass != nil:
		add("-R", "-T", strconv.Itoa(*p.RDMATClass))
	case cm:
		add("-R")
	case p.RDMATClass != nil:
		add("--tclass", strconv.Itoa(*p.RDMATClass))
	}
	tcpPort := p.Port
	if tcpPort == 0 {
		tcpPort = 18515 // perftest's DEF_PORT
	}
	add("-p", strconv.Itoa(tcpPort))
	if p.Duration > 0 {
		d, _ := wholeSeconds(p.Duration)
		w, _ := wholeSeconds(p.Warmup)
		add("-D", strconv.FormatInt(d+2*w, 10), "--margin", strconv.FormatInt(w, 10), "--cpu_util")
	} else {
		add("-n", strconv.FormatInt(ibIters(p), 10))
	}
	report := func(role string) string {
		tag := ""
		if p.ReportTag != "" {
			tag = p.ReportTag + "."
		}
		return path.Join(p.OutDir, "ib_read_bw."+tag+role+".json")
	}
	srvReport, cliReport := report("server"), report("client")
	server := append([]string{"ib_read_bw"}, args...)
	server = append(server, "--out_json", "--out_json_file="+srvReport)
	client := append([]string{"ib_read_bw"}, args...)
	client = append(client, "--out_json", "--out_json_file="+cliReport, p.ServerAddr)
	return Commands{Server: server, Client: client, ClientHost: "client", ReadyPort: tcpPort, ReadyCM: cm, ClientReport: cliReport, ServerReport: srvReport}
}

// ibReport is what ib_read_bw's --out_json file holds under "results".
type ibReport struct {
	msgSize  int64
	iters    int64
	bwAvgMiB float64
	msgRate  float64 // millions of reads per second
	cpuUtil  *float64
}

func parseIBReadBW(b []byte) (Result, error) {
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
	// /proc/stat, as a percentage of all its CPUs: not ib_read_bw's own.
	if rep.cpuUtil != nil {
		r.Reported = map[string]float64{"CPU_util": *rep.cpuUtil}
	}
	return r, nil
}
