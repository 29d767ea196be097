// Package stat holds the order statistics more than one judge of figures
// needs: the summary's table, the fleet's links, the knee search.
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
