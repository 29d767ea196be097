package tcp

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"rdmasweep/node/region"
	"rdmasweep/results"
)

// io direct over tcp (ServerConfig.IO): the server reads the file with
// O_DIRECT, off the page cache, into a ring of DirectSlots buffers of
// directBuffer bytes, region after region, and answers each request from
// the buffer its region is in, once read; a buffer is refilled once every
// byte of its region has been sent. The client reads the file once, in
// order, in blocks that divide directBuffer.

// directBuffer is the ring's buffer size over tcp: the file's regions.
const directBuffer = results.DirectTCPBuffer

// directRing is io direct's file and ring, for the server's life.
type directRing struct {
	fd    int
	ring  []byte
	slots int
}

// openDirect opens the file with O_DIRECT and maps the ring.
func openDirect(cfg regionConfig) (*directRing, error) {
	fd, err := region.OpenDirect(cfg.path)
	if err != nil {
		return nil, err
	}
	slots := results.DirectSlots(cfg.window, results.MRCount(cfg.size, directBuffer))
	ring, err := unix.Mmap(-1, 0, slots*directBuffer, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("map io direct's ring of %d × %d bytes: %w", slots, directBuffer, err)
	}
	_ = unix.Madvise(ring, unix.MADV_HUGEPAGE)
	return &directRing{fd: fd, ring: ring, slots: slots}, nil
}

func (d *directRing) close() {
	unix.Munmap(d.ring)
	unix.Close(d.fd)
}

// regionConfig is what openDirect needs of the server's config.
type regionConfig struct {
	path   string
	size   int64
	window int
}

// directSession is one client's stream through the ring: what is read
// in, what is sent, and the readers' figures.
type directSession struct {
	d      *directRing
	sizes  []int64
	starts []int64
	t0     time.Time

	mu    sync.Mutex
	moved chan struct{} // closed and replaced on every change below
	in    int           // regions read in, from the first
	sent  []int64       // bytes of each region sent
	freed int           // regions wholly sent, from the first: their buffers free
	err   error         // the readers' failure
	tl    []results.RegionStages

	stop   context.CancelFunc
	done   chan struct{}
	stream region.Stream
}

// start begins reading the file of size bytes into d's ring.
func (d *directRing) start(ctx context.Context, size int64) *directSession {
	n := int(results.MRCount(size, directBuffer))
	s := &directSession{d: d, sizes: make([]int64, n), starts: make([]int64, n), sent: make([]int64, n), tl: make([]results.RegionStages, n),
		moved: make(chan struct{}), done: make(chan struct{}), t0: time.Now()}
	for i := range n {
		s.starts[i] = int64(i) * directBuffer
		s.sizes[i] = min(directBuffer, size-s.starts[i])
	}
	ctx, s.stop = context.WithCancel(ctx)
	ms := func(t time.Time) float64 { return float64(t.Sub(s.t0)) / 1e6 }
	go func() {
		defer close(s.done)
		st, err := region.StreamDirect(ctx, d.fd, s.sizes, region.PopulateReaders, s.slot, s.admit, func(i int, rt region.RegionTimes) {
			now := ms(time.Now())
			s.mu.Lock()
			s.tl[i] = results.RegionStages{PopulateStartMs: ref(ms(rt.First)), PopulateEndMs: ref(ms(rt.Last)), RegisterStartMs: now, RegisterEndMs: now, AnnouncedMs: now}
			s.in = i + 1 // ready is called in order
			s.mu.Unlock()
			s.changed()
		})
		s.mu.Lock()
		s.stream, s.err = st, err
		s.mu.Unlock()
		s.changed()
	}()
	return s
}

func ref[T any](v T) *T { return &v }

// slot is region i's buffer.
func (s *directSession) slot(i int) []byte {
	k := i % s.d.slots
	return s.d.ring[k*directBuffer : (k+1)*directBuffer]
}

