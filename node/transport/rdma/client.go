//go:build rdma

package rdma

// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"rdmasweep/node/transport"
	"rdmasweep/node/workload"
	"rdmasweep/results"
)

// The C loop fills results.Histogram.Counts directly, so the two must agree.
var (
	_ [results.NumBuckets - C.RS_NUM_BUCKETS]struct{}
	_ [C.RS_NUM_BUCKETS - results.NumBuckets]struct{}
	_ [results.SubBucketBits - C.RS_SUB_BUCKET_BITS]struct{}
	_ [C.RS_SUB_BUCKET_BITS - results.SubBucketBits]struct{}
	// and wcMessage's status numbers are verbs'.
	_ [wcRemAccessError - C.IBV_WC_REM_ACCESS_ERR]struct{}
	_ [C.IBV_WC_REM_ACCESS_ERR - wcRemAccessError]struct{}
	_ [wcRetryExceeded - C.IBV_WC_RETRY_EXC_ERR]struct{}
	_ [C.IBV_WC_RETRY_EXC_ERR - wcRetryExceeded]struct{}
	_ [wcRNRRetryExceeded - C.IBV_WC_RNR_RETRY_EXC_ERR]struct{}
	_ [C.IBV_WC_RNR_RETRY_EXC_ERR - wcRNRRetryExceeded]struct{}
)

// stallTimeout bounds how long the loop waits with reads in flight and
// none completing. The QP's own retries (timeout 14, retry_cnt 7) give up
// well before it; this only catches a device that never answers.
const stallTimeout = 60 * time.Second

type client struct {
	cfg    transport.ClientConfig
	conn   net.Conn
	dev    *device
	gid    GID
	q      *qpSet
	cmch   *C.struct_rdma_event_channel // connect cm
	buf    unsafe.Pointer
	bufLen int
	mr     *C.struct_ibv_mr
	region regionRecord
	perQP  int // READs posted per QP at the configured queue depth
	maxRd  int // max_rd_atomic the QPs were set to
	cqMod  int
	path   *results.RDMAPath
	next   int64
	broken error // set once a QP went to error; later reads fail with it
	// watch reads the device's async events for the client's life; an
	// event that breaks the path is kept in event and stops the Read in
	// the C loop (running holds that Read's cancel flag).
	watch   *eventWatch
	event   atomic.Pointer[error]
	runMu   sync.Mutex // running is set and cleared under it
	running *int32
	bytes   int64
	reads   int64
	closeMu atomic.Bool
	// handshakeNs is when the handshake ended (CLOCK_MONOTONIC ns): a
	// pipelined server starts its preparation then.
	handshakeNs uint64
	// gate holds READs back until a pipelined server announces their
	// memory regions (nil otherwise); see pipeline.go.
	gate *gate
}

// Dial connects to the server, authenticates, and connects cfg.QPs QPs.
func (t *Transport) Dial(ctx context.Context, cfg transport.ClientConfig) (transport.Client, error) {
	c, err := dial(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("rdma dial %s: %w", cfg.Addr, err)
	}
	return c, nil
}

func dial(ctx context.Context, cfg transport.ClientConfig) (*client, error) {
	c, cm, fabric, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, results.Network, cfg.Addr)
	if err != nil {
		return nil, err
	}
	c.conn = conn
	// The kernel picked the source address to reach the server: the
	// device holding it is the one the data must leave through.
	local := conn.LocalAddr().(*net.TCPAddr).IP
	if cm {
		err = c.dialCM(ctx, local, fabric)
	} else {
		err = c.dialTCP(ctx, local, fabric)
	}
	if err != nil {
		c.release()
		return nil, err
	}
	c.watch = watchEvents(c.dev, c.gid, c.eventBroke)
	if c.region.Pipelined {
		if err := c.openGate(); err != nil {
			c.release()
			return nil, err
		}
	}
	return c, nil
}

// setRunning sets the cancel flag of the Read under way, nil after it.
func (c *client) setRunning(flag *int32) {
	c.runMu.Lock()
	c.running = flag
	c.runMu.Unlock()
}

