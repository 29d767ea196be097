package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"rdmasweep/node/session"
	"rdmasweep/node/transport"
)

// warmupValue is --warmup: a duration, or "steady".
type warmupValue struct {
	d      time.Duration
	steady bool
}

func (w *warmupValue) String() string {
	if w.steady {
		return "steady"
	}
	return w.d.String()
}

func (w *warmupValue) Set(s string) error {
	if s == "steady" {
		*w = warmupValue{steady: true}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("must be a duration like 5s, or steady")
	}
	*w = warmupValue{d: d}
	return nil
}

// The rule of warmup steady: the bandwidth of the last steadyWindow
// steps, fitted by least squares, changes by less than steadySlope of
// their mean per step.
const (
	steadyWindow = 5
	steadySlope  = 0.01
	// steadyStep is a step without --interval: the runner passes one.
	steadyStep = time.Second
)

// warmUpSteady reads w unmeasured in steps of step (each a Read of that
// duration, so each drains before the next), until the bandwidth is
// steady or for at most limit. It returns how long it read, wall clock,
// and whether the bandwidth became steady.
func warmUpSteady(ctx context.Context, cl transport.Client, w transport.Workload, step, limit time.Duration) (used time.Duration, steady bool, err error) {
	w.Total, w.Warmup, w.Interval = 0, 0, 0
	var bw []float64
	start := time.Now()
	for !steady {
		left := limit - time.Since(start)
		if left <= 0 {
			break
		}
		w.Duration = min(step, left)
		m, err := cl.Read(ctx, w)
		if err != nil {
			return time.Since(start), false, fmt.Errorf("warmup: %w", err)
		}
		if m.Seconds > 0 {
			bw = append(bw, float64(m.Bytes)/m.Seconds)
		}
		steady = isSteady(bw)
	}
	return time.Since(start), steady, nil
}

// isSteady applies the rule to a series of bandwidths, oldest first.
func isSteady(bw []float64) bool {
	if len(bw) < steadyWindow {
		return false
	}
	y := bw[len(bw)-steadyWindow:]
	mean := 0.0
	for _, v := range y {
		mean += v
	}
	mean /= float64(len(y))
	if mean <= 0 {
		return false
	}
	// x = 0..n-1, centred on its mean.
	xm := float64(len(y)-1) / 2
	var sxy, sxx float64
	for i, v := range y {
		dx := float64(i) - xm
		sxy += dx * (v - mean)
		sxx += dx * dx
	}
	return math.Abs(sxy/sxx)/mean < steadySlope
}

// steadiness is the slowest whole interval's bandwidth in MB/s and the
// coefficient of variation of the whole intervals' bandwidth, from the
// reads counted per interval of a phase of seconds; the last interval,
// cut short by the phase's end, is left out. Each is nil when there are
// too few whole intervals (1 for the minimum, 2 for the CoV).
func steadiness(counts []int64, interval time.Duration, seconds float64, blockSize int) (minMBs, cov *float64) {
	if interval <= 0 {
		return nil, nil
	}
	whole := min(len(counts), int(seconds/interval.Seconds()))
	if whole < 1 {
		return nil, nil
	}
	bw := make([]float64, whole)
	lo, mean := math.Inf(1), 0.0
	for i := range bw {
		bw[i] = float64(counts[i]) * float64(blockSize) / interval.Seconds() / 1e6
		lo = min(lo, bw[i])
		mean += bw[i]
	}
	mean /= float64(whole)
	minMBs = &lo
	if whole < 2 || mean <= 0 {
		return minMBs, nil
	}
	ss := 0.0
	for _, v := range bw {
		ss += (v - mean) * (v - mean)
	}
	c := math.Sqrt(ss/float64(whole-1)) / mean
	return minMBs, &c
}

// warmUpSteady runs --warmup steady before w, in steps of --interval,
// and returns the seconds it read; nil without steady.
func (o *readOptions) warmUpSteady(ctx context.Context, out *session.Printer, cl transport.Client, w transport.Workload) (*float64, error) {
	if !o.warmup.steady {
		return nil, nil
	}
	step := o.interval
	if step <= 0 {
		step = steadyStep
	}
	used, steady, err := warmUpSteady(ctx, cl, w, step, o.warmupMax)
	if err != nil {
		return nil, err
	}
	if !steady {
		out.Warn(fmt.Sprintf("warmup: the bandwidth was not steady after --warmup-max %s; measuring anyway", o.warmupMax))
	}
	s := used.Seconds()
	return &s, nil
}
