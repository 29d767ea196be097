package region

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

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