// changed wakes every waiter.
func (s *directSession) changed() {
	s.mu.Lock()
	close(s.moved)
	s.moved = make(chan struct{})
	s.mu.Unlock()
}

// wait waits until ok (called under s.mu) holds, or ctx ends.
func (s *directSession) wait(ctx context.Context, ok func() bool) error {
	for {
		s.mu.Lock()
		if ok() {
			s.mu.Unlock()
			return nil
		}
		moved := s.moved
		s.mu.Unlock()
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// admit waits until region i's buffer is free: the region before it in
// that buffer has been sent whole.
func (s *directSession) admit(ctx context.Context, i int) error {
	return s.wait(ctx, func() bool { return i < s.freed+s.d.slots })
}

// bytes returns the n bytes at off from the ring; with block set it waits
// for their region to be read in, else it says whether they are in.
func (s *directSession) bytes(ctx context.Context, off int64, n int, block bool) ([]byte, bool, error) {
	i := int(off / directBuffer)
	if i >= len(s.sizes) || off+int64(n) > s.starts[i]+s.sizes[i] {
		return nil, false, fmt.Errorf("io direct: %d bytes at %d span two of its %d-byte regions; read in blocks that divide it", n, off, directBuffer)
	}
	in := func() bool { return s.in > i || s.err != nil }
	if block {
		if err := s.wait(ctx, in); err != nil {
			return nil, false, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case i < s.freed:
		return nil, false, fmt.Errorf("io direct: bytes at %d again: it serves the file once, in order, and that region's buffer is refilled", off)
	case s.in > i:
		at := off - s.starts[i]
		return s.slot(i)[at : at+int64(n)], true, nil
	case s.err != nil:
		return nil, false, fmt.Errorf("read the file with O_DIRECT: %w", s.err)
	}
	return nil, false, nil
}

// sentBytes records n bytes at off as sent, freeing the buffers of the
// regions now sent whole.
func (s *directSession) sentBytes(off int64, n int) {
	s.mu.Lock()
	s.sent[off/directBuffer] += int64(n)
	for s.freed < len(s.sizes) && s.sent[s.freed] >= s.sizes[s.freed] {
		s.freed++
	}
	s.mu.Unlock()
	s.changed()
}

// finish stops the readers and returns their figures.
func (s *directSession) finish(size int64) *results.Pipeline {
	s.stop()
	<-s.done
	secs := s.stream.End.Sub(s.stream.Start).Seconds()
	p := &results.Pipeline{Regions: len(s.sizes), Mapping: "direct", Window: s.d.slots, PopulateS: &secs, DiskIdlePct: ref(s.stream.IdlePct())}
	if s.in == len(s.sizes) {
		p.Timeline = s.tl
		if secs > 0 {
			p.PopulateMBs = ref(float64(size) / 1e6 / secs)
		}
	}
	return p
}

// writevDirect returns the sender of replies from the ring: in one writev
// while their regions are in; before waiting for one that is not, it
// sends what it holds, whose buffers the wait may need freed.
func (s *server) writevDirect(ctx context.Context, c net.Conn, d *directSession) func([]reply) error {
	parts := make(net.Buffers, 0, 2*maxBatch)
	var held []reply
	send := func() error {
		bufs := parts // WriteTo consumes its receiver
		if _, err := bufs.WriteTo(c); err != nil {
			return err
		}
		for _, q := range held {
			d.sentBytes(q.off, q.n)
		}
		parts, held = parts[:0], held[:0]
		return nil
	}
	return func(rs []reply) error {
		for _, q := range rs {
			b, ok, err := d.bytes(ctx, q.off, q.n, false)
			if err == nil && !ok {
				if err := send(); err != nil {
					return err
				}
				b, _, err = d.bytes(ctx, q.off, q.n, true)
			}
			if err != nil {
				return err
			}
			parts, held = append(parts, q.hdr, b), append(held, q)
		}
		return send()
	}
}
