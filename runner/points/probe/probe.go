// Package probe proves a plan's data path before it is measured: small
// verified reads from each client to its server, run with node itself
// through the same point.Runner exec uses. runner check shows their
// results (the DATA_PATH, RDMA_PROBE and ODP_PROBE columns); exec runs the
// ODP probe before any odp point (ODPGate), since a device's ODP
// capability bit proves nothing: soft-RoCE on 7.x kernels advertises it
// and returns wrong bytes through it.
package probe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/hosts/hostset"
	"rdmasweep/runner/hosts/role"
	"rdmasweep/runner/points/point"
	"rdmasweep/runner/points/preflight"
	"rdmasweep/runner/reading/verdict"
)

// Env is what every probe of one plan shares.
type Env struct {
	Plan   *plan.Plan
	Set    *hostset.Set // connected, with node deployed
	LogDir string       // node's logs of each probe
	// Warn gets what a probe warns of; the runner says each once.
	Warn func(msg string)
	// Choices are the device, port and GID node chose on each role's
	// host, by the plan's role name, for a peer to run on (Calibrate).
	Choices map[string]results.DeviceChoice
}

// readValues are what a probe reads: 4 KiB of a 64 KiB file, verified,
// one READ at a time. What the probe does not choose (the pattern, the
// timing, moderation, prefetch) is the schema's default.
var readValues = map[param.ID]any{
	param.FileSize: 64 << 10, param.Create: true, param.Cache: "warm",
	param.BlockSize: 4 << 10, param.QueueDepth: 1, param.QPs: 1, param.Total: 4 << 10, param.Verify: true,
	param.Clients: 1, param.Workload: "node", param.Registration: "pinned",
	param.Pattern: plan.Default(param.Pattern), param.Duration: plan.Default(param.Duration), param.Warmup: plan.Default(param.Warmup),
	param.ODPPrefetch: plan.Default(param.ODPPrefetch), param.CQModeration: plan.Default(param.CQModeration),
}

// Read reads a small temporary file, verified, from pair's client to its
// server with transport, and removes the file afterwards: readValues,
// with the point's other values (the RDMA device, fabric fields) as they
// are, unless set overrides them. ok is false when ctx ended.
func (e Env) Read(ctx context.Context, pt plan.Point, pair preflight.Pair, transport string, set map[param.ID]any) (row results.Row, ok bool) {
	values := map[param.ID]any{}
	for name, v := range readValues {
		values[name] = v
	}
	for name, v := range set {
		values[name] = v
	}
	return e.run(ctx, pt, pair, "check-"+transport, transport, values)
}

// run runs pt once between pair alone, its roles renamed server and
// client, with transport and values over the point's own, on a temporary
// file removed afterwards, under the plan's timeouts capped at a minute.
// ok is false when ctx ended.
func (e Env) run(ctx context.Context, pt plan.Point, pair preflight.Pair, key, transport string, values map[param.ID]any) (row results.Row, ok bool) {
	srv, cli := e.Set.Get(pair.Server.Name), e.Set.Get(pair.Client.Name)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	file := "/tmp/rdmasweep-check-" + hex.EncodeToString(b) + ".dat"
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = srv.Host.Run(cctx, []string{"rm", "-f", "--", file, file + results.SidecarSuffix})
	}()

	q := *e.Plan
	q.Timeouts = plan.Timeouts{Ready: min(q.Timeouts.Ready, 30*time.Second), Accept: min(q.Timeouts.Accept, 20*time.Second), Point: min(q.Timeouts.Point, time.Minute)}
	if q.Timeouts.Ready >= q.Timeouts.Point {
		q.Timeouts.Ready = q.Timeouts.Point / 2
	}
	// One server and one client: the probe's point has the pair alone.
	pt.Hosts = plan.Hosts{Servers: []plan.Host{pt.Hosts.Servers[pair.SI]}, Clients: []plan.Host{pt.Hosts.Clients[pair.CI]}}
	srv.Role, cli.Role = "server", "client"
	pt.Index, pt.Key = 0, key
	pt.Values = pt.Values.With(param.Transport, transport).With(param.File, file)
	for name, v := range values {
		pt.Values = pt.Values.With(name, v)
	}
	sr := &point.Runner{Plan: &q, RunID: "check", Targets: []role.Target{srv, cli}, LogDir: e.LogDir, Warn: e.Warn}
	if transport == results.TransportRDMA {
		sr.Choices = map[string]results.DeviceChoice{}
		for name, as := range map[string]string{pair.Server.Name: "server", pair.Client.Name: "client"} {
			if c, ok := e.Choices[name]; ok {
				sr.Choices[as] = c
			}
		}
	}
	rows, _, err := sr.Run(ctx, pt, 1)
	if err != nil {
		return results.Row{}, false
	}
	return rows[0], true
}

// Path runs one probe Read from pair's client to its server with
// transport, and returns check's table cell and, when the read failed,
// the problem.
func (e Env) Path(ctx context.Context, pt plan.Point, pair preflight.Pair, transport string) (string, *preflight.Problem) {
	row, ok := e.Read(ctx, pt, pair, transport, nil)
	if !ok {
		return "interrupted", nil
	}
	srvHost := pt.Hosts.Servers[pair.SI]
	if row.Status != results.StatusOK {
		hint := fmt.Sprintf("can the client reach %s? check the address and that a firewall lets node's port through (server.port fixes it)", srvHost.DataAddress)
		if transport == results.TransportRDMA {
			hint = "the GID, MTU or link of the two ports do not agree, or memlock is too low; node devices on both hosts shows them"
		}
		return "FAIL", &preflight.Problem{Check: transport + " probe", Msg: row.Error, Hint: hint}
	}
	cell := "ok " + srvHost.DataAddress
	if row.LatAvgUs != nil {
		cell += fmt.Sprintf(" 4KiB in %.0fus", *row.LatAvgUs)
	}
	return cell + ", " + verdict.LineRateCell(row), nil
}
