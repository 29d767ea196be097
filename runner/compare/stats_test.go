package compare

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

// TestComputeSeeded holds compare's statistics to what the issue asks:
// 100 seeds, 8 samples a side, 2 % CV. The same distribution on both
// sides is flagged at most 7 times in 100 (α is 0.05); a 10 % drop at
// least 95 times with the right sign and a delta within 2 points of
// −10 %. The centre is the median, as benchstat's: with 8 samples at 2 %
// CV its standard error is about 0.9 % a side, so a few seeds in 100 land
// more than 2 points away even when flagged, and the bound counts those
// as misses.
func TestComputeSeeded(t *testing.T) {
	const seeds, n, cv, mu = 100, 8, 0.02, 1000.0
	var same, shifted, right int
	for seed := uint64(1); seed <= seeds; seed++ {
		r := rand.New(rand.NewPCG(seed, 20))
		if st := Compute(draw(r, n, mu, cv), draw(r, n, mu, cv), 0.05); st.Significant {
			same++
		}
		st := Compute(draw(r, n, mu, cv), draw(r, n, 0.9*mu, cv), 0.05)
		if st.Significant {
			shifted++
			if st.DeltaPct < 0 && math.Abs(st.DeltaPct+10) <= 2 {
				right++
			} else {
				t.Logf("seed %d: a 10%% drop flagged with delta %.2f%%", seed, st.DeltaPct)
			}
		}
		if len(st.Warnings) != 0 {
			t.Errorf("seed %d: warnings with 8 samples a side: %v", seed, st.Warnings)
		}
	}
	t.Logf("flagged: same distribution %d/%d; 10%% shift %d/%d, %d of them within 2 points of -10%%",
		same, seeds, shifted, seeds, right)
	if same > 7 {
		t.Errorf("same distribution flagged %d of %d times, want at most 7", same, seeds)
	}
	if right < 95 {
		t.Errorf("a 10%% shift flagged with the right sign and size %d of %d times, want at least 95", right, seeds)
	}
}

func TestComputeFewSamplesWarn(t *testing.T) {
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
		st := Compute(old, new, 0.05)
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