// eventBroke keeps an event that broke the path and stops the Read under
// way, whose error it becomes.
func (c *client) eventBroke(err error) {
	c.event.CompareAndSwap(nil, &err)
	c.stopRead()
}

// newClient settles what the config leaves to node and checks what only
// node knows (its own limits, the host's memory) before any connection.
// The plan's bounds were checked where the schema says, by node's flags.
func newClient(cfg transport.ClientConfig) (*client, bool, transport.Fabric, error) {
	if cfg.QPs <= 0 {
		cfg.QPs = 1
	}
	fabric := fabricOf(cfg.RDMA)
	cm, err := connectMode(cfg.RDMA)
	if err != nil {
		return nil, false, fabric, err
	}
	perQP := results.DepthPerQP(cfg.QueueDepth, cfg.QPs)
	// A closed loop's moderation; an open loop's is 1 (Read).
	cqMod := results.CQModeration(cfg.RDMA.CQModeration, cfg.QueueDepth, cfg.QPs, false)
	switch {
	case cfg.QPs > C.RS_MAX_QP:
		return nil, false, fabric, fmt.Errorf("qps %d is over the %d this node supports", cfg.QPs, C.RS_MAX_QP)
	case cfg.QueueDepth > C.RS_MAX_QD:
		return nil, false, fabric, fmt.Errorf("queue_depth %d is over the %d this node supports", cfg.QueueDepth, C.RS_MAX_QD)
	case cfg.BlockSize > maxBlock:
		return nil, false, fabric, fmt.Errorf("block size %d is over 1GiB, the largest RDMA READ this node issues", cfg.BlockSize)
	}
	c := &client{cfg: cfg, perQP: perQP, bufLen: cfg.QueueDepth * cfg.BlockSize, cqMod: cqMod}
	what := fmt.Sprintf("the read buffer (queue_depth %d × block size %d)", cfg.QueueDepth, cfg.BlockSize)
	if err := checkPinnable(int64(c.bufLen), what); err != nil {
		return nil, false, fabric, err
	}
	if err := raiseMemlock(uint64(c.bufLen), what); err != nil {
		return nil, false, fabric, err
	}
	return c, cm, fabric, nil
}

// dialTCP opens the device holding local, makes the QPs and the buffer,
// exchanges endpoints over the TCP connection and moves the QPs to RTS.
func (c *client) dialTCP(ctx context.Context, local net.IP, fabric transport.Fabric) error {
	var err error
	if c.dev, err = openDevice(c.cfg.RDMA.Device, c.cfg.RDMA.IBPort, local); err != nil {
		return err
	}
	if needsCM(c.dev.transport) {
		return fmt.Errorf("%w: %s is an %s device; hint: set rdma.connect: cm (node --rdma-connect cm) on both hosts", transport.ErrNeedsCM, c.dev.name, c.dev.transport)
	}
	if err := c.checkDepth(); err != nil {
		return err
	}
	if n := int(c.dev.pattr.pkey_tbl_len); fabric.PKeyIndex >= n {
		return fmt.Errorf("pkey_index %d: %s port %d has %d P_Key entries", fabric.PKeyIndex, c.dev.name, c.dev.port, n)
	}
	var grh bool
	if c.gid, grh, err = c.dev.pickGID(c.cfg.RDMA.GIDIndex, local); err != nil {
		return err
	}
	// One more send WR per QP than its slots, for the fence that ends a
	// run with completion moderation; the CQ holds every one.
	c.q, err = createQPs(c.dev, c.cfg.QPs, c.perQP+1, c.cfg.QueueDepth+c.cfg.QPs, 0, fabric)
	if err != nil {
		return fmt.Errorf("create %d QPs: %w", c.cfg.QPs, err)
	}
	if err := c.allocBuffer(); err != nil {
		return err
	}
	ours := localEndpoint(c.dev, c.gid, c.q)
	theirs, region, err := clientHandshake(ctx, c.conn, c.cfg.Secret, ours)
	if err != nil {
		return err
	}
	c.handshakeNs = monotonicNs()
	// From here the server has set up QPs for us and waits for a bye; a
	// failure is sent to it as an abort, so its error says why too.
	if err := c.connectTCP(grh, ours, theirs, region, fabric); err != nil {
		sendAbort(c.conn, err)
		return err
	}
	return nil
}

