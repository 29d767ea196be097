package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"rdmasweep/node/session"
	"rdmasweep/node/transport"
	"rdmasweep/results"
)

type readOptions struct {
	roleFlags
	server     string
	blockSize  sizeValue
	queueDepth int
	qps        int
	pattern    string
	total      sizeValue
	duration   time.Duration
	warmup     warmupValue
	warmupMax  time.Duration
	verify     bool
	barrier    bool
	interval   time.Duration
	rate       string
	arrivals   string

	relaxedOrdering bool
}

func (o *readOptions) addFlags(fs *flag.FlagSet) {
	o.roleFlags.addFlags(fs)
	fs.StringVar(&o.server, "server", "", "HOST:PORT of node serve")
	o.blockSize = 1 << 20
	fs.Var(&o.blockSize, "block-size", "bytes per read, e.g. 1MiB")
	fs.IntVar(&o.queueDepth, "queue-depth", 1, "reads in flight")
	fs.IntVar(&o.qps, "qps", 1, "RDMA queue pairs (tcp uses one connection)")
	fs.StringVar(&o.pattern, "pattern", "sequential", "sequential or random")
	fs.Var(&o.total, "total", "bytes to read (0: the region's size)")
	fs.DurationVar(&o.duration, "duration", 0, "read for this long instead of --total")
	fs.Var(&o.warmup, "warmup", "read this long first, unmeasured; steady: until the bandwidth is steady, at most --warmup-max")
	fs.DurationVar(&o.warmupMax, "warmup-max", 30*time.Second, "with --warmup steady, the longest warmup")
	fs.BoolVar(&o.verify, "verify", false, "check every byte against the file's pattern")
	fs.BoolVar(&o.barrier, "barrier", false, "once connected and registered, print ready and wait for a go control line before reading (with --control-stdin)")
	fs.StringVar(&o.rate, "rate", "", "open loop: the load to offer, e.g. 200MB/s or 50000iops (none: closed loop)")
	fs.StringVar(&o.arrivals, "arrivals", "fixed", "with --rate: when reads are due, fixed or poisson")
	fs.DurationVar(&o.interval, "interval", 0, "print what was read in each interval of the measured phase (0: none)")
	fs.IntVar(&o.rdma.MaxRdAtomic, "max-rd-atomic", 0, "RDMA READs in flight per QP on the wire (0: the most both sides allow); --queue-depth may be deeper")
	fs.IntVar(&o.rdma.CQModeration, "cq-moderation", 0, "signal every Nth RDMA READ per QP (0: max(1, the queue depth per QP / 4)); latency is then timed on the signalled ones. With --rate every READ is signalled")
	fs.BoolVar(&o.relaxedOrdering, "relaxed-ordering", true, "register the RDMA read buffer with IBV_ACCESS_RELAXED_ORDERING (--relaxed-ordering=false: without)")
}

func (o *readOptions) paramRole() string { return "read" }

// check checks what checkParamFlags does not: the schema bounds each
// parameter's flag (block size, depth, QPs, pattern, the RDMA and fabric
// fields) before it runs.
func (o *readOptions) check() error {
	switch {
	case o.server == "":
		return usagef("read: --server is required")
	case o.total > 0 && o.duration > 0:
		return usagef("read: --total and --duration cannot both be non-zero")
	case o.interval < 0:
		return usagef("read: --interval cannot be negative")
	case o.warmup.d < 0:
		return usagef("read: --warmup cannot be negative")
	case o.barrier && !o.ControlStdin:
		return usagef("read: --barrier waits for a go line on the control stdin: it needs --control-stdin")
	case o.rate != "" && o.transport == results.TransportRDMA && o.rdma.CQModeration > 1:
		return usagef("read: --rate with --cq-moderation %d: an open loop signals every READ, to time each from its due time; drop --cq-moderation", o.rdma.CQModeration)
	case o.rate == "" && o.arrivals != "fixed":
		return usagef("read: --arrivals %s needs --rate", o.arrivals)
	}
	o.rdma.NoRelaxedOrdering = !o.relaxedOrdering
	return checkFormat(o.format)
}

func runRead(ctx context.Context, e *env, args []string) error {
	var o readOptions
	return runRole(ctx, e, "read", &o, args, func(ctx context.Context, tr transport.Transport, secret []byte) error {
		return read(ctx, e.out, tr, &o, secret)
	})
}

// maxBlockFlag is the largest --block-size: a transport's block size is an
// int32 on its wire and in its buffers.
const maxBlockFlag = 1<<31 - 1

// arrivalSalt makes a poisson schedule's seed differ from the file's and
// the shuffle's while staying reproducible for a given file.
const arrivalSalt = 0x9E3779B97F4A7C15

// shuffleSalt makes the random order differ from the file content's own
// sequence while staying reproducible for a given file.
const shuffleSalt = 0x5DEECE66D

