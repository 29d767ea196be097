package workload

import (
	"math"
	"testing"
	"time"
)

func dues(t *testing.T, n int64, rate float64, arrivals string, seed uint64) []time.Duration {
	t.Helper()
	s, err := NewSchedule(n, rate, arrivals, seed)
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Duration
	for {
		d, ok := s.Next()
		if !ok {
			break
		}
		out = append(out, d)
	}
	if int64(len(out)) != n {
		t.Fatalf("%s: %d due times, want %d", arrivals, len(out), n)
	}
	return out
}

func TestFixedScheduleIsEvenlySpaced(t *testing.T) {
	d := dues(t, 1000, 2000, "fixed", 0)
	for i, due := range d {
		if want := time.Duration(i) * 500 * time.Microsecond; due != want {
			t.Fatalf("read %d due at %v, want %v", i, due, want)
		}
	}
	if got := ReadsFor(time.Second, 2000); got != 2000 {
		t.Fatalf("ReadsFor(1s, 2000/s) = %d", got)
	}
	if got := ReadsFor(1500*time.Microsecond, 2000); got != 3 {
		t.Fatalf("ReadsFor(1.5ms, 2000/s) = %d, want 3 (due at 0, 0.5 and 1 ms)", got)
	}
}

// A poisson schedule has the fixed one's count, first and last due times,
// exponential gaps, and is the same for the same seed only.
func TestPoissonSchedule(t *testing.T) {
	const n, rate = 20000, 1000.0
	d := dues(t, n, rate, "poisson", 7)
	last := time.Duration((n - 1) / rate * float64(time.Second))
	if d[0] != 0 || d[n-1] < last-time.Microsecond || d[n-1] > last+time.Microsecond {
		t.Fatalf("first read due at %v, last at %v: want 0 and %v, as a fixed schedule's", d[0], d[n-1], last)
	}
	var sum, sq float64
	prev := time.Duration(0)
	for i, due := range d[1:] {
		if due < prev {
			t.Fatalf("read %d due at %v, before the one before it, %v", i+1, due, prev)
		}
		g := float64(due - prev)
		sum += g
		sq += g * g
		prev = due
	}
	mean := sum / (n - 1)
	cv := math.Sqrt(sq/(n-1)-mean*mean) / mean
	if want := 1e9 / rate; math.Abs(mean-want) > 0.01*want {
		t.Errorf("mean gap %.0f ns, want %.0f", mean, want)
	}
	// Exponential gaps have a coefficient of variation of 1; fixed ones 0.
	if cv < 0.95 || cv > 1.05 {
		t.Errorf("gaps' coefficient of variation %.3f, want about 1 (exponential)", cv)
	}
	same, other := dues(t, n, rate, "poisson", 7), dues(t, n, rate, "poisson", 8)
	if same[n/2] != d[n/2] || other[n/2] == d[n/2] {
		t.Errorf("seed 7 twice: %v and %v; seed 8: %v", d[n/2], same[n/2], other[n/2])
	}
}

func TestScheduleRefuses(t *testing.T) {
	for _, c := range []struct {
		rate     float64
		arrivals string
	}{{0, "fixed"}, {math.Inf(1), "fixed"}, {math.NaN(), "poisson"}, {10, "bursty"}} {
		if _, err := NewSchedule(10, c.rate, c.arrivals, 1); err == nil {
			t.Errorf("NewSchedule(rate %v, %q) took it", c.rate, c.arrivals)
		}
	}
}
