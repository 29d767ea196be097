//go:build rdma

package rdma

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"rdmasweep/node/pattern"
	"rdmasweep/node/workload"
	"rdmasweep/results"
)

// The C loop buckets latencies into results.Histogram.Counts itself, so its
// bucket must be Go's for every value, around every power of two especially.
func TestCBucketMatchesGo(t *testing.T) {
	vals := []uint64{0, 1, 127, 128, 129, 255, 256, math.MaxUint64, math.MaxUint64 - 1}
	for e := 0; e < 64; e++ {
		p := uint64(1) << e
		vals = append(vals, p-1, p, p+1, p+p/3)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		vals = append(vals, r.Uint64()>>r.IntN(64))
	}
	for _, v := range vals {
		if c, g := cBucket(v), results.Bucket(v); c != g {
			t.Fatalf("bucket(%d): C %d, Go %d", v, c, g)
		}
	}
}

func TestCWordMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		s, i := r.Uint64(), r.Uint64()>>r.IntN(64)
		if c, g := cWord(s, i), pattern.Word(s, i); c != g {
			t.Fatalf("word(%#x, %d): C %#x, Go %#x", s, i, c, g)
		}
	}
}

// The C verify must accept exactly what pattern.Fill wrote and point at the
// same first bad byte as pattern.Check, at any alignment and length.
func TestCCheckMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		seed := r.Uint64()
		off := r.Int64N(1 << 40)
		buf := make([]byte, r.IntN(300))
		pattern.Fill(buf, off, seed)
		if bad, ok := cCheck(buf, off, seed); !ok {
			t.Fatalf("C rejects a correct buffer (off %d len %d) at %d", off, len(buf), bad)
		}
		if len(buf) == 0 {
			continue
		}
		for range 1 + r.IntN(3) {
			buf[r.IntN(len(buf))] ^= byte(1 + r.IntN(255))
		}
		gb, gok := pattern.Check(buf, off, seed)
		cb, cok := cCheck(buf, off, seed)
		if gok || cok || gb != cb {
			t.Fatalf("corrupted buffer (off %d len %d): Go (%d,%v), C (%d,%v)", off, len(buf), gb, gok, cb, cok)
		}
	}
}

// TestCSeriesMatchesTCP: the C loop's reads per interval are the tcp
// client's (node/transport/tcp: interval int(t/iv) of the phase, counted
// up to the last completion's), for completions on interval boundaries,
// in bursts, after gaps of many empty intervals, and past the room made
// up front (the series doubles, its new intervals zeroed).
func TestCSeriesMatchesTCP(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for trial := range 500 {
		start := r.Uint64() >> 8
		iv := 1 + r.Uint64N(1000)
		hint := int64(r.IntN(4))
		var ts []uint64
		at := start
		for range r.IntN(2000) {
			switch r.IntN(4) {
			case 0: // a burst: the same poll
			case 1: // onto a boundary
				at = start + ((at-start)/iv+1)*iv
			case 2: // a gap of many intervals
				at += iv * r.Uint64N(50)
			default:
				at += r.Uint64N(iv)
			}
			ts = append(ts, at)
		}
		var want []int64
		for _, tt := range ts {
			i := int((tt - start) / iv)
			for len(want) <= i {
				want = append(want, 0)
			}
			want[i]++
		}
		if len(want) == 0 {
			want = []int64{0} // interval 0 is current from the start
		}
		if got := cSeries(start, iv, hint, ts); !slices.Equal(got, want) {
			i := 0
			for i < min(len(got), len(want)) && got[i] == want[i] {
				i++
			}
			t.Fatalf("trial %d (interval %d, hint %d, %d reads): C has %d intervals, want %d; first difference at interval %d: C %v, want %v",
				trial, iv, hint, len(ts), len(got), len(want), i, got[i:min(i+5, len(got))], want[i:min(i+5, len(want))])
		}
	}
}

// TestLimitsAreTheTables holds the limits the C loop and the exchange
// enforce to the parameter table, which runner validate reads.
func TestLimitsAreTheTables(t *testing.T) {
	for _, c := range []struct {
		param string
		node  int64
	}{
		{"queue_depth", cMaxQD},
		{"qps", cMaxQP},
		{"qps", maxQPs},
		{"block_size", maxBlock},
	} {
		if max, _, _ := results.ParamByName(c.param).LimitFor("rdma"); max != c.node {
			t.Errorf("%s for rdma: table %d, node %d", c.param, max, c.node)
		}
	}
}

// The C loop computes an open loop's due times itself (rs_sched), so they
// must be node/workload.Schedule's: fixed exactly, poisson to within the
// last bit of a logarithm (libm's against Go's), a nanosecond here.
func TestCScheduleMatchesGo(t *testing.T) {
	for _, c := range []struct {
		n       int64
		rate    float64
		poisson bool
		seed    uint64
	}{
		{1, 1000, false, 0}, {2, 3, false, 0}, {10000, 48828.125, false, 0}, {100000, 7e6, false, 0},
		{1, 1000, true, 5}, {2, 1000, true, 5}, {10000, 48828.125, true, 0x9e37}, {100000, 3200, true, 1<<63 + 7},
	} {
		s, err := workload.NewSchedule(c.n, c.rate, map[bool]string{false: "fixed", true: "poisson"}[c.poisson], c.seed)
		if err != nil {
			t.Fatal(err)
		}
		got := cSchedule(c.n, c.rate, c.poisson, c.seed)
		if int64(len(got)) != c.n {
			t.Fatalf("%+v: C gave %d due times", c, len(got))
		}
		for i := range got {
			want, _ := s.Next()
			d := int64(got[i]) - int64(want)
			if d < -1 || d > 1 || (!c.poisson && d != 0) {
				t.Fatalf("%+v: read %d due at %d ns in C, %d in Go", c, i, got[i], want)
			}
		}
	}
}
