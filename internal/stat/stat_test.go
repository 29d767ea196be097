package stat

import (
	"math"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{7}, 7},
	} {
		in := append([]float64(nil), c.xs...)
		if got := Median(c.xs); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", in, got, c.want)
		}
		for i := range in {
			if in[i] != c.xs[i] {
				t.Errorf("Median reordered its input: %v", c.xs)
			}
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median of nothing is not NaN")
	}
}

func TestMeanSD(t *testing.T) {
	s := MeanSD([]float64{2, 4, 4, 4, 5, 5, 7, 9})
	if s.Mean != 5 || math.Abs(s.SD-2.138089935) > 1e-6 {
		t.Fatalf("MeanSD = %+v", s)
	}
	if s := MeanSD([]float64{3, math.NaN()}); s.Mean != 3 || s.SD != 0 {
		t.Fatalf("one value and a NaN: %+v", s)
	}
	if s := MeanSD(nil); !math.IsNaN(s.Mean) {
		t.Fatalf("no value: %+v", s)
	}
}

func TestMAD(t *testing.T) {
	// median 4.5; deviations 2.5 .5 .5 .5 .5 .5 2.5 4.5: their median .5.
	if m := MAD([]float64{2, 4, 4, 4, 5, 5, 7, 9}); m != 0.5 {
		t.Fatalf("MAD = %v, want 0.5", m)
	}
	if m := MAD(nil); !math.IsNaN(m) {
		t.Fatalf("MAD of none = %v, want NaN", m)
	}
}
