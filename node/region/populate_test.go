package region

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"rdmasweep/node/pattern"
)

// Populate takes a file whose cache was dropped to wholly resident, and
// its bytes read back through a mapping of its own are the pattern's.
func TestPopulateMakesTheFileResident(t *testing.T) {
	const size = 24<<20 + 4096 + 100 // not a whole number of pages or readers' ranges
	f, err := Open(ctx, filepath.Join(t.TempDir(), "d"), Options{Size: size, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.DropCache(); err != nil {
		t.Fatal(err)
	}
	before, err := f.Residency()
	if err != nil {
		t.Fatal(err)
	}
	d, err := f.Populate(ctx, PopulateReaders)
	if err != nil || d <= 0 {
		t.Fatalf("populate: %v, %v", d, err)
	}
	after, err := f.Residency()
	if err != nil || after < 1 {
		t.Fatalf("residency %.3f after populate (%.3f before): %v; want every page", after, before, err)
	}
	m, err := f.Map()
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(m)
	if bad, ok := pattern.Check(m, 0, f.Seed); !ok {
		t.Fatalf("populated file differs at %d", bad)
	}
	t.Logf("residency %.3f → %.3f in %v", before, after, d)
}

// The readers' ranges cover the mapping exactly once, each (but the last)
// a whole number of pages, whatever the size.
func TestPopulateRanges(t *testing.T) {
	const page = 4096
	for _, n := range []int{1, page - 1, page, page + 1, 8 * page, 8*page + 1, 100 << 20, 100<<20 + 17} {
		for _, readers := range []int{1, 3, 8, 16} {
			rs := populateRanges(n, readers, page)
			if len(rs) > readers {
				t.Errorf("%d bytes, %d readers: %d ranges", n, readers, len(rs))
			}
			at := 0
			for i, r := range rs {
				if r.lo != at || r.hi <= r.lo || i < len(rs)-1 && (r.hi-r.lo)%page != 0 {
					t.Errorf("%d bytes, %d readers: range %d is [%d, %d), want it to start at %d, page-aligned", n, readers, i, r.lo, r.hi, at)
				}
				at = r.hi
			}
			if at != n {
				t.Errorf("%d bytes, %d readers: ranges end at %d", n, readers, at)
			}
		}
	}
}

// A cancelled populate stops and says so.
func TestPopulateCancelled(t *testing.T) {
	f, err := Open(ctx, filepath.Join(t.TempDir(), "d"), Options{Size: 1 << 20, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := f.Populate(cctx, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("populate with a cancelled context: %v", err)
	}
}

// A streaming populate takes a cold file to wholly resident and reports
// its regions once each, in order, each after its own reads.
func TestPopulateStreamReportsRegionsInOrder(t *testing.T) {
	sizes := []int64{1 << 20, 3<<20 + 4096, 1 << 20, 100} // the last not a page
	var size int64
	for _, s := range sizes {
		size += s
	}
	f, err := Open(ctx, filepath.Join(t.TempDir(), "d"), Options{Size: size, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.DropCache(); err != nil {
		t.Fatal(err)
	}
	var got []int
	st, err := f.PopulateStream(ctx, sizes, PopulateReaders, nil, func(i int, rt RegionTimes) {
		if rt.First.IsZero() || rt.Last.Before(rt.First) {
			t.Errorf("region %d: read from %v to %v", i, rt.First, rt.Last)
		}
		got = append(got, i)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Fatalf("regions reported %v, want 0 1 2 3", got)
	}
	if after, err := f.Residency(); err != nil || after < 1 {
		t.Fatalf("residency %.3f after the stream: %v; want every page", after, err)
	}
	if st.End.Before(st.Start) || st.Busy <= 0 || st.Busy > st.End.Sub(st.Start) {
		t.Fatalf("stream %+v: want busy within the span", st)
	}
}

// No reader waits at a region's end: while the last read of region 0 is
// slow, the others go on into regions 1 and 2, which are still reported
// only after region 0. A barrier per region fails this.
func TestPopulateStreamCrossesRegions(t *testing.T) {
	const page = 4096
	sizes := []int64{4 * page, 4 * page, 4 * page}
	m := make([]byte, 12*page)
	slow := make(chan struct{})
	var read atomic.Int32
	defer func(f func(context.Context, []byte) error) { readChunk = f }(readChunk)
	readChunk = func(ctx context.Context, b []byte) error {
		if &b[0] == &m[3*page] { // region 0's last chunk: a page a reader
			<-slow
		}
		read.Add(1)
		return nil
	}
	var got []int
	var times []RegionTimes
	done := make(chan error, 1)
	go func() {
		_, err := populateStream(ctx, m, sizes, 4, nil, func(i int, rt RegionTimes) {
			got, times = append(got, i), append(times, rt)
		})
		done <- err
	}()
	// With region 0's last read held, the other three readers read
	// regions 1 and 2 whole, or the test times out here.
	deadline := time.After(10 * time.Second)
	for read.Load() < 11 {
		select {
		case <-deadline:
			close(slow)
			t.Fatal("the readers stopped at region 0's end while its last read was held")
		case <-time.After(time.Millisecond):
		}
	}
	close(slow)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("regions reported %v, want 0 1 2", got)
	}
	if !times[2].Last.Before(times[0].Last) {
		t.Errorf("region 2 read by %v, region 0 by %v: want region 2 in before region 0's last read ended", times[2].Last, times[0].Last)
	}
}

// A stream's busy time is the union of its reads, not their sum: two
// overlapping reads and a gap.
func TestStreamOf(t *testing.T) {
	t0 := time.Now()
	ms := int(time.Millisecond)
	st := streamOf(t0, []span{{30 * ms, 40 * ms}, {0, 10 * ms}, {5 * ms, 20 * ms}})
	if st.Busy != 30*time.Millisecond || st.End.Sub(st.Start) != 40*time.Millisecond {
		t.Fatalf("busy %v over %v, want 30ms over 40ms", st.Busy, st.End.Sub(st.Start))
	}
	if p := st.IdlePct(); p != 25 {
		t.Fatalf("idle %.1f %%, want 25", p)
	}
}

// A read that fails stops the stream, names the bytes alone (not the
// reads its failure cut short), and reports no region it left out.
func TestPopulateStreamFails(t *testing.T) {
	const page = 4096
	m := make([]byte, 12*page)
	defer func(f func(context.Context, []byte) error) { readChunk = f }(readChunk)
	readChunk = func(ctx context.Context, b []byte) error {
		switch &b[0] {
		case &m[6*page]:
			return errors.New("bad sector")
		case &m[8*page]: // in flight when the bad sector stops the stream
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	var got []int
	_, err := populateStream(ctx, m, []int64{4 * page, 4 * page, 4 * page}, 2, nil, func(i int, _ RegionTimes) { got = append(got, i) })
	if err == nil || !strings.Contains(err.Error(), "bad sector") || !strings.Contains(err.Error(), fmt.Sprintf("bytes %d to %d", 6*page, 8*page)) {
		t.Fatalf("err %v; want the bad sector and its bytes", err)
	}
	if strings.Contains(err.Error(), "canceled") {
		t.Errorf("err %v; want the bad sector alone, not the read it cut short", err)
	}
	if !slices.Equal(got, []int{0}) {
		t.Fatalf("regions reported %v, want region 0 alone", got)
	}
}

// admit holds the readers back: with regions 2 and 3 not admitted, no
// chunk of them is read until they are, and then the stream finishes.
// Dropping the admit call from the readers fails it.
func TestPopulateStreamAdmits(t *testing.T) {
	const page = 4096
	m := make([]byte, 16*page)
	defer func(f func(context.Context, []byte) error) { readChunk = f }(readChunk)
	var mu sync.Mutex
	var readRegions []int
	readChunk = func(ctx context.Context, b []byte) error {
		mu.Lock()
		readRegions = append(readRegions, int(uintptr(unsafe.Pointer(&b[0]))-uintptr(unsafe.Pointer(&m[0])))/(4*page))
		mu.Unlock()
		return nil
	}
	open := make(chan struct{})
	admit := func(ctx context.Context, i int) error {
		if i < 2 {
			return nil
		}
		select {
		case <-open:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	in := make(chan int, 4)
	done := make(chan error, 1)
	go func() {
		_, err := populateStream(ctx, m, []int64{4 * page, 4 * page, 4 * page, 4 * page}, 3, admit, func(i int, _ RegionTimes) { in <- i })
		done <- err
	}()
	for want := range 2 {
		if i := <-in; i != want {
			t.Fatalf("region %d reported, want %d", i, want)
		}
	}
	time.Sleep(50 * time.Millisecond) // time for a reader that ignores admit to read on
	mu.Lock()
	for _, r := range readRegions {
		if r >= 2 {
			t.Errorf("region %d read before it was admitted (reads: %v)", r, readRegions)
			break
		}
	}
	mu.Unlock()
	close(open)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(in) != 2 {
		t.Fatalf("%d more regions reported after the admit, want 2", len(in))
	}
}

// StreamDirect reads a file of 3 whole regions and a ragged last one,
// its cache dropped, through a ring of 2 buffers with O_DIRECT: each
// region, as reported, holds the pattern at its offset; a buffer is
// refilled only once admitted; and the page cache stays empty.
func TestStreamDirect(t *testing.T) {
	const region = 1 << 20
	const size = 3*region + 5000
	f, err := Open(ctx, filepath.Join(t.TempDir(), "d"), Options{Size: size, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.DropCache(); err != nil {
		t.Fatal(err)
	}
	fd, err := OpenDirect(f.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	ring, err := unix.Mmap(-1, 0, 2*region, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(ring)
	slot := func(i int) []byte { return ring[i%2*region : (i%2+1)*region] }
	sizes := []int64{region, region, region, 5000}
	var freed atomic.Int32 // the test's releases, in order: region i's buffer is free
	admit := func(ctx context.Context, i int) error {
		for int32(i-2) >= freed.Load() {
			select {
			case <-time.After(time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	var got []int
	_, err = StreamDirect(ctx, fd, sizes, 4, slot, admit, func(i int, _ RegionTimes) {
		got = append(got, i)
		b := slot(i)[:sizes[i]]
		if bad, ok := pattern.Check(b, int64(i)*region, f.Seed); !ok {
			t.Errorf("region %d: byte %d is not the pattern's", i, bad)
		}
		freed.Add(1)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Fatalf("regions reported %v, want 0 1 2 3", got)
	}
	if res, err := f.Residency(); err != nil || res > 0.01 {
		t.Errorf("residency %.3f after the direct reads (%v); want the page cache untouched", res, err)
	}
}
