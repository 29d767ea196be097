//go:build rdmaguest

package guest

import (
	"testing"
)

// TestWarmupSteadyRDMA: warmup steady over rxe runs the C loop once per
// step of the interval, each call going on from the last read's index;
// the data still verifies, and the result says how long the warmup read
// (at most its cap and a step) and how steady the measured phase was.
// Whether TCG's rxe settles before the cap is not asserted: it is noisy.
func TestWarmupSteadyRDMA(t *testing.T) {
	_, res, _ := point(t, "", serveArgs(t, "4MiB"), []string{"--block-size", "4KiB", "--queue-depth", "8",
		"--duration", "1s", "--warmup", "steady", "--warmup-max", "4s", "--interval", "100ms", "--verify"})
	if res.WarmupS == nil || *res.WarmupS < 0.5 || *res.WarmupS > 10 {
		t.Fatalf("warmup_s %v: want at least 5 steps of 100ms, and about the 4s cap at most", res.WarmupS)
	}
	if !res.Verified || res.Bytes <= 0 {
		t.Errorf("verified %v, %d bytes measured: want verified reads", res.Verified, res.Bytes)
	}
	if res.BwMinIntervalMBs == nil || res.BwCoV == nil {
		t.Errorf("steadiness: min %v, cov %v", res.BwMinIntervalMBs, res.BwCoV)
	}
	t.Logf("warmup %.2fs; measured %.1f MB/s, slowest interval %.1f MB/s, cov %.3f", *res.WarmupS, res.BandwidthMBs, *res.BwMinIntervalMBs, *res.BwCoV)
}
