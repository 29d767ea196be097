package region

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"rdmasweep/results"
)

// PopulateReaders is how many readers Populate runs at once
// (results.PopulateReaders, which says why 8).
const PopulateReaders = results.PopulateReaders

// madvPopulateRead is MADV_POPULATE_READ (Linux 5.14): fault a range of
// a mapping in, readable, without touching it page by page.
const madvPopulateRead = 22

// Populate brings the first Size bytes into the page cache with readers
// over disjoint ranges, through a mapping of its own that it drops before
// returning (a later mapping of the file, such as the one an RDMA
// registration pins, then finds every page cached), and returns how long
// that took. A byte a page is read after each madvise, which faults in
// whatever it left out (all of it before Linux 5.14, or under an
// emulator that ignores the advice). Cancelling ctx stops the readers between chunks.
func (r *File) Populate(ctx context.Context, readers int) (time.Duration, error) {
	m, err := unix.Mmap(int(r.File.Fd()), 0, int(r.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, fmt.Errorf("populate %s: mmap: %w", r.Path, err)
	}
	defer unix.Munmap(m)
	// Sequential: each fault reads ahead the file's whole window and the
	// pages behind it may go first under pressure.
	_ = unix.Madvise(m, unix.MADV_SEQUENTIAL)
	start := time.Now()
	if err := PopulateMapping(ctx, m, readers); err != nil {
		return 0, fmt.Errorf("populate %s: %w", r.Path, err)
	}
	return time.Since(start), nil
}

// PopulateMapping brings b, part of a file's mapping, into memory as
// Populate does: readers over disjoint ranges of it. A pipelined server
// populates each memory region of its own mapping with it.
func PopulateMapping(ctx context.Context, b []byte, readers int) error {
	rs := populateRanges(len(b), readers, os.Getpagesize())
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, rg := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = populateRange(ctx, b[rg.lo:rg.hi])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// span is a byte range [lo, hi) of a mapping.
type span struct{ lo, hi int }

// populateRanges splits n bytes into at most readers contiguous ranges,
// each a whole number of pages but the last, covering n.
func populateRanges(n, readers, page int) []span {
	readers = max(readers, 1)
	per := ((n+readers-1)/readers + page - 1) / page * page
	var out []span
	for lo := 0; lo < n; lo += per {
		out = append(out, span{lo, min(lo+per, n)})
	}
	return out
}

// populateChunk is how much one madvise call faults in between checks of
// ctx: large enough that the call's cost is nothing beside the reads.
const populateChunk = 16 << 20

// populateRange faults b in, populateChunk at a time.
func populateRange(ctx context.Context, b []byte) error {
	for lo := 0; lo < len(b); lo += populateChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := b[lo:min(lo+populateChunk, len(b))]
		err := unix.Madvise(c, madvPopulateRead)
		if err != nil && !errors.Is(err, unix.EINVAL) { // EINVAL: before 5.14
			return fmt.Errorf("madvise(MADV_POPULATE_READ) at %d: %w", lo, err)
		}
		// A byte a page: nothing to fault after a populate, a read of
		// every page where madvise could not (before 5.14) or took the
		// advice without acting on it (qemu-user's emulation does).
		touch(c)
	}
	return nil
}

// sink keeps touch's reads from being optimised away.
var sink atomic.Uint32

// touch reads a byte of every page of b.
func touch(b []byte) {
	page := os.Getpagesize()
	var s byte
	for i := 0; i < len(b); i += page {
		s += b[i]
	}
	sink.Add(uint32(s))
}

// Stream is what a streaming populate did: when its first read began,
// when its last ended, and for how much of that span at least one read
// was in flight.
type Stream struct {
	Start, End time.Time
	Busy       time.Duration
}

// IdlePct is the share of the span from the first read's start to the
// last's end with no read in flight, in percent; 0 for no span.
func (s Stream) IdlePct() float64 {
	span := s.End.Sub(s.Start)
	if span <= 0 {
		return 0
	}
	return 100 * max(0, float64(span-s.Busy)) / float64(span)
}

// RegionTimes is when a streaming populate's first read of a region
// began and its last ended.
type RegionTimes struct{ First, Last time.Time }

// readChunk faults one chunk in; a test slows it to see the readers'
// order.
var readChunk = populateRange

// PopulateStream brings the file's first Size bytes into the page cache
// as consecutive regions of the lengths in sizes, in order, through a
// mapping of its own (the server's mapping of the file may be replaced
// while it runs: the first registration may remap it). Its readers take
// the next chunk in file order as each finishes its last, across region
// boundaries, so the device's queue is as full at a region's end as
// within it: no reader waits for the others at a boundary. ready is
// called in region order, once each region's bytes are all in, by the
// reader that finished the last of them; it must not block. admit, when
// not nil, is asked before each read of region i and waits until that
// region may be read (a window of registered regions holds the readers
// back); its error stops them. It returns when every region is in, at
// the first failure, or when ctx ends.
func (r *File) PopulateStream(ctx context.Context, sizes []int64, readers int, admit func(ctx context.Context, i int) error, ready func(i int, t RegionTimes)) (Stream, error) {
	m, err := unix.Mmap(int(r.File.Fd()), 0, int(r.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return Stream{}, fmt.Errorf("populate %s: mmap: %w", r.Path, err)
	}
	defer unix.Munmap(m)
	_ = unix.Madvise(m, unix.MADV_SEQUENTIAL)
	st, err := populateStream(ctx, m, sizes, readers, admit, ready)
	if err != nil {
		return st, fmt.Errorf("populate %s: %w", r.Path, err)
	}
	return st, nil
}

// piece is a streaming populate's unit: bytes [lo, hi) of region i.
type piece struct{ i, lo, hi int }

// streamChunks splits the regions of the lengths in sizes, laid end to
// end, into chunks of a whole number of pages (the last of a region
// excepted), about a reader's share of a region each and at most
// populateChunk.
func streamChunks(sizes []int64, readers, page int) []piece {
	readers = max(readers, 1)
	var out []piece
	off := 0
	for i, sz := range sizes {
		n := int(sz)
		each := min(populateChunk, max(page, ((n+readers-1)/readers+page-1)/page*page))
		for lo := 0; lo < n; lo += each {
			out = append(out, piece{i, off + lo, off + min(lo+each, n)})
		}
		off += n
	}
	return out
}

func populateStream(ctx context.Context, m []byte, sizes []int64, readers int, admit func(context.Context, int) error, ready func(int, RegionTimes)) (Stream, error) {
	return stream(ctx, sizes, readers, admit, ready, func(ctx context.Context, c piece) error { return readChunk(ctx, m[c.lo:c.hi]) })
}

// stream runs readers over the regions of the lengths in sizes, laid end
// to end, each taking the next chunk in order and reading it with read,
// as PopulateStream describes.
func stream(ctx context.Context, sizes []int64, readers int, admit func(context.Context, int) error, ready func(int, RegionTimes), read func(context.Context, piece) error) (Stream, error) {
	chunks := streamChunks(sizes, readers, os.Getpagesize())
	left := make([]int, len(sizes))
	for _, c := range chunks {
		left[c.i]++
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		times = make([]RegionTimes, len(sizes))
		spans []span // each read's [start, end) in ns from t0
		next  int    // the next region to report
		errs  []error
	)
	t0 := time.Now()
	// A region of no bytes (none is made, but a caller may ask) is in.
	report := func() {
		for next < len(sizes) && left[next] == 0 {
			ready(next, times[next])
			next++
		}
	}
	mu.Lock()
	report()
	mu.Unlock()
	var cursor atomic.Int64
	var wg sync.WaitGroup
	for range max(readers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(cursor.Add(1) - 1)
				if k >= len(chunks) || ctx.Err() != nil {
					return
				}
				c := chunks[k]
				if admit != nil {
					if err := admit(ctx, c.i); err != nil {
						cancel() // the others' waits end with it
						return
					}
				}
				start := time.Now()
				err := read(ctx, c)
				end := time.Now()
				mu.Lock()
				if err != nil {
					// A read cut short by the cancel (another's failure, or
					// ctx's end) is not a failure of its own.
					if ctx.Err() == nil {
						errs = append(errs, fmt.Errorf("bytes %d to %d: %w", c.lo, c.hi, err))
					}
					mu.Unlock()
					cancel()
					return
				}
				spans = append(spans, span{int(start.Sub(t0)), int(end.Sub(t0))})
				rt := &times[c.i]
				if rt.First.IsZero() || start.Before(rt.First) {
					rt.First = start
				}
				if end.After(rt.Last) {
					rt.Last = end
				}
				left[c.i]--
				report()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	st := streamOf(t0, spans)
	if len(errs) > 0 {
		return st, errors.Join(errs...)
	}
	if next < len(sizes) {
		return st, ctx.Err() // cancelled before the last region was in
	}
	return st, nil
}

// streamOf is the Stream of reads at spans (ns from t0): the first start,
// the last end, and the length of their union.
func streamOf(t0 time.Time, spans []span) Stream {
	if len(spans) == 0 {
		return Stream{}
	}
	slices.SortFunc(spans, func(a, b span) int { return a.lo - b.lo })
	var busy time.Duration
	lo, hi := spans[0].lo, spans[0].hi
	end := hi
	for _, s := range spans[1:] {
		if s.lo > hi {
			busy += time.Duration(hi - lo)
			lo, hi = s.lo, s.hi
		} else {
			hi = max(hi, s.hi)
		}
		end = max(end, s.hi)
	}
	busy += time.Duration(hi - lo)
	return Stream{Start: t0.Add(time.Duration(spans[0].lo)), End: t0.Add(time.Duration(end)), Busy: busy}
}

// OpenDirect opens the file at path for reading with O_DIRECT, off the
// page cache, saying so when its filesystem does not take direct I/O.
func OpenDirect(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EINVAL) {
		return -1, fmt.Errorf("open %s with O_DIRECT: %w: its filesystem (tmpfs?) takes no direct I/O; hint: put the file on a disk, or use io: mmap", path, err)
	}
	if err != nil {
		return -1, fmt.Errorf("open %s with O_DIRECT: %w", path, err)
	}
	return fd, nil
}

// directAlign is what O_DIRECT holds offsets, lengths and buffers to:
// the page, a multiple of every device's logical block.
const directAlign = 4096

// StreamDirect reads the file open with O_DIRECT at fd, as regions of the
// lengths in sizes laid end to end, into the buffers dst gives (region
// i's at the start of dst(i), which holds its length rounded up to
// directAlign and starts aligned), the way PopulateStream reads them into
// the page cache: readers take the next chunk in file order as each
// finishes, admit waits until region i's buffer may be filled, and ready
// reports each region, in order, once its bytes are all in. Nothing goes
// through the page cache.
func StreamDirect(ctx context.Context, fd int, sizes []int64, readers int, dst func(i int) []byte, admit func(context.Context, int) error, ready func(int, RegionTimes)) (Stream, error) {
	starts := make([]int, len(sizes))
	for i := 1; i < len(sizes); i++ {
		starts[i] = starts[i-1] + int(sizes[i-1])
	}
	return stream(ctx, sizes, readers, admit, ready, func(ctx context.Context, c piece) error {
		buf := dst(c.i)[c.lo-starts[c.i]:]
		want := c.hi - c.lo
		n := (want + directAlign - 1) / directAlign * directAlign
		if n > len(buf) {
			return fmt.Errorf("region %d's buffer of %d bytes cannot take bytes %d to %d rounded to %d", c.i, len(dst(c.i)), c.lo, c.hi, directAlign)
		}
		for got := 0; got < want; {
			if err := ctx.Err(); err != nil {
				return err
			}
			k, err := unix.Pread(fd, buf[got:n], int64(c.lo+got))
			if err != nil {
				return fmt.Errorf("pread with O_DIRECT at %d: %w", c.lo+got, err)
			}
			if k == 0 {
				return fmt.Errorf("pread with O_DIRECT at %d: the file ends at %d", c.lo+got, c.lo+got)
			}
			got += k
		}
		return nil
	})
}
