package results

import "testing"

// TestMaxRdAtomic: auto is the most both sides allow, the smaller of the
// requester's and the responder's limits, each at most 255; an N asked for
// is N where both allow it, and refused (0) where either allows fewer.
func TestMaxRdAtomic(t *testing.T) {
	for _, c := range []struct {
		asked, requester, responder int
		n, most                     int
	}{
		{0, 16, 128, 16, 16},  // an mlx5 client reading rxe: the client's 16
		{-1, 128, 16, 16, 16}, // an rxe client reading mlx5: the server's 16
		{8, 16, 128, 8, 16},
		{16, 16, 16, 16, 16}, // at the bound
		{17, 16, 128, 0, 16},
		{0, 300, 400, 255, 255}, // the QP attribute's byte
		{255, 300, 400, 255, 255},
		{0, 16, 0, 0, 0}, // a server that answers no READ
		{4, 16, 0, 0, 0},
	} {
		n, most := MaxRdAtomic(c.asked, c.requester, c.responder)
		if n != c.n || most != c.most {
			t.Errorf("MaxRdAtomic(%d, %d, %d) = %d, %d; want %d, %d", c.asked, c.requester, c.responder, n, most, c.n, c.most)
		}
	}
	if got := RdAtomicLimit(256); got != 255 {
		t.Errorf("RdAtomicLimit(256) = %d, want 255", got)
	}
}

// TestMRCount: one region without mr_size or with one at least the file;
// else file_size ÷ mr_size rounded up, the last region holding the rest.
func TestMRCount(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		size, mrSize, want int64
	}{
		{1024 * mib, 0, 1},
		{1024 * mib, 2048 * mib, 1},
		{1024 * mib, 1024 * mib, 1},
		{1024 * mib, 256 * mib, 4},
		{1024 * mib, 300 * mib, 4},
		{1024*mib + 1, 256 * mib, 5},
		{MaxRegions * mib, mib, MaxRegions},
	} {
		if got := MRCount(c.size, c.mrSize); got != c.want {
			t.Errorf("MRCount(%d, %d) = %d, want %d", c.size, c.mrSize, got, c.want)
		}
	}
}

// A window bounds what a pipelined server pins at once; without the
// pipeline, or with a window as large as the file, it pins the file.
func TestPinnedBytes(t *testing.T) {
	for _, c := range []struct {
		size, mr int64
		pipe     bool
		window   int
		want     int64
		io       string
	}{
		{512 << 20, 16 << 20, true, 4, 64 << 20, ""},
		{512 << 20, 16 << 20, false, 0, 64 << 20, IODirect},
		{512 << 20, 16 << 20, false, 8, 128 << 20, IODirect},
		{32 << 20, 16 << 20, false, 0, 32 << 20, IODirect},
		{512 << 20, 16 << 20, false, 4, 512 << 20, ""},
		{512 << 20, 16 << 20, true, 0, 512 << 20, ""},
		{512 << 20, 16 << 20, true, 32, 512 << 20, ""},
		{500 << 20, 16 << 20, true, 31, 496 << 20, ""},
	} {
		if got := PinnedBytes(c.size, c.mr, c.pipe, c.window, c.io); got != c.want {
			t.Errorf("PinnedBytes(%d, %d, %v, %d, %q) = %d, want %d", c.size, c.mr, c.pipe, c.window, c.io, got, c.want)
		}
	}
}
