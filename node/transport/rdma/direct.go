//go:build rdma

package rdma

// #include "shim.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"rdmasweep/node/region"
	"rdmasweep/results"
)

// io direct (ServerConfig.IO): the server registers a ring of buffers
// once, before ready, and in the session reads the file into it with
// O_DIRECT, one memory region of the file a buffer, announcing each as it
// fills (its ready-region's addr places the file's region on its buffer)
// and refilling a buffer once the client has released the region in it.
// Pinned memory is the ring, whatever the file's size; nothing goes
// through the page cache.

// ring is io direct's ring: its buffers (the server's mem) and the file
// open with O_DIRECT.
type ring struct {
	fd    int
	slots int
}

// setupRing opens the file with O_DIRECT, maps the ring (huge pages where
// the host has them free) and registers it, as one memory region, before
// ready; ready's registration_s is that registration.
func (s *server) setupRing() error {
	spans, err := s.memoryRegions()
	if err != nil {
		return err
	}
	fd, err := region.OpenDirect(s.cfg.Region.Path)
	if err != nil {
		return err
	}
	slotLen := int(spans[0].len)
	slots := results.DirectSlots(s.cfg.Window, int64(len(spans)))
	mem, mapping, err := mapRing(slots * slotLen)
	if err != nil {
		unix.Close(fd)
		return err
	}
	start := time.Now()
	var mr *C.struct_ibv_mr
	st := C.rs_reg_mr(s.dev.pd, unsafe.Pointer(&mem[0]), C.size_t(len(mem)), C.IBV_ACCESS_REMOTE_READ, &mr)
	if st.verb != nil {
		unix.Munmap(mem)
		unix.Close(fd)
		return fmt.Errorf("register io direct's ring (%d buffers of %d bytes): %w", slots, slotLen, verbErr(st, memlockHint(uint64(len(mem)))))
	}
	secs := time.Since(start).Seconds()
	s.mem, s.spans, s.mrSize, s.mrs = mem, spans, uint64(slotLen), []*C.struct_ibv_mr{mr}
	s.ring = &ring{fd: fd, slots: slots}
	s.pinnedPeak.Store(int64(len(mem))) // the ring, all it ever pins
	s.ready.Mapping, s.ready.RegistrationS, s.ready.Regions = mapping, &secs, 1
	return nil
}

// mapRing maps n bytes of anonymous memory for the ring: from the huge
// page pool when it holds enough, else ordinary pages advised to be huge.
func mapRing(n int) ([]byte, string, error) {
	const huge = 2 << 20
	if n%huge == 0 {
		if mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_HUGETLB|unix.MAP_POPULATE); err == nil {
			return mem, "direct-hugetlb", nil
		}
	}
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, "", fmt.Errorf("map io direct's ring of %d bytes: %w", n, err)
	}
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	return mem, "direct", nil
}

// closeRing closes the ring's file; the ring itself goes with s.mem.
func (s *server) closeRing() {
	if s.ring != nil {
		unix.Close(s.ring.fd)
		s.ring = nil
	}
}

// pipelineDirect is io direct's session: readers fill the ring's buffers
// from the file, region after region, a buffer refilled only once the
// client has released the region in it (w: nil when every region has a
// buffer of its own), and this goroutine announces each region as it is
// in. On a failure it sends c an abort, as pipeline does.
func (s *server) pipelineDirect(ctx context.Context, c net.Conn, w *window) (*results.Pipeline, error) {
	t0 := time.Now()
	ms := func(t time.Time) float64 { return float64(t.Sub(t0)) / 1e6 }
	n, slotLen := len(s.spans), int(s.mrSize)
	tl := make([]results.RegionStages, n)
	sizes := make([]int64, n)
	for i, sp := range s.spans {
		sizes[i] = int64(sp.len)
	}
	slot := func(i int) []byte { k := i % s.ring.slots; return s.mem[k*slotLen : (k+1)*slotLen] }
	var admit func(context.Context, int) error
	if w != nil {
		admit = w.admit
		go func() { // a released region's buffer is free
			for range n {
				select {
				case <-w.released:
					w.droppedOne()
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	in := make(chan int, n)
	var stream region.Stream
	var readErr error
	readCtx, stopRead := context.WithCancel(ctx)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(in)
		stream, readErr = region.StreamDirect(readCtx, s.ring.fd, sizes, region.PopulateReaders, slot, admit, func(i int, rt region.RegionTimes) {
			tl[i].PopulateStartMs, tl[i].PopulateEndMs = ref(ms(rt.First)), ref(ms(rt.Last))
			in <- i // never blocks: the channel holds every region
		})
	}()
	defer func() { stopRead(); <-readDone }()
	rkey := uint32(s.mrs[0].rkey)
	for i := range n {
		if _, ok := <-in; !ok {
			<-readDone
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, s.pipelineFailed(ctx, c, fmt.Errorf("read memory region %d of %d with O_DIRECT: %w", i+1, n, readErr))
		}
		// addr is where the file's byte 0 would be were the whole file
		// laid out as region i is in its buffer (mod 2^64): the client
		// READs byte off of region i at addr + off.
		at := time.Now()
		addr := uint64(uintptr(unsafe.Pointer(&slot(i)[0]))) - s.spans[i].off
		if err := writeMsg(c, kindRegion, regionBody(i, rkey, addr)); err != nil {
			return nil, fmt.Errorf("announce memory region %d of %d: %w", i+1, n, err)
		}
		// No registration: the ring was registered before ready.
		tl[i].RegisterStartMs, tl[i].RegisterEndMs, tl[i].AnnouncedMs = ms(at), ms(at), ms(time.Now())
	}
	<-readDone
	if readErr != nil && !errors.Is(readErr, context.Canceled) {
		return nil, s.pipelineFailed(ctx, c, fmt.Errorf("read the file with O_DIRECT: %w", readErr))
	}
	readS := stream.End.Sub(stream.Start).Seconds()
	p := &results.Pipeline{Regions: n, Mapping: s.ready.Mapping, RegistrationS: s.ready.RegistrationS, Window: s.ring.slots, Timeline: tl,
		PopulateS: &readS, DiskIdlePct: ref(stream.IdlePct())}
	if readS > 0 {
		p.PopulateMBs = ref(float64(s.cfg.Region.Size) / 1e6 / readS)
	}
	return p, nil
}
