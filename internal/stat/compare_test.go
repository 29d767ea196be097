package stat

import (
	"math"
	"math/rand/v2"
	"testing"
)

// draw is n samples of a normal distribution with mean mu and a
// coefficient of variation cv.
func draw(r *rand.Rand, n int, mu, cv float64) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = mu * (1 + cv*r.NormFloat64())
	}
	return xs
}

// TestCompareSeeded holds Compare's statistics to their expected rates over
// 1,000 independent streams, 8 samples a side at 2 % CV, with bounds from
// the binomial distribution that a correct method breaks once in a
// million runs, so they hold on any stream, not on one committed seed:
//
//   - The same distribution on both sides is a change with probability at
//     most α (the U test's size), so at most binomUpper(1000, 0.05) times.
//   - A 10 % drop is a change with the right sign and a delta within 2
//     points of −10 % with probability pRight: the U test then finds a
//     complete separation (p = 0.00016) nearly always, and the delta is a
//     ratio of two medians. The median of n normal samples has a standard
//     error of about sqrt(π / 2n) σ, 0.443 σ at n = 8: 8.9 MB/s on 1000,
//     8.0 on 900, each 0.80 points of the ratio, which puts the delta's
//     standard error at 1.13 points and a miss beyond 2 points at
//     2 Φ(−2 / 1.13) ≈ 7.6 %. (At n = 8 the median, the mean of two order
//     statistics, does somewhat better than that large-n figure.)
func TestCompareSeeded(t *testing.T) {
	const streams, n, cv, mu, alpha = 1000, 8, 0.02, 1000.0, 0.05
	seMedian := math.Sqrt(math.Pi/(2*n)) * cv
	// Each side's median error, as points of new ÷ old near 0.9: the new
	// side's σ is 0.9 × the old's, and the old's enters scaled by 0.9.
	seDelta := 100 * math.Sqrt2 * 0.9 * seMedian
	pRight := 1 - math.Erfc(2/seDelta/math.Sqrt2)
	maxSame, minRight := binomUpper(streams, alpha, 1e-6), binomLower(streams, pRight, 1e-6)
	var same, right int
	for seed := uint64(1); seed <= streams; seed++ {
		r := rand.New(rand.NewPCG(seed, 20))
		if st := Compare(draw(r, n, mu, cv), draw(r, n, mu, cv), alpha); st.Significant {
			same++
		}
		st := Compare(draw(r, n, mu, cv), draw(r, n, 0.9*mu, cv), alpha)
		if st.Significant && st.DeltaPct < 0 && math.Abs(st.DeltaPct+10) <= 2 {
			right++
		}
		if len(st.Warnings) != 0 {
			t.Errorf("seed %d: warnings with 8 samples a side: %v", seed, st.Warnings)
		}
	}
	t.Logf("same distribution flagged %d of %d (at most %d); a 10%% drop flagged right %d (at least %d, expected %.0f)",
		same, streams, maxSame, right, minRight, pRight*streams)
	if same > maxSame {
		t.Errorf("same distribution flagged %d of %d times, want at most %d at alpha %v", same, streams, maxSame, alpha)
	}
	if right < minRight {
		t.Errorf("a 10%% drop flagged with the right sign and size %d of %d times, want at least %d", right, streams, minRight)
	}
}

// binomPMF is P(X = k) for X ~ Binomial(n, p).
func binomPMF(n, k int, p float64) float64 {
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x) + 1); return v }
	return math.Exp(lg(n) - lg(k) - lg(n-k) + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p))
}

// binomUpper is the least b with P(X > b) < tail for X ~ Binomial(n, p).
func binomUpper(n int, p, tail float64) int {
	above := 1.0
	for b := 0; b <= n; b++ {
		above -= binomPMF(n, b, p)
		if above < tail {
			return b
		}
	}
	return n
}

// binomLower is the greatest b with P(X < b) < tail.
func binomLower(n int, p, tail float64) int {
	return n - binomUpper(n, 1-p, tail)
}

func TestBinomBounds(t *testing.T) {
	// Binomial(1000, 0.05): mean 50, sd 6.9; the 1e-6 tails lie about
	// five sd out, and the two bounds mirror each other.
	if u := binomUpper(1000, 0.05, 1e-6); u < 75 || u > 90 {
		t.Errorf("upper bound %d, want about 50 + 5 × 6.9", u)
	}
	if l := binomLower(1000, 0.95, 1e-6); l != 1000-binomUpper(1000, 0.05, 1e-6) {
		t.Errorf("lower bound %d does not mirror the upper", l)
	}
}

func TestCompareFewSamplesWarn(t *testing.T) {
	for _, tc := range []struct {
		n          int
		interval   bool
		wantWarns  int
		canSignify bool
	}{
		{n: 3, interval: false, wantWarns: 2, canSignify: false},
		{n: 5, interval: false, wantWarns: 1, canSignify: true},
		{n: 6, interval: true, wantWarns: 0, canSignify: true},
	} {
		old := make([]float64, tc.n)
		new := make([]float64, tc.n)
		for i := range old {
			old[i], new[i] = float64(100+i), float64(200+i)
		}
		st := Compare(old, new, 0.05)
		if st.Old.HasInterval() != tc.interval {
			t.Errorf("n=%d: interval %v, want %v", tc.n, st.Old.HasInterval(), tc.interval)
		}
		if len(st.Warnings) != tc.wantWarns {
			t.Errorf("n=%d: warnings %q, want %d", tc.n, st.Warnings, tc.wantWarns)
		}
		if st.Significant != tc.canSignify {
			t.Errorf("n=%d: significant %v (p %.3f), want %v", tc.n, st.Significant, st.P, tc.canSignify)
		}
		mid := float64(tc.n-1) / 2
		if want := ((200+mid)/(100+mid) - 1) * 100; math.Abs(st.DeltaPct-want) > 1e-9 {
			t.Errorf("n=%d: delta %.2f%%, want %.2f%%", tc.n, st.DeltaPct, want)
		}
	}
}
