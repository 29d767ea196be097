package probe

// Calibration: node beside ib_read_bw on the plan's own hosts, device and
// GID, so a user can see that node's figures agree with perftest's on
// their NICs before trusting a sweep's. At each of CalibrationSizes, pairs
// of runs, node's then ib_read_bw's, each reading for a time at one depth,
// with the same moderation (ib_read_bw's argv is built as a plan's peer
// point: docs/workloads.md). A size agrees when the median of its pairs'
// node/ib_read_bw is within CalibrationTolerance of 1.

import (
	"context"
	"fmt"
	"math"
	"time"

	"rdmasweep/internal/stat"
	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/files/manifest"
	"rdmasweep/runner/points/peer"
	"rdmasweep/runner/points/preflight"
)

// CalibrationSizes are the block sizes a calibration compares; each pair
// reads for CalibrationDuration after CalibrationWarmup (whole seconds:
// ib_read_bw's -D and --margin).
var CalibrationSizes = []int64{4 << 10, 64 << 10, 1 << 20}

const (
	CalibrationTolerance = 0.03
	CalibrationDuration  = 2 * time.Second
	CalibrationWarmup    = time.Second
	CalibrationDepth     = 16
)

// calibrationValues are what each calibration run reads: a warm, pinned
// 16 MiB file, CalibrationDepth READs in flight on one QP, unverified
// (ib_read_bw verifies nothing), for a time.
var calibrationValues = map[param.ID]any{
	param.FileSize: 16 << 20, param.Create: true, param.Cache: "warm", param.Registration: "pinned",
	param.QueueDepth: CalibrationDepth, param.QPs: 1, param.Total: 0, param.Verify: false,
	param.Clients: 1, param.Pattern: "sequential", param.Duration: CalibrationDuration, param.Warmup: CalibrationWarmup,
	param.ODPPrefetch: plan.Default(param.ODPPrefetch), param.CQModeration: plan.Default(param.CQModeration),
}

// Calibrate runs pairs pairs at each of CalibrationSizes between pair's
// hosts, over pt's RDMA settings (device, GID, connect, traffic class),
// and judges each size. progress, when not nil, is told of each run
// before it starts. ok is false when ctx ended.
func (e Env) Calibrate(ctx context.Context, pt plan.Point, pair preflight.Pair, pairs int, progress func(what string)) (c manifest.Calibration, ok bool) {
	c = manifest.Calibration{At: time.Now().UTC().Format(time.RFC3339), Server: e.Set.Get(pair.Server.Name).Host.Name(),
		Client: e.Set.Get(pair.Client.Name).Host.Name(), Tolerance: CalibrationTolerance, Agree: true}
	for _, bs := range CalibrationSizes {
		s := manifest.CalibrationSize{BlockSize: bs}
		var ratios []float64
		for i := range pairs {
			var got [2]float64
			for j, w := range []string{"node", peer.IBReadBW} {
				if progress != nil {
					progress(fmt.Sprintf("%s at %s, pair %d of %d", w, results.FormatSize(bs), i+1, pairs))
				}
				values := map[param.ID]any{param.Workload: w, param.BlockSize: bs}
				for id, v := range calibrationValues {
					values[id] = v
				}
				row, ok := e.run(ctx, pt, pair, "calibrate-"+w, results.TransportRDMA, values)
				if !ok {
					return c, false
				}
				if row.Status != results.StatusOK || row.BandwidthMBs == nil {
					s.Error = fmt.Sprintf("%s: %s", w, row.Error)
					break
				}
				got[j] = *row.BandwidthMBs
			}
			if s.Error != "" {
				break
			}
			s.NodeMBs, s.PeerMBs = append(s.NodeMBs, got[0]), append(s.PeerMBs, got[1])
			ratios = append(ratios, got[0]/got[1])
		}
		if len(ratios) > 0 && s.Error == "" {
			s.Ratio = stat.Median(ratios)
			s.Agree = Agrees(s.Ratio)
		}
		c.Agree = c.Agree && s.Agree
		c.Sizes = append(c.Sizes, s)
	}
	return c, true
}

// Agrees reports whether a node/ib_read_bw ratio is agreement: within
// CalibrationTolerance of 1, either way.
func Agrees(ratio float64) bool {
	return ratio > 0 && math.Abs(ratio-1) <= CalibrationTolerance
}

// CalibrationVerdict is a size's verdict in words: "agree", or how far
// node is from ib_read_bw, or the reason it has none.
func CalibrationVerdict(s manifest.CalibrationSize) string {
	switch {
	case s.Error != "":
		return "FAIL"
	case s.Agree:
		return "agree"
	case s.Ratio < 1:
		return fmt.Sprintf("DISAGREE: node %.1f%% slower", (1-s.Ratio)*100)
	default:
		return fmt.Sprintf("DISAGREE: node %.1f%% faster", (s.Ratio-1)*100)
	}
}
