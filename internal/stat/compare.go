package stat

// Two samples compared as benchstat compares two sets of benchmark runs:
// each side's median with its 95 % interval, the change in percent, and a
// two-sided Mann–Whitney U test, whose p-value says whether the change is
// more than noise. The statistics are golang.org/x/perf/benchmath's, under
// AssumeNothing: runner compare judges with them.

import (
	"math"

	"golang.org/x/perf/benchmath"
)

// Confidence is the level of each side's interval.
const Confidence = 0.95

// Summary is one side's sample: its median and the interval around it.
// Lo and Hi are ±Inf when the sample is too small for an interval.
type Summary struct {
	Center, Lo, Hi float64
	N              int
}

// HasInterval reports whether the sample was large enough for one.
func (s Summary) HasInterval() bool { return !math.IsInf(s.Lo, 0) && !math.IsInf(s.Hi, 0) }

// Comparison is the comparison of one metric between two samples.
type Comparison struct {
	Old, New Summary
	// DeltaPct is the change of the centre from old to new in percent;
	// NaN when the old centre is 0.
	DeltaPct float64
	// P is the two-sided Mann–Whitney U test's p-value.
	P float64
	// Significant is P below alpha: the change is more than noise.
	Significant bool
	// Warnings say why a side has no interval or why no test could
	// find a difference, in benchmath's words.
	Warnings []string
}

// Compare compares samples old and new at alpha. It does not keep them.
func Compare(old, new []float64, alpha float64) Comparison {
	th := &benchmath.Thresholds{CompareAlpha: alpha}
	so := benchmath.NewSample(append([]float64(nil), old...), th)
	sn := benchmath.NewSample(append([]float64(nil), new...), th)
	a := benchmath.AssumeNothing
	var st Comparison
	var warns []error
	for _, side := range []struct {
		s   *benchmath.Sample
		out *Summary
	}{{so, &st.Old}, {sn, &st.New}} {
		sum := a.Summary(side.s, Confidence)
		*side.out = Summary{Center: sum.Center, Lo: sum.Lo, Hi: sum.Hi, N: len(side.s.Values)}
		warns = append(warns, sum.Warnings...)
	}
	cmp := a.Compare(so, sn)
	warns = append(warns, cmp.Warnings...)
	st.P = cmp.P
	st.Significant = cmp.P < alpha
	st.DeltaPct = math.NaN()
	if st.Old.Center != 0 {
		st.DeltaPct = (st.New.Center/st.Old.Center - 1) * 100
	}
	seen := map[string]bool{}
	for _, w := range warns {
		if !seen[w.Error()] {
			seen[w.Error()] = true
			st.Warnings = append(st.Warnings, w.Error())
		}
	}
	return st
}
