package main

import (
	"context"
	"fmt"
	"strings"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/manifest"
	"rdmasweep/runner/preflight"
)

// A device's ODP capability bit proves nothing: soft-RoCE on 7.x kernels
// advertises it and returns wrong bytes through it. Only a verified read
// of an odp-registered region tells, so check shows one in its ODP_PROBE
// column and exec runs one before any odp point.

// odpSet is what an ODP probe reads: 64 KiB of a 256 KiB file in 16 KiB
// READs, four in flight: several pages, several packets per READ (the
// 7.x soft-RoCE fault shows from the second packet of a page on).
var odpSet = map[string]any{
	"registration": "odp", "odp_prefetch": false,
	"file_size": 256 << 10, "block_size": 16 << 10, "total": 64 << 10, "queue_depth": 4,
}

// planUsesODP reports whether any point registers with odp.
func planUsesODP(pts []plan.Point) bool {
	_, ok := firstODP(pts)
	return ok
}

func firstODP(pts []plan.Point) (plan.Point, bool) {
	for _, pt := range pts {
		if isODP(pt) {
			return pt, true
		}
	}
	return plan.Point{}, false
}

// isODP reports whether pt registers the server's region with odp.
func isODP(pt plan.Point) bool {
	return pt.Values.Str("transport") == "rdma" && pt.Values.Str("registration") == "odp"
}

// odpServers are the probe pairs whose servers serve odp points: one pair
// per server, its first client.
func odpServers(p *plan.Plan) []probePair {
	var out []probePair
	seen := map[int]bool{}
	for _, pair := range probePairs(p) {
		if !seen[pair.si] {
			seen[pair.si] = true
			out = append(out, pair)
		}
	}
	return out
}

// probeODP runs one ODP probe against pair's server and says what it
// found, as the manifest records it.
func probeODP(ctx context.Context, p *plan.Plan, pt plan.Point, r *roles, pair probePair, kernel, logDir string, ui *voice) (manifest.ODPProbe, bool) {
	srv := r.get(pair.server.Name)
	res := manifest.ODPProbe{Role: pair.server.Name, Host: srv.Host.Name(), Kernel: kernel}
	row, ok := probeRead(ctx, p, pt, r, pair, "rdma", odpSet, logDir, ui)
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

// odpHint says what to do about a server whose ODP returned wrong data.
func odpHint(kernel string) string {
	on := "this kernel"
	if kernel != "" {
		on = "kernel " + kernel
	}
	return fmt.Sprintf("the server's RDMA device returned wrong bytes through on-demand paging on %s (soft-RoCE does on 7.x kernels), so odp figures would be measured on garbage: use registration: pinned, or a kernel or NIC whose ODP passes; rdma.trust_odp: true runs odp points anyway", on)
}

// odpProbes fills check's ODP_PROBE cells: one probe per server that
// serves odp points and advertises ODP. It reports whether a probe
// failed (the logs are then kept).
func odpProbes(ctx context.Context, p *plan.Plan, pts []plan.Point, r *roles, rows []*checkRow, logDir string, ui *voice) (failed bool) {
	pt, _ := firstODP(pts)
	trust := p.Base.Bool("trust_odp")
	byRole := map[string]*checkRow{}
	for _, row := range rows {
		byRole[row.role] = row
	}
	for _, pair := range odpServers(p) {
		srv, cli := byRole[pair.server.Name], byRole[pair.client.Name]
		set := func(cell string) {
			srv.odpProbe = cell
			if cli.odpProbe == "-" {
				cli.odpProbe = cell
			}
		}
		switch {
		case hasProblem(srv, "odp"):
			set("no ODP")
			continue
		case rdmaBlocked(rows):
			set("skipped")
			continue
		}
		res, ok := probeODP(ctx, p, pt, r, pair, srv.kernel, logDir, ui)
		if !ok {
			set("interrupted")
			return failed
		}
		switch res.Result {
		case manifest.ODPVerified:
			set("ok verified")
		case manifest.ODPWrongData:
			failed = true
			if trust {
				set("FAIL wrong data (trusted)")
				srv.verdict.Warnings = append(srv.verdict.Warnings, "ODP returned wrong data to a verified read; rdma.trust_odp lets exec run odp points anyway: "+res.Message)
				continue
			}
			set("FAIL wrong data")
			srv.problems = append(srv.problems, preflight.Problem{Check: "odp probe", Msg: res.Message, Hint: odpHint(res.Kernel)})
		default:
			failed = true
			set("FAIL")
			srv.problems = append(srv.problems, preflight.Problem{Check: "odp probe", Msg: res.Message,
				Hint: "registering with ODP or reading through it failed (the RDMA_PROBE column tells whether pinned works); registration: pinned avoids ODP"})
		}
	}
	return failed
}

func hasProblem(row *checkRow, check string) bool {
	for _, pr := range row.problems {
		if pr.Check == check {
			return true
		}
	}
	return false
}

// odpGate is exec's ODP probe, run before any point when the points to
// run include odp ones: a server whose ODP returns wrong data stops the
// exec unless the plan trusts it. The probes' results go in the manifest.
func odpGate(ctx context.Context, p *plan.Plan, todo []job, r *roles, kernels map[string]string, logDir string, ui *voice) ([]manifest.ODPProbe, error) {
	var pts []plan.Point
	for _, j := range todo {
		pts = append(pts, j.pt)
	}
	pt, ok := firstODP(pts)
	if !ok {
		return nil, nil
	}
	if p.IsPool() { // the probe pairs servers with clients, which a pool has not
		return nil, withHint(fmt.Errorf("%s: the odp points of a pairwise or ring plan cannot be probed yet", p.Path), "use rdma registration pinned for a pool, or probe the servers with a fan-in plan first")
	}
	trust := p.Base.Bool("trust_odp")
	var out []manifest.ODPProbe
	var bad []string
	badKernel := ""
	for _, pair := range odpServers(p) {
		res, ok := probeODP(ctx, p, pt, r, pair, kernels[pair.server.Name], logDir, ui)
		if !ok {
			return out, context.Cause(ctx)
		}
		res.Trusted = res.Result == manifest.ODPWrongData && trust
		out = append(out, res)
		switch {
		case res.Trusted:
			ui.warnf("%s (%s): ODP returned wrong data to a verified read; running odp points anyway (rdma.trust_odp)", res.Role, res.Host)
		case res.Result == manifest.ODPWrongData:
			bad = append(bad, fmt.Sprintf("%s (%s)", res.Role, res.Host))
			badKernel = res.Kernel
		case res.Result == manifest.ODPFailed:
			ui.warnf("%s (%s): the ODP probe failed, so odp points will likely fail too: %s", res.Role, res.Host, res.Message)
		}
	}
	if len(bad) > 0 {
		n := 0
		for _, pt := range pts {
			if isODP(pt) {
				n++
			}
		}
		return out, withHint(fmt.Errorf("%s returned wrong data through ODP to a verified read: refusing to measure %s on it",
			strings.Join(bad, ", "), plural(n, "odp point")), odpHint(badKernel)+"; --only registration=pinned runs the rest")
	}
	return out, nil
}
