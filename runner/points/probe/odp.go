package probe

import (
	"context"
	"fmt"
	"strings"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/files/manifest"
	"rdmasweep/runner/hint"
	"rdmasweep/runner/points/preflight"
)

// odpSet is what an ODP probe reads: 64 KiB of a 256 KiB file in 16 KiB
// READs, four in flight: several pages, several packets per READ (the
// 7.x soft-RoCE fault shows from the second packet of a page on).
var odpSet = map[param.ID]any{
	param.Registration: "odp", param.ODPPrefetch: false,
	param.FileSize: 256 << 10, param.BlockSize: 16 << 10, param.Total: 64 << 10, param.QueueDepth: 4,
}

// FirstODP is the first point that registers with odp.
func FirstODP(pts []plan.Point) (plan.Point, bool) {
	for _, pt := range pts {
		if IsODP(pt) {
			return pt, true
		}
	}
	return plan.Point{}, false
}

// IsODP reports whether pt registers the server's region with odp.
func IsODP(pt plan.Point) bool {
	return pt.Values.Str(param.Transport) == results.TransportRDMA && pt.Values.Str(param.Registration) == "odp"
}

// ODPServers are the pairs whose servers serve odp points: one pair per
// server, its first client.
func ODPServers(p *plan.Plan) []preflight.Pair {
	var out []preflight.Pair
	seen := map[int]bool{}
	for _, pair := range preflight.Pairs(p) {
		if !seen[pair.SI] {
			seen[pair.SI] = true
			out = append(out, pair)
		}
	}
	return out
}

// ODP runs one ODP probe against pair's server, with point pt's other
// values, and says what it found, as the manifest records it; ok is false
// when ctx ended.
func (e Env) ODP(ctx context.Context, pt plan.Point, pair preflight.Pair, kernel string) (res manifest.ODPProbe, ok bool) {
	srv := e.Set.Get(pair.Server.Name)
	res = manifest.ODPProbe{Role: pair.Server.Name, Host: srv.Host.Name(), Kernel: kernel}
	row, ok := e.Read(ctx, pt, pair, results.TransportRDMA, odpSet)
	if !ok {
		return res, false
	}
	switch {
	case row.Status == results.StatusOK:
		res.Result = manifest.ODPVerified
	case row.ErrorCode == results.ErrorCodeODPVerifyMismatch:
		res.Result, res.Message = manifest.ODPWrongData, row.Error
	default:
		res.Result, res.Message = manifest.ODPFailed, row.Error
	}
	return res, true
}

// ODPHint says what to do about a server whose ODP returned wrong data.
func ODPHint(kernel string) string {
	on := "this kernel"
	if kernel != "" {
		on = "kernel " + kernel
	}
	return fmt.Sprintf("the server's RDMA device returned wrong bytes through on-demand paging on %s (soft-RoCE does on 7.x kernels), so odp figures would be measured on garbage: use registration: pinned, or a kernel or NIC whose ODP passes; rdma.trust_odp: true runs odp points anyway", on)
}

// ODPGate is exec's ODP probe, run before any point when the points to
// run, pts, include odp ones: a server whose ODP returns wrong data stops
// the exec unless the plan trusts it. kernels are each role's kernel, for
// the hint. The probes' results go in the manifest.
func (e Env) ODPGate(ctx context.Context, pts []plan.Point, kernels map[string]string) ([]manifest.ODPProbe, error) {
	pt, ok := FirstODP(pts)
	if !ok {
		return nil, nil
	}
	if e.Plan.IsPool() { // the probe pairs servers with clients, which a pool has not
		return nil, hint.Wrap(fmt.Errorf("%s: the odp points of a pairwise or ring plan cannot be probed yet", e.Plan.Path), "use rdma registration pinned for a pool, or probe the servers with a fan-in plan first")
	}
	trust := e.Plan.Base.Bool(param.TrustODP)
	var out []manifest.ODPProbe
	var bad []string
	badKernel := ""
	for _, pair := range ODPServers(e.Plan) {
		res, ok := e.ODP(ctx, pt, pair, kernels[pair.Server.Name])
		if !ok {
			return out, context.Cause(ctx)
		}
		res.Trusted = res.Result == manifest.ODPWrongData && trust
		out = append(out, res)
		switch {
		case res.Trusted:
			e.Warn(fmt.Sprintf("%s (%s): ODP returned wrong data to a verified read; running odp points anyway (rdma.trust_odp)", res.Role, res.Host))
		case res.Result == manifest.ODPWrongData:
			bad = append(bad, fmt.Sprintf("%s (%s)", res.Role, res.Host))
			badKernel = res.Kernel
		case res.Result == manifest.ODPFailed:
			e.Warn(fmt.Sprintf("%s (%s): the ODP probe failed, so odp points will likely fail too: %s", res.Role, res.Host, res.Message))
		}
	}
	if len(bad) == 0 {
		return out, nil
	}
	n := 0
	for _, pt := range pts {
		if IsODP(pt) {
			n++
		}
	}
	what := fmt.Sprintf("%d odp points", n)
	if n == 1 {
		what = "1 odp point"
	}
	return out, hint.Wrap(fmt.Errorf("%s returned wrong data through ODP to a verified read: refusing to measure %s on it",
		strings.Join(bad, ", "), what), ODPHint(badKernel)+"; --only registration=pinned runs the rest")
}
