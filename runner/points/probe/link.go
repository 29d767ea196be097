package probe

import (
	"context"
	"fmt"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/files/manifest"
	"rdmasweep/runner/points/peer"
	"rdmasweep/runner/points/preflight"
)

// LinkWorkloads are the peers that measure a link that reports no line
// rate, by transport: what the path carries at 1 MiB without node in it.
var LinkWorkloads = map[string]string{results.TransportTCP: peer.Iperf3, results.TransportRDMA: peer.IBReadBW}

// LinkCapacity measures the link between pair's hosts with transport's
// peer (LinkWorkloads) at 1 MiB, warm, for CalibrationDuration after
// CalibrationWarmup, over pt's other settings (device, GID, connection).
// ok is false when ctx ended; a failed run is a capacity with Error.
func (e Env) LinkCapacity(ctx context.Context, pt plan.Point, pair preflight.Pair, transport string) (lc manifest.LinkCapacity, ok bool) {
	lc = manifest.LinkCapacity{Server: e.Set.Get(pair.Server.Name).Host.Name(), Client: e.Set.Get(pair.Client.Name).Host.Name(),
		Transport: transport, Workload: LinkWorkloads[transport]}
	values := map[param.ID]any{param.Workload: lc.Workload, param.BlockSize: 1 << 20}
	for id, v := range calibrationValues {
		values[id] = v
	}
	row, ok := e.run(ctx, pt, pair, "link-"+lc.Workload, transport, values)
	if !ok {
		return lc, false
	}
	if row.Status != results.StatusOK || row.BandwidthMBs == nil || *row.BandwidthMBs <= 0 {
		lc.Error = fmt.Sprintf("%s: %s %s", lc.Workload, row.Status, row.Error)
		return lc, true
	}
	lc.MBs = *row.BandwidthMBs
	return lc, true
}
