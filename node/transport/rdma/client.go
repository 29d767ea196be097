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
	"rdmasweep/results"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"rdmasweep/node/transport"
	"rdmasweep/node/workload"
)

// The C loop fills results.Histogram.Counts directly, so the two must agree.
var (
	_ [results.NumBuckets - C.RS_NUM_BUCKETS]struct{}
	_ [C.RS_NUM_BUCKETS - results.NumBuckets]struct{}
	_ [results.SubBucketBits - C.RS_SUB_BUCKET_BITS]struct{}
	_ [C.RS_SUB_BUCKET_BITS - results.SubBucketBits]struct{}
)

// stallTimeout bounds how long the loop waits with reads in flight and
// none completing. The QP's own retries (timeout 14, retry_cnt 7) give up
// well before it; this only catches a device that never answers.
const stallTimeout = 60 * time.Second

type client struct {
	cfg     transport.ClientConfig
	conn    net.Conn
	dev     *device
	gid     GID
	q       *qpSet
	buf     unsafe.Pointer
	bufLen  int
	mr      *C.struct_ibv_mr
	region  regionRecord
	perQP   int // reads in flight per QP at the configured queue depth
	maxRd   int // max_rd_atomic the QPs were set to
	next    int64
	broken  error // set once a QP went to error; later reads fail with it
	bytes   int64
	reads   int64
	closeMu atomic.Bool
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
	if cfg.QPs <= 0 {
		cfg.QPs = 1
	}
	switch {
	case cfg.QPs > C.RS_MAX_QP:
		return nil, fmt.Errorf("qps %d is over the %d this node supports", cfg.QPs, C.RS_MAX_QP)
	case cfg.QueueDepth <= 0 || cfg.QueueDepth > C.RS_MAX_QD:
		return nil, fmt.Errorf("queue_depth %d outside 1..%d", cfg.QueueDepth, C.RS_MAX_QD)
	case cfg.BlockSize <= 0 || cfg.BlockSize > maxBlock:
		return nil, fmt.Errorf("block size %d outside 1..1GiB (one RDMA READ)", cfg.BlockSize)
	}
	perQP := (cfg.QueueDepth + cfg.QPs - 1) / cfg.QPs
	bufLen := cfg.QueueDepth * cfg.BlockSize
	if err := raiseMemlock(uint64(bufLen), fmt.Sprintf("the read buffer (queue_depth %d × block size %d)", cfg.QueueDepth, cfg.BlockSize)); err != nil {
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	c := &client{cfg: cfg, conn: conn, perQP: perQP, bufLen: bufLen}
	fail := func(err error) (*client, error) {
		c.release()
		return nil, err
	}
	c.dev, err = openDevice(cfg.RDMA.Device, cfg.RDMA.IBPort)
	if err != nil {
		return fail(err)
	}
	if perQP > c.dev.maxInitRdAtom() {
		return fail(depthError(cfg, perQP, c.dev.maxInitRdAtom(), fmt.Sprintf("%s's max_qp_init_rd_atom", c.dev.name)))
	}
	c.gid, err = c.dev.pickGID(cfg.RDMA.GIDIndex, conn.LocalAddr().(*net.TCPAddr).IP)
	if err != nil {
		return fail(err)
	}
	c.q, err = createQPs(c.dev, cfg.QPs, perQP, cfg.QueueDepth, 0)
	if err != nil {
		return fail(fmt.Errorf("create %d QPs: %w", cfg.QPs, err))
	}
	c.buf = C.rs_alloc_buf(C.size_t(bufLen))
	if c.buf == nil {
		return fail(fmt.Errorf("allocate the %d-byte read buffer: out of memory", bufLen))
	}
	st := C.rs_reg_mr(c.dev.pd, c.buf, C.size_t(bufLen), C.IBV_ACCESS_LOCAL_WRITE, &c.mr)
	if err := verbErr(st, "RLIMIT_MEMLOCK or memory may be short for the read buffer: lower queue_depth or block size"); err != nil {
		return fail(fmt.Errorf("register the read buffer: %w", err))
	}
	ours := local(c.dev, c.gid, c.q)
	theirs, region, err := clientHandshake(ctx, conn, cfg.Secret, ours)
	if err != nil {
		return fail(err)
	}
	// From here the server has set up QPs for us and waits for a bye; a
	// failure is sent to it as an abort, so its error says why too.
	abort := func(err error) (*client, error) {
		sendAbort(conn, err)
		return fail(err)
	}
	if region.Length == 0 {
		return abort(errors.New("server announced an empty region"))
	}
	c.region = region
	c.maxRd = min(c.dev.maxInitRdAtom(), int(theirs.MaxDestRdAtomic))
	if c.maxRd < 1 {
		return abort(fmt.Errorf("server advertised max_dest_rd_atomic %d; it cannot answer any READ", theirs.MaxDestRdAtomic))
	}
	if perQP > c.maxRd {
		return abort(depthError(cfg, perQP, c.maxRd, fmt.Sprintf("the smaller of %s's max_qp_init_rd_atom %d and the server's max_qp_rd_atom %d", c.dev.name, c.dev.maxInitRdAtom(), theirs.MaxDestRdAtomic)))
	}
	if err := connect(c.dev, c.gid, c.q, ours, theirs, c.maxRd); err != nil {
		return abort(err)
	}
	return c, nil
}

func depthError(cfg transport.ClientConfig, perQP, limit int, why string) error {
	need := (cfg.QueueDepth + limit - 1) / limit
	return fmt.Errorf("queue_depth %d over %d QP(s) puts %d READs in flight per QP, over max_rd_atomic %d (%s); hint: raise client.qps to at least %d",
		cfg.QueueDepth, cfg.QPs, perQP, limit, why, need)
}

func (c *client) Region() transport.RegionInfo {
	return transport.RegionInfo{Size: int64(c.region.Length), Seed: c.region.Seed, Patterned: c.region.Patterned}
}

// Read runs the workload in one call into the C loop: warmup, drain, then
// the measured phase. Read indexes continue across calls, as with tcp.
func (c *client) Read(ctx context.Context, w transport.Workload) (transport.Measurement, error) {
	var m transport.Measurement
	if c.broken != nil {
		return m, fmt.Errorf("the connection failed earlier: %w", c.broken)
	}
	if w.BlockSize <= 0 || w.BlockSize > c.cfg.BlockSize {
		return m, fmt.Errorf("block size %d outside 1..%d (the size given to Dial)", w.BlockSize, c.cfg.BlockSize)
	}
	if w.QueueDepth <= 0 || w.QueueDepth > c.cfg.QueueDepth {
		return m, fmt.Errorf("queue depth %d outside 1..%d (the depth given to Dial)", w.QueueDepth, c.cfg.QueueDepth)
	}
	if w.Verify && !c.region.Patterned {
		return m, errors.New("verify: the server's file holds no rdmasweep pattern (it was not made with --create), so its bytes cannot be checked")
	}
	size := int64(c.region.Length)
	blocks := workload.Blocks(size, w.BlockSize)
	order, err := workload.New(w.Pattern, blocks, w.Seed)
	if err != nil {
		return m, fmt.Errorf("block size %d against a region of %d bytes: %w", w.BlockSize, size, err)
	}
	var perm []int64
	if w.Pattern == "random" {
		perm = workload.Permutation(order.Blocks(), w.Seed)
	}
	total, dur := w.Total, w.Duration
	if dur > 0 {
		total = 0
	} else if total <= 0 {
		total = size
	}
	reads := (total + int64(w.BlockSize) - 1) / int64(w.BlockSize)

	cancel := (*C.int)(C.calloc(1, C.size_t(unsafe.Sizeof(C.int(0)))))
	defer C.free(unsafe.Pointer(cancel))
	stop := context.AfterFunc(ctx, func() { atomic.StoreInt32((*int32)(unsafe.Pointer(cancel)), 1) })
	defer stop()
	if ctx.Err() != nil {
		return m, ctx.Err()
	}

	var h results.Histogram
	// The arguments live in C memory: they hold pointers (the QP array,
	// the buffer) that cgo would not let Go memory carry into C.
	a := (*C.rs_run_args)(C.calloc(1, C.size_t(unsafe.Sizeof(C.rs_run_args{}))))
	defer C.free(unsafe.Pointer(a))
	*a = C.rs_run_args{
		qps: c.q.arr, nqp: C.int(len(c.q.qps)), cq: c.q.cq,
		buf: (*C.uint8_t)(c.buf), lkey: c.mr.lkey, raddr: C.uint64_t(c.region.Addr), rkey: C.uint32_t(c.region.RKey),
		bs: C.uint32_t(w.BlockSize), qd: C.int(w.QueueDepth), nblocks: C.int64_t(blocks),
		start: C.int64_t(c.next), warmup_ns: C.uint64_t(w.Warmup.Nanoseconds()),
		count: C.int64_t(reads), duration_ns: C.uint64_t(dur.Nanoseconds()),
		seed: C.uint64_t(c.region.Seed), cancel: cancel, stall_ns: C.uint64_t(stallTimeout.Nanoseconds()),
	}
	if dur > 0 {
		a.count = 0
	}
	if w.Verify {
		a.verify = 1
	}
	// perm and h.Counts are Go memory without pointers, pinned for the call.
	var pinner runtime.Pinner
	if perm != nil {
		pinner.Pin(&perm[0])
		a.perm = (*C.int64_t)(unsafe.Pointer(&perm[0]))
	}
	pinner.Pin(&h.Counts[0])
	a.hist = (*C.uint64_t)(unsafe.Pointer(&h.Counts[0]))
	var o C.rs_run_out
	cpu := transport.StartCPU()
	C.rs_run(a, &o)
	used := cpu()
	pinner.Unpin()

	c.next = int64(o.next)
	c.bytes += int64(o.bytes)
	c.reads += int64(o.reads)
	switch o.status {
	case C.RS_OK:
	case C.RS_CANCELLED:
		return m, ctx.Err()
	case C.RS_MISMATCH:
		return m, fmt.Errorf("%w: byte at offset %d of %s does not hold the pattern for seed %#x", transport.ErrMismatch, int64(o.bad_offset), c.cfg.Addr, c.region.Seed)
	case C.RS_WC_ERROR:
		c.broken = wcError(o, c)
		return m, c.broken
	case C.RS_STALLED:
		c.broken = fmt.Errorf("no RDMA READ completed for %s with reads in flight; hint: the server may be gone, or the path between the hosts drops RoCE traffic", stallTimeout)
		return m, c.broken
	default:
		c.broken = &VerbError{Verb: C.GoString(o.verb), Errno: syscall.Errno(o.errnum), Hint: "the QP may be in error after a failed READ"}
		return m, c.broken
	}
	h.N, h.Sum, h.Max = uint64(o.reads), uint64(o.lat_sum), uint64(o.lat_max)
	gi := c.gid.Index
	return transport.Measurement{
		Bytes:    int64(o.reads) * int64(w.BlockSize),
		Reads:    int64(o.reads),
		Seconds:  float64(o.seconds_ns) / 1e9,
		Latency:  h.Summary(),
		Verified: w.Verify,
		GIDIndex: &gi,
		CPU:      used,
	}, nil
}

func wcError(o C.rs_run_out, c *client) error {
	st := C.enum_ibv_wc_status(o.wc_status)
	msg := fmt.Sprintf("RDMA READ on QP %d completed with %s (wc status %d, vendor error %#x)",
		int(o.wc_qp), C.GoString(C.ibv_wc_status_str(st)), int(o.wc_status), int(o.vendor_err))
	switch st {
	case C.IBV_WC_RETRY_EXC_ERR:
		msg += fmt.Sprintf("; hint: the server never answered: GID types (RoCE v1/v2) or subnets may not match on the two sides; this side used gid_index %d (%s %s) — compare with `node devices` on both hosts", c.gid.Index, c.gid.Type, c.gid.GID)
	case C.IBV_WC_REM_ACCESS_ERR:
		msg += "; hint: the server refused the access: the read fell outside its region, or the region was deregistered"
	case C.IBV_WC_RNR_RETRY_EXC_ERR:
		msg += "; hint: the server's QP was not ready; with odp, page faults that take too long look like this"
	}
	return errors.New(msg)
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
	if c.conn != nil {
		c.conn.Close()
	}
	c.q.destroy()
	c.q = nil
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
