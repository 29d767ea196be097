package sweep

import (
	"context"
	"path/filepath"
	"testing"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/linerate"
	"rdmasweep/runner/files/manifest"
	"rdmasweep/runner/points/preflight"
)

// TestLinksMeasureOnceWhereNoLineRate: rows whose NIC reports a line rate
// get it at the protocol's payload share and measure nothing; the first
// point whose rows have none measures its link once, between its own
// hosts and over its own transport, records it, and its rows and every
// later point's weigh the link against it; a second transport is a
// second measurement; loopback is never measured; a failed measurement
// warns once and leaves the cells empty.
func TestLinksMeasureOnceWhereNoLineRate(t *testing.T) {
	p, err := plan.Parse("links.yaml", []byte(`name: links
hosts:
  server: {address: a}
  client: {address: b}
transport: tcp
server: {file: /data/f.dat, file_size: 64MiB, create: true}
sweep:
  matrix: {block_size: [1MiB, 64KiB]}
output: {csv: out.csv, logs: logs}
`), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pts, err := plan.Expand(p, plan.ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var measured []string
	var warned []string
	l := &Links{
		Plan:   p,
		HostOf: hostNames{"server": "alice@a:22", "client": "bob@b:22"}.get,
		Measure: func(ctx context.Context, pt plan.Point, pair preflight.Pair, transport string) (manifest.LinkCapacity, bool) {
			measured = append(measured, pair.Server.Name+" "+pair.Client.Name+" "+transport)
			lc := manifest.LinkCapacity{Server: "alice@a:22", Client: "bob@b:22", Transport: transport, Workload: "iperf3", MBs: 40}
			if transport == results.TransportRDMA {
				lc.MBs, lc.Error = 0, "ib_read_bw: failed no device"
			}
			return lc, true
		},
		Rec:  &manifest.Record{Path: filepath.Join(t.TempDir(), "run.json"), M: &manifest.Manifest{}},
		Info: func(string) {},
		Warn: func(msg string) { warned = append(warned, msg) },
	}
	f := func(x float64) *float64 { return &x }
	row := func(transport string, line *float64, unknown string) results.Row {
		mtu := 1500
		return results.Row{Status: results.StatusOK, ServerHost: "alice@a:22", ClientHost: "bob@b:22", Params: map[string]string{"transport": transport},
			BandwidthMBs: f(38), LineRateMBs: line, LineRateUnknown: unknown, PathMTU: &mtu}
	}
	ctx := context.Background()

	known := []results.Row{row(results.TransportTCP, f(1250), "")}
	l.Set(ctx, pts[0], known)
	if len(measured) != 0 || known[0].LinkCapacityFrom != results.LinkFromLineRate {
		t.Fatalf("a row with a line rate: measured %q, link_capacity_from %q; want nothing measured, %s", measured, known[0].LinkCapacityFrom, results.LinkFromLineRate)
	}
	loop := []results.Row{row(results.TransportTCP, nil, linerate.Loopback)}
	l.Set(ctx, pts[0], loop)
	if len(measured) != 0 || loop[0].LinkCapacityMBs != nil {
		t.Fatalf("loopback: measured %q, link_capacity_mb_s %v; want neither", measured, loop[0].LinkCapacityMBs)
	}
	for _, pt := range pts {
		rows := []results.Row{row(results.TransportTCP, nil, "read eth1's speed: invalid argument")}
		l.Set(ctx, pt, rows)
		if rows[0].LinkCapacityMBs == nil || *rows[0].LinkCapacityMBs != 40 || rows[0].LinkCapacityFrom != results.LinkFromMeasured {
			t.Fatalf("point %d: link_capacity_mb_s %v from %q; want 40, measured", pt.Index+1, rows[0].LinkCapacityMBs, rows[0].LinkCapacityFrom)
		}
	}
	if len(measured) != 1 || measured[0] != "server client tcp" {
		t.Fatalf("measured %q; want the server and client's tcp link once", measured)
	}
	for range 2 {
		rows := []results.Row{row(results.TransportRDMA, nil, "rxe0 port 1: read eth1's speed: invalid argument")}
		l.Set(ctx, pts[0], rows)
		if rows[0].LinkCapacityMBs != nil {
			t.Fatalf("a failed measurement: link_capacity_mb_s %v; want empty", *rows[0].LinkCapacityMBs)
		}
	}
	if len(measured) != 2 || len(warned) != 1 {
		t.Fatalf("measured %q, warned %q; want rdma measured once beside tcp, and one warning", measured, warned)
	}
	m, err := manifest.Read(l.Rec.Path)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.LinkCapacities) != 2 || m.LinkCapacities[0].MBs != 40 || m.LinkCapacities[1].Error == "" {
		t.Fatalf("manifest link_capacities %+v; want tcp's 40 MB/s and rdma's error", m.LinkCapacities)
	}
}

type hostNames map[string]string

func (h hostNames) get(role string) string { return h[role] }
