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