// connectTCP settles max_rd_atomic with the server and moves the QPs to
// RTS against its endpoint.
func (c *client) connectTCP(grh bool, ours, theirs endpoint, region regionRecord, fabric transport.Fabric) error {
	if region.Length == 0 {
		return errors.New("server announced an empty region")
	}
	c.region = region
	var err error
	if c.maxRd, err = c.negotiate(int(theirs.MaxDestRdAtomic)); err != nil {
		return err
	}
	if err := connect(c.dev, c.gid, grh, c.q, ours, theirs, c.maxRd, fabric); err != nil {
		return err
	}
	c.path = c.dev.path(c.gid, false, grh, fabric)
	c.queryPath()
	return nil
}

// checkDepth refuses a queue depth per QP the device cannot queue. Reads
// beyond max_rd_atomic wait in the send queue, as with perftest's tx depth.
func (c *client) checkDepth() error {
	if c.perQP+1 > c.dev.maxQPWR() {
		need := (c.cfg.QueueDepth + c.dev.maxQPWR() - 2) / (c.dev.maxQPWR() - 1)
		return fmt.Errorf("queue_depth %d over %d QP(s) puts %d READs per QP, over what %s's send queue holds (max_qp_wr %d, one kept for a fence); hint: raise client.qps to at least %d",
			c.cfg.QueueDepth, c.cfg.QPs, c.perQP, c.dev.name, c.dev.maxQPWR(), need)
	}
	if r := c.cfg.RDMA.MaxRdAtomic; r > c.dev.maxInitRdAtom() {
		return fmt.Errorf("max_rd_atomic %d is over %s's max_qp_init_rd_atom %d", r, c.dev.name, c.dev.maxInitRdAtom())
	}
	return nil
}

// negotiate returns the QPs' max_rd_atomic by results.MaxRdAtomic: the
// plan's, or the most both sides allow.
func (c *client) negotiate(serverDepth int) (int, error) {
	r := c.cfg.RDMA.MaxRdAtomic
	n, most := results.MaxRdAtomic(r, c.dev.maxInitRdAtom(), serverDepth)
	switch {
	case most < 1:
		return 0, fmt.Errorf("server advertised max_dest_rd_atomic %d; it cannot answer any READ", serverDepth)
	case n == 0:
		return 0, fmt.Errorf("max_rd_atomic %d is over the %d both sides allow (the smaller of %s's max_qp_init_rd_atom %d and the server's max_qp_rd_atom %d)",
			r, most, c.dev.name, c.dev.maxInitRdAtom(), serverDepth)
	}
	return n, nil
}

// allocBuffer maps and registers the read buffer, with the access the
// device's transport needs (clientAccess): relaxed ordering, as perftest
// does, unless opted out.
func (c *client) allocBuffer() error {
	access, err := clientAccess(c.dev.transport, c.dev.driver, !c.cfg.RDMA.NoRelaxedOrdering)
	if err != nil {
		return fmt.Errorf("%s: %w", c.dev.name, err)
	}
	if err := checkMRSize(uint64(c.bufLen), c.dev.maxMRSize(), c.dev.name, "the read buffer (queue_depth × block size)", "lower queue_depth or block size"); err != nil {
		return err
	}
	c.buf = C.rs_alloc_buf(C.size_t(c.bufLen))
	if c.buf == nil {
		return fmt.Errorf("allocate the %d-byte read buffer: out of memory", c.bufLen)
	}
	st := C.rs_reg_mr(c.dev.pd, c.buf, C.size_t(c.bufLen), C.int(access), &c.mr)
	if err := verbErr(st, "memory may be short for the read buffer: lower queue_depth or block size; "+memlockHint(uint64(c.bufLen))); err != nil {
		return fmt.Errorf("register the read buffer: %w", err)
	}
	return nil
}

