package workload

import (
	"fmt"
	"math"
	"time"

	"rdmasweep/node/pattern"
)

// A Schedule gives each read of an open loop its due time, from the
// phase's start: when the read should be posted, whatever the server or
// the queue depth make of it. Both transports use it, so "fixed" and
// "poisson" mean the same everywhere.
//
// A fixed schedule spaces its n reads 1/rate apart, the first due at 0 and
// the last at (n-1)/rate. A poisson schedule has the same n reads, the
// same first and last, and between them a Poisson process conditioned on
// the n-2 arrivals it has there: the order statistics of uniform times,
// drawn as normalised sums of n-1 exponential gaps from a seeded
// generator (pattern.Word). Its gaps are exponential, as a Poisson
// process's are, but its count and span are exact, so a short run offers
// exactly the load asked: an unconditioned process of n ≈ 6000 reads
// would miss its rate by about 1.3 % (1/√n) as often as not, and one
// conditioned on its count alone by the random length of its last gap
// (1.3 % in a run of 287 reads, seen on every repetition of a seed).
type Schedule struct {
	n       int64
	perRead float64 // fixed: nanoseconds between reads
	poisson bool
	seed    uint64
	scale   float64 // poisson: span ÷ the sum of the n-1 gaps
	i       int64   // the next read
	sum     float64 // poisson: the gaps so far
}

// NewSchedule returns the schedule of n reads at perSecond reads per
// second; arrivals is "fixed" or "poisson", and seed seeds poisson.
func NewSchedule(n int64, perSecond float64, arrivals string, seed uint64) (*Schedule, error) {
	if !(perSecond > 0) || math.IsInf(perSecond, 0) {
		return nil, fmt.Errorf("rate must be a positive number of reads per second (got %g)", perSecond)
	}
	s := &Schedule{n: n, perRead: 1e9 / perSecond, seed: seed}
	switch arrivals {
	case "fixed", "":
	case "poisson":
		s.poisson = true
		var total float64
		for i := int64(0); i < n-1; i++ {
			total += s.gap(i)
		}
		if total > 0 {
			s.scale = float64(n-1) * s.perRead / total
		}
	default:
		return nil, fmt.Errorf("unknown arrivals %q (want fixed or poisson)", arrivals)
	}
	return s, nil
}

// ReadsFor is how many reads a schedule at perSecond reads per second has
// due in d: those due before d.
func ReadsFor(d time.Duration, perSecond float64) int64 {
	return int64(math.Ceil(d.Seconds() * perSecond))
}

// gap is the i-th exponential gap, of mean 1: -ln of a uniform in (0,1).
func (s *Schedule) gap(i int64) float64 {
	u := (float64(pattern.Word(s.seed, uint64(i))>>11) + 0.5) / (1 << 53)
	return -math.Log(u)
}

// Reads is how many reads the schedule has.
func (s *Schedule) Reads() int64 { return s.n }

// Next returns the due time of the next read, from the phase's start;
// ok is false once every read has had its time. Due times never
// decrease.
func (s *Schedule) Next() (due time.Duration, ok bool) {
	if s.i >= s.n {
		return 0, false
	}
	i := s.i
	s.i++
	if !s.poisson {
		return time.Duration(float64(i) * s.perRead), true
	}
	if i > 0 {
		s.sum += s.gap(i - 1)
	}
	return time.Duration(s.sum * s.scale), true
}
