package results

// The latency histogram: per-read latencies in a fixed log-linear
// histogram. The bucket array has a fixed size and a closed-form index, so
// the RDMA C loop can fill the same Counts array that Go summarises, and a
// result event carries it (sparse), so the runner can merge several
// clients' histograms and take percentiles of the whole rather than
// average percentiles.

import (
	"encoding/json"
	"fmt"
	"math/bits"
)

// SubBucketBits is log2 of the buckets per power of two. 128 sub-buckets
// bound the relative width of a bucket by 1/128, and since a bucket is
// reported by its midpoint, the relative error is below 1/256.
const SubBucketBits = 7

const subBuckets = 1 << SubBucketBits

// NumBuckets covers every uint64: 128 exact buckets for 0..127, then 128 per
// power of two for exponents 7..63.
const NumBuckets = (64 - SubBucketBits + 1) * subBuckets // 7424

// Bucket returns the bucket index of ns:
//
//	if ns < 128: bucket = ns
//	else:        e = 63 - clz64(ns)                  // floor(log2 ns), 7..63
//	             bucket = (e-6)*128 + ((ns >> (e-7)) - 128)
//
// With SubBucketBits = 7, 128 = 1<<SubBucketBits and 6 = SubBucketBits-1.
func Bucket(ns uint64) int {
	if ns < subBuckets {
		return int(ns)
	}
	e := 63 - bits.LeadingZeros64(ns)
	shift := e - SubBucketBits
	return (e-SubBucketBits+1)*subBuckets + int(ns>>uint(shift)) - subBuckets
}

// bounds returns the smallest value in bucket b and the bucket's width.
func bounds(b int) (low, width uint64) {
	if b < subBuckets {
		return uint64(b), 1
	}
	e := b/subBuckets + SubBucketBits - 1
	sub := uint64(b % subBuckets)
	shift := uint(e - SubBucketBits)
	return (subBuckets + sub) << shift, 1 << shift
}

// Histogram counts latencies in nanoseconds. The zero value is empty and
// ready. It is not safe for concurrent use; record per goroutine and Merge.
type Histogram struct {
	Counts [NumBuckets]uint64
	Sum    uint64 // nanoseconds
	Max    uint64 // nanoseconds
	N      uint64
}

// Record adds one latency of ns nanoseconds.
func (h *Histogram) Record(ns uint64) {
	h.Counts[Bucket(ns)]++
	h.Sum += ns
	h.N++
	if ns > h.Max {
		h.Max = ns
	}
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.Counts {
		h.Counts[i] += c
	}
	h.Sum += o.Sum
	h.N += o.N
	if o.Max > h.Max {
		h.Max = o.Max
	}
}

// Reset empties h.
func (h *Histogram) Reset() { *h = Histogram{} }

// Quantile returns the latency in nanoseconds below or at which a fraction
// q (0..1) of the recorded values lie, as the midpoint of its bucket capped
// at Max. It is 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) float64 {
	if h.N == 0 {
		return 0
	}
	rank := uint64(q*float64(h.N) + 0.999999) // ceil without float surprises at q=1
	if rank < 1 {
		rank = 1
	}
	if rank > h.N {
		rank = h.N
	}
	var seen uint64
	for b, c := range h.Counts {
		seen += c
		if seen >= rank {
			low, width := bounds(b)
			mid := float64(low) + float64(width-1)/2
			if mid > float64(h.Max) {
				mid = float64(h.Max)
			}
			return mid
		}
	}
	return float64(h.Max)
}

// Latencies summarises per-read latency, issue to completion, in
// microseconds, over N reads (every read, or a sample of them: rdma's
// cq_moderation); SumUs is their sum.
type Latencies struct {
	AvgUs, P50Us, P99Us, P999Us, MaxUs float64
	SumUs                              float64
	N                                  int64
}

// Summary returns average, p50, p99, p99.9 and max in microseconds.
func (h *Histogram) Summary() Latencies {
	if h.N == 0 {
		return Latencies{}
	}
	return Latencies{
		AvgUs:  float64(h.Sum) / float64(h.N) / 1e3,
		P50Us:  h.Quantile(0.50) / 1e3,
		P99Us:  h.Quantile(0.99) / 1e3,
		P999Us: h.Quantile(0.999) / 1e3,
		MaxUs:  float64(h.Max) / 1e3,
		SumUs:  float64(h.Sum) / 1e3,
		N:      int64(h.N),
	}
}

// histogramJSON is a Histogram on the wire: only the buckets that counted
// something, as [index, count] pairs in index order.
type histogramJSON struct {
	SumNs   uint64      `json:"sum_ns"`
	MaxNs   uint64      `json:"max_ns"`
	N       uint64      `json:"n"`
	Buckets [][2]uint64 `json:"buckets"`
}

// MarshalJSON writes h sparsely: a point's reads fill a few hundred of the
// 7424 buckets.
func (h *Histogram) MarshalJSON() ([]byte, error) {
	j := histogramJSON{SumNs: h.Sum, MaxNs: h.Max, N: h.N, Buckets: [][2]uint64{}}
	for i, c := range h.Counts {
		if c > 0 {
			j.Buckets = append(j.Buckets, [2]uint64{uint64(i), c})
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON wrote, refusing a bucket index out
// of range or counts that do not add up to n.
func (h *Histogram) UnmarshalJSON(b []byte) error {
	var j histogramJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*h = Histogram{Sum: j.SumNs, Max: j.MaxNs, N: j.N}
	var n uint64
	for _, bc := range j.Buckets {
		if bc[0] >= NumBuckets {
			return fmt.Errorf("histogram bucket %d out of range", bc[0])
		}
		h.Counts[bc[0]] += bc[1]
		n += bc[1]
	}
	if n != h.N {
		return fmt.Errorf("histogram buckets count %d reads, n says %d", n, h.N)
	}
	return nil
}