// queryPath fills the path with what the first QP says it was set to.
func (c *client) queryPath() {
	p := c.path
	p.MaxRdAtomic, p.QueueDepthPerQP, p.CQModeration = c.maxRd, c.perQP, c.cqMod
	ro := !c.cfg.RDMA.NoRelaxedOrdering
	p.RelaxedOrdering = &ro
	var config []byte // none for a software device
	if c.dev.sysDevice != "" {
		config, _ = os.ReadFile(filepath.Join(c.dev.sysDevice, "config"))
		config = append([]byte{}, config...) // unreadable: unknown, not none
	}
	p.RelaxedOrderingGranted = relaxedOrderingGranted(ro, config)
	var info C.rs_qp_info
	if C.rs_query_qp(c.q.qps[0], &info).verb != nil {
		return
	}
	p.MaxRdAtomic = int(info.max_rd_atomic)
	p.PathMTU = mtuBytes(int(info.path_mtu))
	if c.dev.transport != "iWARP" {
		p.GRH = info.is_global != 0
		p.TrafficClass, p.ServiceLevel, p.PKeyIndex = int(info.f.traffic_class), int(info.f.sl), int(info.f.pkey_index)
		p.Timeout, p.RetryCnt, p.RNRRetry, p.MinRNRTimer = int(info.f.timeout), int(info.f.retry_cnt), int(info.f.rnr_retry), int(info.f.min_rnr_timer)
		if c.cmch != nil && p.GRH {
			c.routeGID(int(info.sgid_index))
		}
	}
}

// routeGID records the GID rdma_cm bound the QPs to, read back from the
// first QP's address vector, rather than one node would have picked.
func (c *client) routeGID(index int) {
	gids, err := c.dev.gids()
	if err != nil {
		return
	}
	for _, g := range gids {
		if g.Index == index {
			c.gid = g
			c.path.GID, c.path.GIDType = g.GID, g.Type
			return
		}
	}
}

// Path is the RDMA path the client connected over, known from Dial on, so
// node can count its port's counters around Read.
func (c *client) Path() *results.RDMAPath { return c.path }

func (c *client) Region() transport.RegionInfo {
	return transport.RegionInfo{Size: int64(c.region.Length), Seed: c.region.Seed, Patterned: c.region.Patterned}
}

