package region

import (
	"context"
	"errors"
	"fmt"
	"os"
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