func read(ctx context.Context, out *session.Printer, tr transport.Transport, o *readOptions, secret []byte) error {
	cl, err := tr.Dial(ctx, transport.ClientConfig{
		Addr: o.server, Secret: secret, QPs: o.qps, QueueDepth: o.queueDepth, BlockSize: int(o.blockSize), RDMA: o.rdma,
	})
	if err != nil {
		return err
	}
	defer cl.Close()
	if o.barrier {
		// Connected and registered: the runner starts every client's
		// reading at once, after all of them are here.
		out.Event(results.Ready{Type: results.TypeReady, Transport: tr.Name()})
		if err := o.WaitGo(ctx); err != nil {
			return fmt.Errorf("wait for go: %w", err)
		}
	}
	reg := cl.Region()
	total := int64(o.total)
	if total == 0 && o.duration == 0 {
		total = reg.Size
	}
	rate, err := results.ParseRate(o.rate) // checked with the flags
	if err != nil {
		return usagef("read: --rate: %v", err)
	}
	sample := beginClient(cl, o.server)
	w := transport.Workload{
		BlockSize: int(o.blockSize), QueueDepth: o.queueDepth, Pattern: o.pattern,
		Total: total, Duration: o.duration, Warmup: o.warmup.d, Verify: o.verify,
		Seed: reg.Seed ^ shuffleSalt, Interval: o.interval,
		Rate: rate.ReadsPerS(int64(o.blockSize)), Arrivals: o.arrivals, ArrivalSeed: reg.Seed ^ arrivalSalt,
	}
	warmedUp, err := o.warmUpSteady(ctx, out, cl, w)
	if err != nil {
		return err
	}
	m, err := cl.Read(ctx, w)
	if err != nil {
		return err
	}
	cnt := sample.End(m.TCP)
	start := m.Start
	if start.IsZero() { // a transport that cannot tell: the phase just ended
		start = time.Now().Add(-time.Duration(m.Seconds * float64(time.Second)))
	}
	for i, n := range m.Intervals {
		out.Event(results.Interval{
			Type: results.TypeInterval, StartUnixNs: start.Add(time.Duration(i) * o.interval).UnixNano(),
			Seconds: o.interval.Seconds(), Reads: n, Bytes: n * int64(o.blockSize),
		})
	}
	r := results.Result{
		Type: results.TypeResult, Transport: tr.Name(), Bytes: m.Bytes, Reads: m.Reads, Seconds: m.Seconds,
		LatAvgUs: m.Latency.AvgUs, LatP50Us: m.Latency.P50Us, LatP99Us: m.Latency.P99Us,
		LatP999Us: m.Latency.P999Us, LatMaxUs: m.Latency.MaxUs, Verified: m.Verified, GIDIndex: m.GIDIndex,
		CPUUserS: m.CPU.UserS, CPUSysS: m.CPU.SysS, CPUWallS: m.CPU.WallS, CPUThreadS: m.CPU.ThreadS,
		StartUnixNs: start.UnixNano(), Histogram: m.Histogram,
		LatSumUs: m.Latency.SumUs, LatSamples: m.Latency.N, RDMAPath: m.Path, WarmupS: warmedUp,
		Counters: cnt, BlockSize: w.BlockSize, QueueDepth: w.QueueDepth, QPs: m.QPs,
		FirstReadS: m.FirstReadS, LastReadS: m.LastReadS, IdleS: m.IdleS,
	}
	r.BwMinIntervalMBs, r.BwCoV = steadiness(m.Intervals, o.interval, m.Seconds, int(o.blockSize))
	if ol := m.OpenLoop; ol != nil {
		r.OpenLoop = openLoopResult(ol, w, rate)
	}
	if m.Seconds > 0 {
		r.BandwidthMBs = float64(m.Bytes) / m.Seconds / 1e6
		r.IOPS = float64(m.Reads) / m.Seconds
	}
	out.Event(r)
	out.Line("Bandwidth: %.2f MB/s", r.BandwidthMBs)
	out.Line("latency per block: %.2f us", r.LatAvgUs)
	out.Line("iops: %.0f", r.IOPS)
	if ol := r.OpenLoop; ol != nil {
		out.Line("offered: %.2f MB/s (%s), response p99: %.2f us, held back: %d of %d, saturated: %t",
			ol.OfferedMBs, ol.Arrivals, ol.RespP99Us, ol.HeldBack, ol.Due, ol.Saturated)
	}
	return cl.Close()
}

// openLoopResult is the result's account of an open loop run at rate.
func openLoopResult(ol *transport.OpenLoop, w transport.Workload, rate results.Rate) *results.OpenLoop {
	r := &results.OpenLoop{
		OfferedMBs: rate.MBs(int64(w.BlockSize)), Arrivals: w.Arrivals,
		Due: ol.Due, HeldBack: ol.HeldBack, Saturated: results.IsSaturated(ol.HeldBack, ol.Due),
	}
	if w.Arrivals == "poisson" {
		seed := w.ArrivalSeed
		r.ArrivalSeed = &seed
	}
	r.SetResponse(ol.Response)
	return r
}