// Read runs the workload in one call into the C loop: warmup, drain, then
// the measured phase. Read indexes continue across calls, as with tcp.
func (c *client) Read(ctx context.Context, w transport.Workload) (transport.Measurement, error) {
	var m transport.Measurement
	if err := c.readable(w); err != nil {
		return m, err
	}
	blocks, reads, perm, err := c.plan(w)
	if err != nil {
		return m, err
	}
	if w.Rate > 0 {
		// The C loop computes the schedule (rs_sched); this refuses what
		// workload.NewSchedule would, before any READ.
		if _, err := workload.NewSchedule(0, w.Rate, w.Arrivals, w.ArrivalSeed); err != nil {
			return m, err
		}
	}
	cancel := (*C.int)(C.calloc(1, C.size_t(unsafe.Sizeof(C.int(0)))))
	defer C.free(unsafe.Pointer(cancel))
	stop := context.AfterFunc(ctx, func() { atomic.StoreInt32((*int32)(unsafe.Pointer(cancel)), 1) })
	defer stop()
	c.setRunning((*int32)(unsafe.Pointer(cancel)))
	defer c.setRunning(nil) // before cancel is freed
	if ep := c.event.Load(); ep != nil {
		c.broken = *ep
		return m, c.broken
	}
	if err := c.gate.failed(); err != nil {
		c.broken = err
		return m, err
	}
	if ctx.Err() != nil {
		return m, ctx.Err()
	}
	// The arguments live in C memory: they hold pointers (the QP array,
	// the buffer) that cgo would not let Go memory carry into C.
	a := (*C.rs_run_args)(C.calloc(1, C.size_t(unsafe.Sizeof(C.rs_run_args{}))))
	defer C.free(unsafe.Pointer(a))
	c.fillArgs(a, w, blocks, reads, cancel)
	releasing, err := c.startReleases(w, reads, blocks) // nothing returns between here and rs_run
	if err != nil {
		return m, err
	}

	var h, resp results.Histogram
	// perm, h.Counts and the rkeys are Go memory without pointers, pinned
	// for the call.
	var pinner runtime.Pinner
	if perm != nil {
		pinner.Pin(&perm[0])
		a.perm = (*C.int64_t)(unsafe.Pointer(&perm[0]))
	}
	pinner.Pin(&h.Counts[0])
	a.hist = (*C.uint64_t)(unsafe.Pointer(&h.Counts[0]))
	pinner.Pin(&c.region.RKeys[0])
	a.rkeys = (*C.uint32_t)(unsafe.Pointer(&c.region.RKeys[0]))
	if c.gate != nil {
		a.gate = c.gate.g
	}
	if a.open != 0 {
		pinner.Pin(&resp.Counts[0])
		a.resp_hist = (*C.uint64_t)(unsafe.Pointer(&resp.Counts[0]))
	}
	var o C.rs_run_out
	cpu := transport.StartCPU()
	C.rs_run(a, &o)
	used := cpu()
	pinner.Unpin()
	defer C.rs_run_free(&o)
	relErr := releasing()

	c.next = int64(o.next)
	c.bytes += int64(o.bytes)
	c.reads += int64(o.reads)
	if err := c.runError(ctx, &o, w); err != nil {
		return m, err
	}
	if relErr != nil {
		return m, relErr
	}
	m = c.measurement(&o, w, &h, used)
	if onePass(w, blocks, reads, int64(a.start)) {
		m.FirstReadS, m.LastReadS = c.sinceHandshake(o.first_done_ns), c.sinceHandshake(o.last_done_ns)
	}
	if a.open != 0 {
		resp.N, resp.Sum, resp.Max = uint64(o.resp_n), uint64(o.resp_sum), uint64(o.resp_max)
		m.OpenLoop = &transport.OpenLoop{Response: &resp, Due: int64(o.due), HeldBack: int64(o.held_back)}
		if m.Path != nil {
			p := *m.Path
			p.CQModeration = int(a.cq_mod) // what fillArgs handed the loop
			m.Path = &p
		}
	}
	return m, nil
}

// readable refuses a workload the connection cannot run.
func (c *client) readable(w transport.Workload) error {
	if c.broken != nil {
		return fmt.Errorf("the connection failed earlier: %w", c.broken)
	}
	if w.BlockSize <= 0 || w.BlockSize > c.cfg.BlockSize {
		return fmt.Errorf("block size %d outside 1..%d (the size given to Dial)", w.BlockSize, c.cfg.BlockSize)
	}
	if w.QueueDepth <= 0 || w.QueueDepth > c.cfg.QueueDepth {
		return fmt.Errorf("queue depth %d outside 1..%d (the depth given to Dial)", w.QueueDepth, c.cfg.QueueDepth)
	}
	if len(c.region.RKeys) > 1 && c.region.MRSize%uint64(w.BlockSize) != 0 {
		return fmt.Errorf("block size %d does not divide the server's mr_size %d: a READ would span two memory regions; choose a block_size that divides mr_size", w.BlockSize, c.region.MRSize)
	}
	if c.gate != nil && w.Rate > 0 {
		return errors.New("an open loop (rate) cannot read from a pipelined server: its reads would wait for the regions, not their due times; hint: leave server.pipeline off with client.rate")
	}
	if w.Verify && !c.region.Patterned {
		return errors.New("verify: the server's file holds no rdmasweep pattern (it was not made with --create), so its bytes cannot be checked")
	}
	return nil
}

// plan returns the region's blocks, the reads to make (0 for a duration
// run) and, for random reads, the block permutation.
func (c *client) plan(w transport.Workload) (blocks, reads int64, perm []int64, err error) {
	size := int64(c.region.Length)
	blocks = workload.Blocks(size, w.BlockSize)
	order, err := workload.New(w.Pattern, blocks, w.Seed)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("block size %d against a region of %d bytes: %w", w.BlockSize, size, err)
	}
	if w.Pattern == "random" {
		perm = workload.Permutation(order.Blocks(), w.Seed)
	}
	if w.Duration > 0 {
		return blocks, 0, perm, nil
	}
	total := w.Total
	if total <= 0 {
		total = size
	}
	return blocks, (total + int64(w.BlockSize) - 1) / int64(w.BlockSize), perm, nil
}

