//go:build bench

package main

import (
	"testing"
	"time"
)

// TestBenchGoAt is TestGoAt's idle-machine figure: both clients start
// reading within 150 ms after the time their go named, and within 100 ms
// of each other, though the goes arrived 300 ms apart. It prints the
// load beside them; on a busy machine, TestGoAt's 500 ms is the bound.
func TestBenchGoAt(t *testing.T) {
	at, starts := goAt(t, 700*time.Millisecond, 300*time.Millisecond)
	for i, st := range starts {
		if st.Before(at) || st.After(at.Add(150*time.Millisecond)) {
			t.Errorf("client %d started %v after the time the go named; want 0 to 150 ms", i+1, st.Sub(at))
		}
	}
	if d := starts[1].Sub(starts[0]).Abs(); d > 100*time.Millisecond {
		t.Errorf("the clients started %v apart, want 100 ms at most", d)
	}
}

// TestBenchOpenLoopRate is TestOpenLoopRate's idle-machine figure: the
// median rateRatio within 1 % of 1, late or early.
func TestBenchOpenLoopRate(t *testing.T) {
	openLoopRates(t, 0.99, 1.01)
}
