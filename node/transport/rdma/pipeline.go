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
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"rdmasweep/node/region"
	"rdmasweep/node/transport"
	"rdmasweep/results"
)

// A pipelined server (ServerConfig.Pipeline) maps the file at Listen and
// registers nothing: its preparation runs in the session, memory region
// by memory region, while the client reads the ones announced before.

// mapForPipeline checks the memory regions the file will be registered
// as and maps it by the first mapping; registering the first region
// tries the others (see mappings) if that one cannot be pinned.
func (s *server) mapForPipeline() error {
	spans, err := s.memoryRegions()
	if err != nil {
		return err
	}
	m := mappings(s.cfg.Region.Writable)[0]
	mem, err := unix.Mmap(int(s.cfg.Region.File.Fd()), 0, int(s.cfg.Region.Size), m.prot, m.flags)
	if err != nil {
		return fmt.Errorf("map %s: %w", s.cfg.Region.Path, err)
	}
	s.mem, s.spans, s.mrSize = mem, spans, spans[0].len
	s.ready.Mapping = m.name
	return nil
}

// startPipeline starts a pipelined server's preparation for the session
// on c, and returns the function that waits for it: after the client's
// bye or failure, it stops what is left and returns the preparation's
// figures or, when populating or registering failed, that failure (the
// client's own error then only echoes it). Without a pipeline it returns
// nil, nil. With a window it also returns the function readEnd passes the
// client's releases to; nil otherwise.
func (s *server) startPipeline(ctx context.Context, c net.Conn) (wait func() (*results.Pipeline, error), release func(int) error) {
	if !s.cfg.Pipeline && s.ring == nil {
		return func() (*results.Pipeline, error) { return nil, nil }, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	w := s.newWindow()
	var p *results.Pipeline
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		if s.ring != nil {
			p, err = s.pipelineDirect(ctx, c, w)
		} else {
			p, err = s.pipeline(ctx, c, w)
		}
	}()
	wait = func() (*results.Pipeline, error) {
		cancel()
		<-done
		if errors.As(err, new(*prepError)) {
			return nil, err
		}
		return p, nil
	}
	if w != nil {
		release = w.release
	}
	return wait, release
}

// window is a windowed pipeline's account of the client's releases: the
// pipeline takes each from released, in order, to deregister it (io
// direct: to free its buffer); admit holds the readers within reach.
type window struct {
	size     int
	ahead    int      // admit's reach: regions past the last one dropped
	released chan int // the client's releases, as readEnd receives them
	next     int      // the release readEnd expects next

	mu      sync.Mutex
	dropped int           // regions deregistered
	moved   chan struct{} // closed and replaced when dropped grows
}

func newWindow(size, regions, ahead int) *window {
	if size <= 0 || size >= regions {
		return nil // nothing to bound: every region fits in it
	}
	return &window{size: size, ahead: ahead, released: make(chan int, regions), moved: make(chan struct{})}
}

// newWindow is s's window, nil when it has none: a pipelined server's
// window, whose readers may read one window beyond the registered
// regions into the page cache, or io direct's ring, whose readers fill
// a buffer only once its last region was released.
func (s *server) newWindow() *window {
	if s.ring != nil {
		return newWindow(s.ring.slots, len(s.spans), s.ring.slots)
	}
	if !s.cfg.Pipeline {
		return nil
	}
	return newWindow(s.cfg.Window, len(s.spans), 2*s.cfg.Window)
}

// release takes the client's release of memory region i, which must be
// the next in order; it never blocks.
func (w *window) release(i int) error {
	if i != w.next || i >= cap(w.released) {
		return fmt.Errorf("%w: release of memory region %d, want %d (they come in order, once each)", errProtocol, i+1, w.next+1)
	}
	w.next++
	w.released <- i
	return nil
}

// droppedOne records a deregistered region, waking admit's waiters.
func (w *window) droppedOne() {
	w.mu.Lock()
	w.dropped++
	close(w.moved)
	w.moved = make(chan struct{})
	w.mu.Unlock()
}