// fillArgs sets the C loop's arguments for w, but for perm and hist.
func (c *client) fillArgs(a *C.rs_run_args, w transport.Workload, blocks, reads int64, cancel *C.int) {
	dur := w.Duration
	*a = C.rs_run_args{
		qps: c.q.arr, nqp: C.int(len(c.q.qps)), cq: c.q.cq,
		buf: (*C.uint8_t)(c.buf), lkey: c.mr.lkey, raddr: C.uint64_t(c.region.Addr), mr_size: C.uint64_t(c.region.MRSize),
		bs: C.uint32_t(w.BlockSize), qd: C.int(w.QueueDepth), nblocks: C.int64_t(blocks),
		per_qp: C.int(results.DepthPerQP(w.QueueDepth, len(c.q.qps))), start: C.int64_t(c.next),
		warmup_ns: C.uint64_t(w.Warmup.Nanoseconds()), count: C.int64_t(reads), duration_ns: C.uint64_t(dur.Nanoseconds()),
		seed: C.uint64_t(c.region.Seed), cancel: cancel, stall_ns: C.uint64_t(stallTimeout.Nanoseconds()),
		cq_mod: C.int(c.cqMod),
	}
	if w.Verify {
		a.verify = 1
	}
	if iv := w.Interval; iv > 0 {
		a.interval_ns = C.uint64_t(iv.Nanoseconds())
		a.intervals_hint = C.int64_t(intervalsHint(dur, iv))
	}
	if w.Rate > 0 {
		// An open loop: the reads due in the warmup and in the measured
		// phase (its duration's, or reads for a total), as tcp's.
		a.open = 1
		a.cq_mod = C.int(results.CQModeration(c.cfg.RDMA.CQModeration, c.cfg.QueueDepth, c.cfg.QPs, true))
		a.per_read_ns = C.double(1e9 / w.Rate)
		a.arrival_seed = C.uint64_t(w.ArrivalSeed)
		if w.Arrivals == "poisson" {
			a.poisson = 1
		}
		a.warm_reads = C.int64_t(workload.ReadsFor(w.Warmup, w.Rate))
		a.reads = C.int64_t(reads)
		if dur > 0 {
			a.reads = C.int64_t(workload.ReadsFor(dur, w.Rate))
		}
	}
}

// runError is the error the C loop's status stands for, nil for success.
// A failure that leaves the QPs unusable breaks the connection.
func (c *client) runError(ctx context.Context, o *C.rs_run_out, w transport.Workload) error {
	if o.status == C.RS_WC_ERROR || o.status == C.RS_STALLED {
		c.watch.await(eventGrace, func() bool { return c.event.Load() != nil })
	}
	if err := c.gate.failed(); err != nil && o.status != C.RS_OK {
		c.broken = err // the server's preparation failed, or its connection
		return c.broken
	}
	if ep := c.event.Load(); ep != nil && o.status != C.RS_OK {
		// The device said why the loop stopped or failed.
		c.broken = *ep
		return c.broken
	}
	switch o.status {
	case C.RS_OK:
	case C.RS_CANCELLED:
		return ctx.Err()
	case C.RS_MISMATCH:
		if c.region.ODP {
			return fmt.Errorf("%w: byte at offset %d of %s does not hold the pattern for seed %#x: the server's device returned wrong data through ODP (soft-RoCE on 7.x kernels does), so figures measured on it cannot be trusted; hint: use registration: pinned on this server, or a kernel whose ODP passes a verified read",
				transport.ErrODPMismatch, int64(o.bad_offset), c.cfg.Addr, c.region.Seed)
		}
		return fmt.Errorf("%w: byte at offset %d of %s does not hold the pattern for seed %#x", transport.ErrMismatch, int64(o.bad_offset), c.cfg.Addr, c.region.Seed)
	case C.RS_WC_ERROR:
		c.broken = wcError(*o, c)
		return c.broken
	case C.RS_STALLED:
		c.broken = fmt.Errorf("no RDMA READ completed for %s with reads in flight; hint: the server may be gone, or the path between the hosts drops RoCE traffic", stallTimeout)
		return c.broken
	default:
		c.broken = &VerbError{Verb: C.GoString(o.verb), Errno: syscall.Errno(o.errnum), Hint: "the QP may be in error after a failed READ"}
		return c.broken
	}
	if o.intervals_failed != 0 {
		return fmt.Errorf("count the reads per interval of %s: out of memory; hint: use a longer interval", w.Interval)
	}
	return nil
}

