// Package stat holds the statistics of the runner's judges of figures, each
// written once: the median, the median absolute deviation, the mean and
// standard deviation (the summary's table and the plot, the fleet's links,
// the knee search), and the comparison of two samples (runner compare).
package stat

import (
	"math"
	"slices"
)

// Median is the middle of xs, the mean of the two middle values for an
// even count; NaN for none. xs is left as it was.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// MAD is the median absolute deviation of xs from their median,
// unscaled; NaN for none.
func MAD(xs []float64) float64 {
	m := Median(xs)
	dev := make([]float64, len(xs))
	for i, x := range xs {
		dev[i] = math.Abs(x - m)
	}
	return Median(dev)
}

// Moments is a mean and a sample standard deviation (0 for one value).
type Moments struct{ Mean, SD float64 }

// MeanSD is the mean and sample standard deviation of xs, leaving out NaN
// (a figure a row does not have); the mean is NaN when no value is left
// and the sd 0 for one.
func MeanSD(xs []float64) Moments {
	var sum float64
	n := 0
	for _, x := range xs {
		if !math.IsNaN(x) {
			sum += x
			n++
		}
	}
	if n == 0 {
		return Moments{Mean: math.NaN()}
	}
	mean := sum / float64(n)
	if n == 1 {
		return Moments{Mean: mean}
	}
	var ss float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			ss += (x - mean) * (x - mean)
		}
	}
	return Moments{Mean: mean, SD: math.Sqrt(ss / float64(n-1))}
}
