package results

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func TestBucketMonotoneAndBounded(t *testing.T) {
	prev := -1
	for _, v := range sample() {
		b := Bucket(v)
		if b < 0 || b >= NumBuckets {
			t.Fatalf("Bucket(%d) = %d outside [0,%d)", v, b, NumBuckets)
		}
		if b < prev {
			t.Fatalf("Bucket not monotone at %d", v)
		}
		prev = b
		low, width := bounds(b)
		if v < low || v-low >= width {
			t.Fatalf("value %d not inside its bucket %d [%d,+%d)", v, b, low, width)
		}
		if low >= 128 && float64(width)/float64(low) > 1.0/128+1e-12 {
			t.Fatalf("bucket %d too wide: %d at %d", b, width, low)
		}
	}
	if Bucket(math.MaxUint64) != NumBuckets-1 {
		t.Fatalf("largest value lands in %d, want the last bucket %d", Bucket(math.MaxUint64), NumBuckets-1)
	}
}

// sample returns sorted values covering every exponent and both ends of
// buckets.
func sample() []uint64 {
	var vs []uint64
	for v := uint64(0); v < 1000; v++ {
		vs = append(vs, v)
	}
	for e := 10; e < 64; e++ {
		p := uint64(1) << e
		vs = append(vs, p-1, p, p+1, p+p/3)
	}
	vs = append(vs, math.MaxUint64)
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	return vs
}

func TestSummaryWithinOnePercent(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	var vals []uint64
	var sum uint64
	for range 100000 {
		v := uint64(r.ExpFloat64()*20000) + 1000 // ~21 µs mean, long tail
		vals = append(vals, v)
		sum += v
		h.Record(v)
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	exact := func(q float64) float64 { return float64(vals[int(math.Ceil(q*float64(len(vals))))-1]) / 1e3 }
	s := h.Summary()
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"p50", s.P50Us, exact(0.5)},
		{"p99", s.P99Us, exact(0.99)},
		{"p99.9", s.P999Us, exact(0.999)},
		{"max", s.MaxUs, float64(vals[len(vals)-1]) / 1e3},
		{"avg", s.AvgUs, float64(sum) / float64(len(vals)) / 1e3},
	} {
		if math.Abs(c.got-c.want)/c.want >= 0.01 {
			t.Errorf("%s = %.3f µs, exact %.3f µs: error over 1%%", c.name, c.got, c.want)
		}
	}
	var a, b Histogram
	for i, v := range vals {
		if i%2 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	a.Merge(&b)
	if a.Summary() != s {
		t.Errorf("merged halves summarise to %+v, want %+v", a.Summary(), s)
	}
	var empty Histogram
	if empty.Summary().MaxUs != 0 || empty.Quantile(0.5) != 0 {
		t.Error("empty histogram reports non-zero latency")
	}
}

// A histogram crosses the wire sparse and comes back the same, and the
// runner's merge of two clients' histograms gives the percentiles of all
// their reads, which averaging percentiles does not.
func TestHistogramOnTheWireAndMerged(t *testing.T) {
	var a, b, all Histogram
	for i := uint64(1); i <= 1000; i++ {
		a.Record(i * 1000) // 1..1000 µs
		all.Record(i * 1000)
	}
	for i := uint64(1); i <= 100; i++ {
		b.Record(50_000_000 + i) // 50 ms, a slow client
		all.Record(50_000_000 + i)
	}
	var back Histogram
	enc, err := json.Marshal(&a)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(enc, &back); err != nil || back != a {
		t.Fatalf("round trip: %v (%d bytes)", err, len(enc))
	}
	back.Merge(&b)
	if back != all {
		t.Fatal("merged histogram differs from one that saw every read")
	}
	if p99 := back.Summary().P99Us; p99 < 49_000 {
		t.Fatalf("merged p99 %.0f µs; the slow client's reads are 9%% of all, so p99 is theirs", p99)
	}
	for _, bad := range []string{`{"n":2,"buckets":[[1,1]]}`, `{"n":1,"buckets":[[7424,1]]}`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}
