package main

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"rdmasweep/node/transport"
	"rdmasweep/results"
	"rdmasweep/testbed/testenv"
)

func TestIsSteady(t *testing.T) {
	for _, tc := range []struct {
		bw   []float64
		want bool
	}{
		{[]float64{100, 100, 100, 100}, false},                    // fewer than 5
		{[]float64{10, 50, 100, 100, 100, 100, 100}, true},        // the last 5 flat
		{[]float64{100, 101, 99, 100.5, 99.5}, true},              // noise, no trend
		{[]float64{100, 98, 96, 94, 92}, false},                   // -2 % per step
		{[]float64{100, 99.5, 99, 98.5, 98}, true},                // -0.5 % per step
		{[]float64{100, 100, 50, 50, 50}, false},                  // a step down inside the window
		{[]float64{0, 0, 0, 0, 0}, false},                         // nothing read
		{[]float64{200, 100, 100, 100, 100, 100, 100, 100}, true}, // a slow start, then flat
	} {
		if got := isSteady(tc.bw); got != tc.want {
			t.Errorf("isSteady(%v) = %v, want %v", tc.bw, got, tc.want)
		}
	}
}

func TestSteadiness(t *testing.T) {
	const block = 1_000_000 // 1 MB: a count per 100 ms interval is 10 × its MB/s
	// 3 whole intervals of 10, 20 and 30 reads, and a partial one.
	lo, cov := steadiness([]int64{10, 20, 30, 1}, 100*time.Millisecond, 0.35, block)
	if lo == nil || math.Abs(*lo-100) > 1e-9 || cov == nil || math.Abs(*cov-0.5) > 1e-9 {
		t.Errorf("min %v cov %v; want 100 MB/s and 0.5 (sd 100 / mean 200)", deref(lo), deref(cov))
	}
	if lo, cov := steadiness([]int64{10, 3}, 100*time.Millisecond, 0.13, block); lo == nil || *lo != 100 || cov != nil {
		t.Errorf("one whole interval: min %v cov %v; want 100 and none", deref(lo), deref(cov))
	}
	if lo, cov := steadiness([]int64{3}, 100*time.Millisecond, 0.05, block); lo != nil || cov != nil {
		t.Errorf("no whole interval: min %v cov %v; want none", deref(lo), deref(cov))
	}
	if lo, cov := steadiness(nil, 0, 1, block); lo != nil || cov != nil {
		t.Error("no interval asked: want none")
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// stepped is a client whose bandwidth drops by a tenth at each read, as a
// link slowed in steps: each Read takes its duration and reports the
// bytes of its step's rate. It stands for a transport; no product code
// path reaches it.
type stepped struct {
	rate  float64 // bytes/s of the next read
	reads int
}

func (c *stepped) Region() transport.RegionInfo { return transport.RegionInfo{Size: 1 << 30} }
func (c *stepped) Close() error                 { return nil }
func (c *stepped) Read(ctx context.Context, w transport.Workload) (transport.Measurement, error) {
	c.reads++
	select {
	case <-time.After(w.Duration):
	case <-ctx.Done():
		return transport.Measurement{}, ctx.Err()
	}
	m := transport.Measurement{Seconds: w.Duration.Seconds(), Bytes: int64(c.rate * w.Duration.Seconds())}
	c.rate *= 0.9
	return m, nil
}

// TestWarmupSteadyCapped: a bandwidth that keeps falling is never steady,
// and the warmup ends at its cap.
func TestWarmupSteadyCapped(t *testing.T) {
	c := &stepped{rate: 1e9}
	used, steady, err := warmUpSteady(context.Background(), c, transport.Workload{BlockSize: 4096, QueueDepth: 1}, 50*time.Millisecond, 600*time.Millisecond)
	if err != nil || steady || used < 600*time.Millisecond || c.reads < steadyWindow {
		t.Fatalf("used %v, steady %v, %d reads, %v; want the cap of 600ms, not steady", used, steady, c.reads, err)
	}
}

// TestWarmupSteadyOnLoopback runs node serve and read over tcp on
// loopback with --warmup steady: the bandwidth settles long before the
// cap, and the result says how long the warmup read, with the measured
// phase's steadiness.
func TestWarmupSteadyOnLoopback(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data")
	_, last, code := runPoint(t, file, []string{"--create"}, []string{
		"--warmup", "steady", "--warmup-max", "25s", "--interval", "100ms", "--total", "0", "--duration", "1s", "--pattern", "sequential",
	})
	res, ok := last.(*results.Result)
	if code != 0 || !ok {
		t.Fatalf("read exited %d, last event %+v", code, last)
	}
	if res.WarmupS == nil || *res.WarmupS < steadyWindow*0.1 || *res.WarmupS >= 25 {
		t.Fatalf("warmup_s %v; want at least %d steps of 100ms and under the 25s cap", deref(res.WarmupS), steadyWindow)
	}
	// The slowest interval may be 0: a loaded machine (or the emulator)
	// can leave a 100 ms interval without a completed read.
	if res.BwMinIntervalMBs == nil || *res.BwMinIntervalMBs < 0 || res.BwCoV == nil || *res.BwCoV < 0 {
		t.Errorf("steadiness: min %v MB/s, cov %v", deref(res.BwMinIntervalMBs), deref(res.BwCoV))
	}
	t.Logf("steady after %.2fs; measured min interval %.0f MB/s, cov %.3f; %s", *res.WarmupS, deref(res.BwMinIntervalMBs), deref(res.BwCoV), testenv.Load())
}
