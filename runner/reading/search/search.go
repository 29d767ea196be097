// Package search finds a knee: the largest value of one parameter at which
// a condition on a metric still holds, such as the deepest queue whose
// p99 stays under 500 µs (fio's latency_target, for RDMA READ). The walk
// doubles the parameter from From until the condition fails or To is
// reached, then bisects between the last value that held and the first
// that failed, down to Resolution. Each value is judged on the median of
// its repetitions.
//
// The walk is a pure function of the rows measured so far: Next reads
// them, so rows already in the CSV (a resumed exec) are reused and never
// probed again, and a test can drive it with a fake measurement.
package search

import (
	"fmt"
	"math/bits"
	"strconv"

	"rdmasweep/internal/stat"
	"rdmasweep/internal/words"
	"rdmasweep/plan"
	"rdmasweep/results"
)

// Until is the condition a value must meet: Metric at most (or at
// least) Limit.
type Until struct {
	Metric string
	AtMost bool
	Limit  float64
}

// Holds reports whether a median meets the condition.
func (u Until) Holds(median float64) bool {
	if u.AtMost {
		return median <= u.Limit
	}
	return median >= u.Limit
}

func (u Until) String() string {
	op := "at_least"
	if u.AtMost {
		op = "at_most"
	}
	return fmt.Sprintf("%s %s %s", u.Metric, op, strconv.FormatFloat(u.Limit, 'g', -1, 64))
}

// Spec is a plan's search section.
type Spec struct {
	Param      string // a sweepable integer or size parameter
	From, To   int64  // From >= 1, To >= From
	Until      Until
	Resolution int64 // the bisection stops when the gap is at most this; >= 1
	// Repeat is the repetitions each value needs before it is judged.
	Repeat int
}

// Step is what Next decided: probe Value, or, when Done, the walk is over
// with Knee the value found (Found false when the condition fails already
// at From).
type Step struct {
	Value int64
	Done  bool
	Knee  int64
	Found bool
}

// Walker walks one outer point's search.
type Walker struct{ spec Spec }

// New makes a walker for spec.
func New(spec Spec) *Walker {
	if spec.Resolution < 1 {
		spec.Resolution = 1
	}
	if spec.Repeat < 1 {
		spec.Repeat = 1
	}
	return &Walker{spec: spec}
}

// Next reads the rows of the outer point so far (any scope but
// aggregate's is ignored when both exist) and says what to do next: the
// value to run (its missing repetitions), or the knee.
func (w *Walker) Next(rows []results.Row) Step {
	judged := w.judge(rows)
	s := w.spec
	lo, hi := int64(0), int64(0) // the last value that held, the first that failed
	for v := s.From; ; v = min(2*v, s.To) {
		ok, known := judged[v]
		if !known {
			return Step{Value: v}
		}
		if !ok {
			hi = v
			break
		}
		lo = v
		if v == s.To {
			return Step{Done: true, Knee: v, Found: true}
		}
	}
	if lo == 0 {
		return Step{Done: true}
	}
	for hi-lo > s.Resolution {
		mid := lo + (hi-lo)/2
		if s.Resolution > 1 {
			mid = lo + (hi-lo)/2/s.Resolution*s.Resolution
			if mid == lo {
				mid = lo + s.Resolution
			}
		}
		ok, known := judged[mid]
		if !known {
			return Step{Value: mid}
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return Step{Done: true, Knee: lo, Found: true}
}

// judge is, for each value with Repeat runs, whether its median holds. A
// value whose runs all failed does not hold: a depth the link cannot take
// is past the knee.
func (w *Walker) judge(rows []results.Row) map[int64]bool {
	runs := map[int64]int{}
	figs := map[int64][]float64{}
	scope := results.ScopeClient
	for _, r := range rows {
		if r.Scope == results.ScopeAggregate {
			scope = results.ScopeAggregate
		}
	}
	for _, r := range rows {
		if r.Scope != scope && r.Scope != "" {
			continue
		}
		v := r.ParamInt(w.spec.Param)
		runs[v]++
		if x, ok := r.Metric(w.spec.Until.Metric); ok && r.Status == results.StatusOK {
			figs[v] = append(figs[v], x)
		}
	}
	out := map[int64]bool{}
	for v, n := range runs {
		if n < w.spec.Repeat {
			continue
		}
		out[v] = len(figs[v]) > 0 && w.spec.Until.Holds(stat.Median(figs[v]))
	}
	return out
}

// MaxProbes bounds the values a walk of spec runs, for runner plan: every
// doubling step, then a bisection of the widest gap between two of them.
func MaxProbes(spec Spec) int {
	if spec.Resolution < 1 {
		spec.Resolution = 1
	}
	n, gap := 0, int64(0)
	for v := spec.From; ; {
		n++
		if v == spec.To {
			break
		}
		next := min(2*v, spec.To)
		gap = max(gap, next-v)
		v = next
	}
	steps := gap / spec.Resolution
	if steps > 1 {
		n += bits.Len64(uint64(steps - 1))
	}
	return n
}

// Mark sets the search column of the rows of one outer point: knee on the
// rows at the knee's value, probe on the others.
func Mark(rows []results.Row, param string, st Step) {
	for i := range rows {
		rows[i].Search = results.SearchProbe
		if st.Found && rows[i].ParamInt(param) == st.Knee {
			rows[i].Search = results.SearchKnee
		}
	}
}

// FromPlan is the walk a plan's search section asks for, each value run
// repeat times.
func FromPlan(s *plan.Search, repeat int) Spec {
	return Spec{
		Param: s.Param, From: s.From, To: s.To, Resolution: s.Resolution, Repeat: repeat,
		Until: Until{Metric: s.Metric, AtMost: s.AtMost, Limit: s.Limit},
	}
}

// BoundText says, for runner plan, that the walk decides the number of
// points at run time, and its bound over outer points.
func BoundText(s Spec, outer int) string {
	n := MaxProbes(s)
	return fmt.Sprintf("the search over %s (%d..%d, until %s) decides the number of points at run time: at most %d values for each of the %s below, %d in all",
		s.Param, s.From, s.To, s.Until, n, words.Count(outer, "point"), n*outer)
}