// measurement is what a successful run measured.
func (c *client) measurement(o *C.rs_run_out, w transport.Workload, h *results.Histogram, used transport.CPUTime) transport.Measurement {
	h.N, h.Sum, h.Max = uint64(o.lat_n), uint64(o.lat_sum), uint64(o.lat_max)
	m := transport.Measurement{
		Bytes:     int64(o.reads) * int64(w.BlockSize),
		Reads:     int64(o.reads),
		Seconds:   float64(o.seconds_ns) / 1e9,
		Start:     time.Unix(0, int64(o.start_unix_ns)),
		Latency:   h.Summary(),
		Histogram: h,
		Verified:  w.Verify,
		Path:      c.path,
		CPU:       used,
		QPs:       len(c.q.qps),
	}
	idle := float64(o.idle_ns) / 1e9
	m.IdleS = &idle
	if o.intervals != nil {
		m.Intervals = append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(o.intervals)), int(o.nintervals))...)
	}
	if c.gid.GID != "" {
		gi := c.gid.Index
		m.GIDIndex = &gi
	}
	return m
}

// intervalsHint is how many intervals of iv the C loop makes room for up
// front: a duration run's, with one for its drain and one for rounding
// (it grows past them only if the drain outlasts an interval); a run of
// a number of reads starts small and doubles. A hint is capped, so an
// interval far shorter than the run asks for memory only as it is used.
func intervalsHint(dur, iv time.Duration) int64 {
	n := int64(64)
	if dur > 0 {
		n = int64(dur/iv) + 2
	}
	return min(n, 1<<20)
}

func wcError(o C.rs_run_out, c *client) error {
	st := C.enum_ibv_wc_status(o.wc_status)
	qp := fmt.Sprintf("QP with qp_num %d", int(o.wc_qp))
	for i, q := range c.q.qps {
		if n := uint32(C.rs_qp_num(q)); n == uint32(o.wc_qp) {
			qp = qpName(i, len(c.q.qps), n)
		}
	}
	return errors.New(wcMessage(qp, C.GoString(C.ibv_wc_status_str(st)), int(o.wc_status), int(o.vendor_err), c.gid, c.region.ODP))
}

// Close says bye (the server's only count of what was read), then releases
// everything. When a READ broke the connection it sends an abort with that
// error instead, so the server fails too and says why. It is idempotent.
func (c *client) Close() error {
	if c.closeMu.Swap(true) {
		return nil
	}
	if c.broken != nil {
		sendAbort(c.conn, c.broken)
		c.release()
		return nil
	}
	c.conn.SetDeadline(time.Now().Add(2 * time.Second))
	err := writeMsg(c.conn, kindBye, byeBody(c.bytes, c.reads))
	c.release()
	if err != nil {
		return fmt.Errorf("rdma close: %w", err)
	}
	return nil
}

func (c *client) release() {
	c.watch.Stop() // before the device closes
	if c.conn != nil {
		c.conn.Close()
	}
	c.gate.close() // after the conn: its reader has returned
	c.q.destroy()
	c.q = nil
	defer func() {
		if c.cmch != nil {
			C.rs_cm_destroy_channel(c.cmch) // after every id on it
			c.cmch = nil
		}
	}()
	if c.mr != nil {
		C.ibv_dereg_mr(c.mr)
		c.mr = nil
	}
	if c.buf != nil {
		C.rs_free_buf(c.buf, C.size_t(c.bufLen))
		c.buf = nil
	}
	if c.dev != nil {
		c.dev.close()
		c.dev = nil
	}
}