// admit waits until region i may be read: no further than ahead regions
// past the last one dropped, so the disk keeps reading while the client
// READs without the file piling up in memory ahead.
func (w *window) admit(ctx context.Context, i int) error {
	for {
		w.mu.Lock()
		ok, moved := i < w.dropped+w.ahead, w.moved
		w.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pipeline prepares the memory regions in order, its stages overlapped:
// cfg.Populate's readers bring the file in ahead (with no pause at a
// region's end), while this goroutine registers each region as soon as
// it is in and sends its ready-region on c at once. With a window w, it
// registers region i only once the client has released region i − size,
// which it deregisters first. On a failure it sends c an abort with the
// reason, so the client's read fails saying why, and returns the error;
// it returns only once the readers have stopped.
func (s *server) pipeline(ctx context.Context, c net.Conn, w *window) (*results.Pipeline, error) {
	t0 := time.Now()
	ms := func(t time.Time) float64 { return float64(t.Sub(t0)) / 1e6 }
	tl := make([]results.RegionStages, len(s.spans))
	in := make(chan int, len(s.spans)) // regions in the page cache, in order
	var stream region.Stream
	var popErr error
	popCtx, stopPop := context.WithCancel(ctx)
	popDone := make(chan struct{})
	if s.cfg.Populate != nil {
		sizes := make([]int64, len(s.spans))
		for i, sp := range s.spans {
			sizes[i] = int64(sp.len)
		}
		go func() {
			defer close(popDone)
			defer close(in)
			var admit func(context.Context, int) error
			if w != nil {
				admit = w.admit
			}
			stream, popErr = s.cfg.Populate(popCtx, sizes, admit, func(i int, rt region.RegionTimes) {
				tl[i].PopulateStartMs, tl[i].PopulateEndMs = ref(ms(rt.First)), ref(ms(rt.Last))
				in <- i // never blocks: the channel holds every region
			})
		}()
	} else {
		for i := range s.spans {
			in <- i // the registration faults each in
		}
		close(in)
		close(popDone)
	}
	defer func() { stopPop(); <-popDone }()
	var regS float64
	var pinned, peak int64
	dropped := 0
	for i := range s.spans {
		for w != nil && i-dropped >= w.size {
			n, err := s.dropReleased(ctx, w)
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return nil, s.pipelineFailed(ctx, c, err)
			}
			pinned, dropped = pinned-n, dropped+1
		}
		if _, ok := <-in; !ok {
			<-popDone
			if ctx.Err() != nil {
				return nil, ctx.Err() // the session ended: register no more
			}
			return nil, s.pipelineFailed(ctx, c, fmt.Errorf("populate memory region %d of %d: %w", i+1, len(s.spans), popErr))
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		start := time.Now()
		mr, err := s.registerSpan(i)
		if err != nil {
			return nil, s.pipelineFailed(ctx, c, err)
		}
		end := time.Now()
		regS += end.Sub(start).Seconds()
		pinned += int64(s.spans[i].len)
		peak = max(peak, pinned)
		s.mrMu.Lock()
		s.mrs = append(s.mrs, mr)
		s.mrMu.Unlock()
		if err := writeMsg(c, kindRegion, regionBody(i, uint32(mr.rkey), uint64(uintptr(unsafe.Pointer(&s.mem[0]))))); err != nil {
			return nil, fmt.Errorf("announce memory region %d of %d: %w", i+1, len(s.spans), err)
		}
		tl[i].RegisterStartMs, tl[i].RegisterEndMs, tl[i].AnnouncedMs = ms(start), ms(end), ms(time.Now())
	}
	<-popDone
	// The rest are released as the client reads them, until its bye.
	for ; w != nil && dropped < len(s.spans); dropped++ {
		if _, err := s.dropReleased(ctx, w); err != nil {
			break
		}
	}
	s.pinnedPeak.Store(peak)
	return s.pipelineFigures(regS, stream, tl, w), nil
}

// pipelineFigures are a pipeline's figures: its regions, registration
// time (regS) and populate's stream, with their rates over the file.
func (s *server) pipelineFigures(regS float64, stream region.Stream, tl []results.RegionStages, w *window) *results.Pipeline {
	size := float64(s.cfg.Region.Size) / 1e6
	p := &results.Pipeline{Regions: len(s.spans), Mapping: s.ready.Mapping, RegistrationS: &regS, Timeline: tl}
	if w != nil {
		p.Window = w.size
	}
	if regS > 0 {
		p.RegistrationMBs = ref(size / regS)
	}
	if s.cfg.Populate != nil {
		popS := stream.End.Sub(stream.Start).Seconds()
		p.PopulateS, p.DiskIdlePct = &popS, ref(stream.IdlePct())
		if popS > 0 {
			p.PopulateMBs = ref(size / popS)
		}
	}
	return p
}

// dropReleased waits for the client's next release and deregisters that
// memory region (dropRegion), returning its length.
func (s *server) dropReleased(ctx context.Context, w *window) (int64, error) {
	select {
	case j := <-w.released:
		if err := s.dropRegion(j); err != nil {
			return 0, err
		}
		w.droppedOne()
		return int64(s.spans[j].len), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// ref is a pointer to a copy of v.
func ref[T any](v T) *T { return &v }

// prepError is a pipelined preparation's own failure: populating or
// registering a memory region.
type prepError struct{ err error }

func (e *prepError) Error() string { return e.err.Error() }
func (e *prepError) Unwrap() error { return e.err }

// pipelineFailed sends the client err as an abort and closes the
// connection, so the session ends even if the abort is lost (the client
// then fails on the closed connection), and returns err as a prepError;
// unless the session was ending anyway (ctx done).
func (s *server) pipelineFailed(ctx context.Context, c net.Conn, err error) error {
	if ctx.Err() != nil {
		return err
	}
	sendAbort(c, err)
	c.Close()
	return &prepError{err}
}

// dropRegion deregisters memory region i, which the client has read,
// and drops its pages: from the mapping, and from the page cache, so
// neither pinned memory nor the cache holds more than the window.
func (s *server) dropRegion(i int) error {
	s.mrMu.Lock()
	mr := s.mrs[i]
	s.mrs[i] = nil
	s.mrMu.Unlock()
	if rc := C.ibv_dereg_mr(mr); rc != 0 {
		return fmt.Errorf("deregister memory region %d of %d: %w", i+1, len(s.spans), syscall.Errno(rc))
	}
	sp := s.spans[i]
	_ = unix.Madvise(s.mem[sp.off:sp.off+sp.len], unix.MADV_DONTNEED)
	_ = unix.Fadvise(int(s.cfg.Region.File.Fd()), int64(sp.off), int64(sp.len), unix.FADV_DONTNEED)
	return nil
}

// registerSpan registers memory region i. The first tries the other
// mappings, remapping the file, when the kernel refuses to pin it
// through the one mapForPipeline chose, as register does.
func (s *server) registerSpan(i int) (*C.struct_ibv_mr, error) {
	access := C.int(C.IBV_ACCESS_REMOTE_READ)
	if i == 0 {
		r, err := s.mapAndRegister(s.mem, s.spans[:1], access)
		if err != nil {
			s.mem = nil // unmapped by the tries
			return nil, err
		}
		s.mem, s.ready.Mapping = r.mem, r.name
		return r.mrs[0], nil
	}
	sp := s.spans[i]
	var mr *C.struct_ibv_mr
	st := C.rs_reg_mr(s.dev.pd, unsafe.Pointer(&s.mem[sp.off]), C.size_t(sp.len), access, &mr)
	if st.verb != nil {
		need, _ := pinnedNeed(s.cfg)
		return nil, fmt.Errorf("register memory region %d of %d (%d bytes at %d): %w", i+1, len(s.spans), sp.len, sp.off, verbErr(st, memlockHint(uint64(need))))
	}
	return mr, nil
}

// gate is a pipelined client's side: the rs_gate the C loop reads, in C
// memory, and the reader of the server's ready-region messages that
// opens it region by region.
type gate struct {
	g     *C.rs_gate
	n     int
	err   atomic.Pointer[error]
	done  chan struct{}
	spans []prefetchSegment
}

// openGate allocates the gate and starts reading the server's
// announcements on the connection. A failure (the server's abort, or the
// connection lost) is kept and stops the Read under way.
func (c *client) openGate() error {
	n := len(c.region.RKeys)
	g := &gate{n: n, done: make(chan struct{}), spans: mrSpans(c.region.Length, c.region.MRSize)}
	g.g = (*C.rs_gate)(C.calloc(1, C.size_t(unsafe.Sizeof(C.rs_gate{}))))
	if g.g == nil {
		return errors.New("allocate the pipeline's gate: out of memory")
	}
	g.g.rkeys = (*C.uint32_t)(C.calloc(C.size_t(n), 4))
	g.g.raddrs = (*C.uint64_t)(C.calloc(C.size_t(n), 8))
	if g.g.rkeys == nil || g.g.raddrs == nil {
		C.free(unsafe.Pointer(g.g.rkeys))
		C.free(unsafe.Pointer(g.g.raddrs))
		C.free(unsafe.Pointer(g.g))
		return errors.New("allocate the pipeline's rkeys: out of memory")
	}
	c.gate = g
	go c.readAnnouncements()
	return nil
}

// readAnnouncements opens the gate one memory region at a time as the
// server announces them: its rkey and address before ready moves past
// it.
func (c *client) readAnnouncements() {
	g := c.gate
	defer close(g.done)
	rkeys, raddrs := unsafe.Slice(g.g.rkeys, g.n), unsafe.Slice(g.g.raddrs, g.n)
	for i := range g.n {
		rkey, addr, err := readRegion(c.conn, i, g.n)
		if err != nil {
			if !c.closeMu.Load() {
				g.err.CompareAndSwap(nil, &err)
				c.stopRead()
			}
			return
		}
		rkeys[i], raddrs[i] = C.uint32_t(rkey), C.uint64_t(addr)
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&g.g.ready)), g.spans[i].off+g.spans[i].len)
	}
}

// stopRead sets the cancel flag of the Read under way, if any.
func (c *client) stopRead() {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	if c.running != nil {
		atomic.StoreInt32(c.running, 1)
	}
}

// failed is the gate's failure, nil while the announcements are sound
// (and for a client without a gate).
func (g *gate) failed() error {
	if g == nil {
		return nil
	}
	if ep := g.err.Load(); ep != nil {
		return *ep
	}
	return nil
}

// close waits for the reader (the connection is closed) and frees the
// gate's C memory.
func (g *gate) close() {
	if g == nil || g.g == nil {
		return
	}
	<-g.done
	C.free(unsafe.Pointer(g.g.left))
	C.free(unsafe.Pointer(g.g.raddrs))
	C.free(unsafe.Pointer(g.g.rkeys))
	C.free(unsafe.Pointer(g.g))
	g.g = nil
}

// windowed refuses a workload a windowed server cannot serve: one that
// does not read the file once from its start (the regions behind the
// reads are deregistered), and a second Read.
func (c *client) windowed(w transport.Workload, reads, blocks int64) error {
	switch {
	case c.gate.g.left != nil || c.next != 0:
		return errors.New("the server's window deregisters each memory region once read: it serves one Read of the file; hint: one point per connection")
	case w.Warmup > 0 || w.Duration > 0 || w.Pattern == "random" || reads != blocks:
		return errors.New("the server's window deregisters each memory region once read, so the client must read the file once from its start; hint: with server.window, drop warmup, duration and total, and read sequentially")
	}
	return nil
}

// startReleases refuses a workload a windowed server cannot serve, and
// starts its releases (releaseRegions); without a window the function
// it returns does nothing.
func (c *client) startReleases(w transport.Workload, reads, blocks int64) (stop func() error, err error) {
	if !c.region.Windowed {
		return func() error { return nil }, nil
	}
	if err := c.windowed(w, reads, blocks); err != nil {
		return nil, err
	}
	return c.releaseRegions(int64(w.BlockSize))
}

// releaseRegions counts each memory region's READs for the loop
// (rs_gate.left), then, while it runs, sends the server a release for
// each region the loop has read, in order; it returns the function that
// stops it once the loop has returned, sending what is left.
func (c *client) releaseRegions(bs int64) (stop func() error, err error) {
	g := c.gate
	left := (*C.uint32_t)(C.calloc(C.size_t(g.n), 4))
	if left == nil {
		return nil, errors.New("allocate the window's counts: out of memory")
	}
	for i := range unsafe.Slice(left, g.n) {
		unsafe.Slice(left, g.n)[i] = C.uint32_t((int64(g.spans[i].len) + bs - 1) / bs)
	}
	g.g.left, g.g.nregions, g.g.read = left, C.int64_t(g.n), 0
	sent := 0
	var sendErr error
	send := func() {
		for read := int(atomic.LoadInt64((*int64)(unsafe.Pointer(&g.g.read)))); sent < read && sendErr == nil; sent++ {
			sendErr = writeMsg(c.conn, kindRelease, releaseBody(sent))
		}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				send()
			}
		}
	}()
	return func() error {
		close(quit)
		<-done
		send()
		if sendErr != nil {
			return fmt.Errorf("release memory region %d of %d: %w", sent+1, g.n, sendErr)
		}
		return nil
	}, nil
}

// onePass reports whether a run read the region once from its start:
// a closed loop of exactly its blocks, begun at read 0, without warmup.
func onePass(w transport.Workload, blocks, reads, start int64) bool {
	return w.Rate == 0 && w.Warmup == 0 && w.Duration == 0 && start == 0 && reads == blocks
}

// sinceHandshake is the seconds from the handshake's end to t
// (CLOCK_MONOTONIC ns), nil for no time.
func (c *client) sinceHandshake(t C.uint64_t) *float64 {
	if t == 0 || uint64(t) < c.handshakeNs {
		return nil
	}
	s := float64(uint64(t)-c.handshakeNs) / 1e9
	return &s
}

// monotonicNs is CLOCK_MONOTONIC in ns, the clock of the C loop's stamps.
func monotonicNs() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}
