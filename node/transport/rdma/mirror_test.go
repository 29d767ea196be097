//go:build rdma

package rdma

import (
	"math"
	"math/rand/v2"
	"testing"

	"rdmasweep/node/pattern"
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
