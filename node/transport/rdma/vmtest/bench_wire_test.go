//go:build bench

package vmtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rdmasweep/internal/stat"
	"rdmasweep/results"
	"rdmasweep/testbed/guest"
	"rdmasweep/testbed/testenv"
)

// TestBenchSSDWire is docs/ssd.md's and docs/performance.md's node
// against NVMe over Fabrics, on equal terms, as plans/ssd-vs-nvmeof.yaml
// runs them: across the two guests on the wire, in one exec, taking
// turns, 5 times, at 4 KiB, 64 KiB and 1 MiB, node (pinned, serial and
// pipelined, verifying nothing) beside nvmeof (nvmet-rdma reading the
// same file, its sample checked after fio's timing) and fio on the
// server's file. Cold points read the whole file once off the drive
// (cache=none, throttled to depth1DiskBPS, far above what the wire
// carries); warm ones read for 4 s after 1 s of warmup (the checked-in
// plan's 10 s after 2 s, shortened for TCG). It logs, with the load,
// each size's warm node/nvmeof median bandwidth and cold node pipelined
// against nvmeof's one-pass end_to_end_mb_s, and prints `runner summary
// --baseline workload=nvmeof`. The CSV and plots go to
// $RDMASWEEP_BENCH_OUT.
//
//	RDMASWEEP_BENCH_OUT=out/ssd go test -tags bench -run TestBenchSSDWire -v ./node/transport/rdma/vmtest
func TestBenchSSDWire(t *testing.T) {
	out := os.Getenv("RDMASWEEP_BENCH_OUT")
	if out == "" {
		out = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 75*time.Minute)
	defer cancel()
	lab := startWireLab(t, ctx, guest.Bookworm)
	if err := lab.server.g.SetNVMeReadBPS(ctx, depth1DiskBPS); err != nil {
		t.Fatal(err)
	}
	t.Logf("start: %s", testenv.Load())
	plan := lab.plan(t, "ssd-wire", fmt.Sprintf(`server: {file: %s, file_size: %dMiB, create: true, cache: cold, registration: pinned, mr_size: 1MiB}
client: {queue_depth: 16, pattern: sequential, verify: false}
repeat: 5
sweep:
  zip:
    cache: [cold, warm]
    duration: [0s, 4s]
    warmup: [0s, 1s]
  matrix:
    block_size: [4KiB, 64KiB, 1MiB]
    pipeline: [false, true]
    workload: [node, nvmeof, fio]
`, wirePipeFile, wirePipeSize>>20))
	rows := lab.exec(t, plan, "ssd-wire")
	t.Logf("end: %s", testenv.Load())
	csv := filepath.Join(lab.dir, "out", "ssd-wire.csv")
	b, err := os.ReadFile(csv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "ssd-wire.csv"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	// Each size's medians: warm bandwidth (node serial), cold end to end
	// (node pipelined).
	med := func(cache, bs, workload, pipeline string, col func(results.Row) *float64) (float64, int) {
		var v []float64
		for _, r := range rows {
			if r.Status == results.StatusOK && r.Param("cache") == cache && r.Param("block_size") == bs && r.Param("workload") == workload &&
				(pipeline == "" || r.Param("pipeline") == pipeline) && col(r) != nil {
				v = append(v, *col(r))
			}
		}
		return stat.Median(v), len(v)
	}
	bw := func(r results.Row) *float64 { return r.BandwidthMBs }
	e2e := func(r results.Row) *float64 { return r.EndToEndMBs }
	for _, bs := range []string{"4096", "65536", "1048576"} {
		n, nn := med("warm", bs, "node", "false", bw)
		v, vn := med("warm", bs, "nvmeof", "", bw)
		t.Logf("BENCH warm %7s: node %.1f MB/s (%d), nvmeof %.1f MB/s (%d), node/nvmeof %.2f", bs, n, nn, v, vn, n/v)
		s, sn := med("cold", bs, "node", "false", e2e)
		p, pn := med("cold", bs, "node", "true", e2e)
		c, cn := med("cold", bs, "nvmeof", "", e2e)
		f, fn := med("cold", bs, "fio", "", e2e)
		t.Logf("BENCH cold %7s end to end: node serial %.1f (%d), pipelined %.1f (%d), nvmeof %.1f (%d), fio %.1f (%d); pipelined/nvmeof %.2f", bs, s, sn, p, pn, c, cn, f, fn, p/c)
	}
	for _, args := range [][]string{
		{"plot", "-y", "end_to_end_mb_s", "-o", filepath.Join(out, "ssd-pipeline.png"), csv},
		{"plot", "-o", filepath.Join(out, "ssd-nvmeof.png"), csv},
		{"summary", "--baseline", "workload=nvmeof", csv},
	} {
		stdout, stderr, err := runRunner(ctx, lab.runner, lab.dir, lab.env, args...)
		if err != nil {
			t.Fatalf("runner %v: %v\n%s", args, err, stderr)
		}
		t.Logf("runner %s:\n%s%s", args[0], stdout, stderr)
	}
}

// TestBenchDirectWire is io direct against the kernel's target and the
// mmap pipeline, cold, on the wire: the drive cache=none at
// depth1DiskBPS, one exec, taking turns, 5 times, at 64 KiB and 1 MiB:
// node io direct (O_DIRECT into its ring), node pipelined (mmap, populate
// parallel) and nvmeof (nvmet-rdma, buffered_io 0: O_DIRECT too), each
// reading the 96 MiB file once (io direct through its ring of twice the
// client's bytes in flight: 32 MiB at 1 MiB), with node warm beside them. It logs each
// size's medians: end_to_end_mb_s, direct/nvmeof, and each stream
// against 0.9 × min(the disk's ceiling, node's warm READs).
//
//	go test -tags bench -run TestBenchDirectWire -v ./node/transport/rdma/vmtest
func TestBenchDirectWire(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	lab := startWireLab(t, ctx, guest.Bookworm)
	if err := lab.server.g.SetNVMeReadBPS(ctx, depth1DiskBPS); err != nil {
		t.Fatal(err)
	}
	t.Logf("start: %s", testenv.Load())
	plan := lab.plan(t, "direct-wire", fmt.Sprintf(`server: {file: %s, file_size: %dMiB, create: true, registration: pinned, mr_size: 1MiB}
client: {queue_depth: 16, pattern: sequential, verify: false}
repeat: 5
sweep:
  zip:
    cache: [cold, cold, warm]
    duration: [0s, 0s, 4s]
    warmup: [0s, 0s, 1s]
    pipeline: [true, false, false]
    io: [mmap, direct, mmap]
  matrix:
    block_size: [64KiB, 1MiB]
    workload: [node, nvmeof]
`, wireDiskLinkFile, wireDiskLinkSize>>20))
	rows := lab.exec(t, plan, "direct-wire")
	t.Logf("end: %s", testenv.Load())
	med := func(bs, workload, cache, io string, pipe bool, col func(results.Row) *float64) (float64, int) {
		var v []float64
		for _, r := range rows {
			if r.Status == results.StatusOK && r.Param("block_size") == bs && r.Workload() == workload && r.Param("cache") == cache &&
				(workload != "node" || r.Param("io") == io && (r.Param("pipeline") == "true") == pipe) && col(r) != nil {
				v = append(v, *col(r))
			}
		}
		return stat.Median(v), len(v)
	}
	e2e := func(r results.Row) *float64 { return r.EndToEndMBs }
	bw := func(r results.Row) *float64 { return r.BandwidthMBs }
	ceil := func(r results.Row) *float64 { return r.DiskCeilingMBs }
	for _, bs := range []string{"65536", "1048576"} {
		d, dn := med(bs, "node", "cold", results.IODirect, false, e2e)
		p, pn := med(bs, "node", "cold", results.IOMmap, true, e2e)
		v, vn := med(bs, "nvmeof", "cold", "", false, e2e)
		w, wn := med(bs, "node", "warm", results.IOMmap, false, bw)
		c, _ := med(bs, "node", "cold", results.IODirect, false, ceil)
		t.Logf("BENCH cold %7s end to end: node direct %.1f (%d), pipelined %.1f (%d), nvmeof %.1f (%d); direct/nvmeof %.2f, pipelined/nvmeof %.2f; warm %.1f (%d), ceiling %.0f: direct %.2f, pipelined %.2f of min(ceiling, warm)",
			bs, d, dn, p, pn, v, vn, d/v, p/v, w, wn, c, d/min(c, w), p/min(c, w))
	}
	stdout, stderr, err := runRunner(ctx, lab.runner, lab.dir, lab.env, "summary", "--baseline", "workload=nvmeof", filepath.Join(lab.dir, "out", "direct-wire.csv"))
	if err != nil {
		t.Fatalf("runner summary: %v\n%s", err, stderr)
	}
	t.Logf("runner summary:\n%s%s", stdout, stderr)
}

// TestBenchBoundByLink is the link's side of bound_by on the wire, which
// TestGuestWire/BoundByLink and BoundByMeasuredLink leave to an idle
// machine. With the server's wire NIC carrying 100 Mb/s (netem's rate):
//   - line rate: the NIC saying 100 Mb/s, a warm tcp point is bound by
//     the link, its bandwidth 0.9 to 1.05 × the link's capacity (12.5
//     MB/s × 1448/1538, tcp's payload at MTU 1500);
//   - measured: the NIC saying nothing, as virtio's does, the same against
//     the capacity iperf3 measured between the guests;
//   - disk and link: the NIC saying 100 Mb/s and the drive held to 11 MB/s
//     ($RDMASWEEP_DISK_LINK_BPS), about the link's capacity over RoCE, a
//     cold pipelined rdma point with populate parallel keeps both full,
//     and is named by both (disk+link).
//
// It prints the load beside the figures; above half the CPUs, its
// verdicts say little.
//
//	go test -tags bench -run TestBenchBoundByLink -v ./node/transport/rdma/vmtest
func TestBenchBoundByLink(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	lab := startWireLab(t, ctx, guest.Bookworm)
	linkBound := func(t *testing.T, r results.Row) {
		bw := deref(r.BandwidthMBs) / deref(r.LinkCapacityMBs)
		t.Logf("BENCH bound_by %s (%s): %.1f MB/s = %.2f × link capacity %s MB/s (%s); %s", r.BoundBy, r.BoundByDetail, deref(r.BandwidthMBs), bw, fmtPtr(r.LinkCapacityMBs), r.LinkCapacityFrom, testenv.Load())
		if r.BoundBy != results.BoundLink || bw < 0.9 || bw > 1.05 {
			t.Errorf("bound_by %q, bandwidth %.2f × link capacity; want link, 0.9 to 1.05", r.BoundBy, bw)
		}
	}
	t.Run("LineRate", func(t *testing.T) { linkBound(t, lab.linkBoundRow(t)) })
	t.Run("Measured", func(t *testing.T) { linkBound(t, lab.measuredLinkRow(t)) })
	t.Run("DiskAndLink", func(t *testing.T) {
		bps := int64(11_000_000)
		if v := os.Getenv("RDMASWEEP_DISK_LINK_BPS"); v != "" {
			fmt.Sscan(v, &bps)
		}
		r := lab.diskAndLinkRow(t, bps)
		if !strings.Contains(r.BoundBy, results.BoundDisk) || !strings.Contains(r.BoundBy, results.BoundLink) {
			t.Errorf("bound_by %q (%s); want disk and link together", r.BoundBy, r.BoundByDetail)
		}
	})
}

// TestBenchRegionSize is docs/rdma.md's region size for a pipeline: a
// cold pipelined point (populate parallel, unwritten) of 96 MiB across
// the wire, the drive at depth1DiskBPS, at mr_size 1, 4, 16 and 32 MiB,
// 3 times each, taking turns. Small regions let the first READ start
// sooner; each costs a registration call and an announcement. It logs
// each size's median end_to_end_mb_s, first_read_ms and registration_s.
//
//	go test -tags bench -run TestBenchRegionSize -v ./node/transport/rdma/vmtest
func TestBenchRegionSize(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	lab := startWireLab(t, ctx, guest.Bookworm)
	if err := lab.server.g.SetNVMeReadBPS(ctx, depth1DiskBPS); err != nil {
		t.Fatal(err)
	}
	t.Logf("start: %s", testenv.Load())
	plan := lab.plan(t, "region-size", fmt.Sprintf(`server: {file: %s, file_size: %dMiB, create: true, cache: cold, registration: pinned, pipeline: true}
client: {block_size: 256KiB, queue_depth: 16}
repeat: 3
sweep:
  matrix:
    mr_size: [1MiB, 4MiB, 16MiB, 32MiB]
`, wireDiskLinkFile, wireDiskLinkSize>>20))
	rows := lab.exec(t, plan, "region-size")
	t.Logf("end: %s", testenv.Load())
	for _, mr := range []string{"1048576", "4194304", "16777216", "33554432"} {
		col := func(f func(results.Row) *float64) (float64, int) {
			var v []float64
			for _, r := range rows {
				if r.Status == results.StatusOK && r.Param("mr_size") == mr && f(r) != nil {
					v = append(v, *f(r))
				}
			}
			return stat.Median(v), len(v)
		}
		e2e, n := col(func(r results.Row) *float64 { return r.EndToEndMBs })
		first, _ := col(func(r results.Row) *float64 { return r.FirstReadMs })
		reg, _ := col(func(r results.Row) *float64 { return r.RegistrationS })
		idle, _ := col(func(r results.Row) *float64 { return r.DiskIdlePct })
		t.Logf("BENCH mr_size %8s: end_to_end %.1f MB/s, first_read %.0f ms, registration %.2f s, disk idle %.1f %% (%d runs)", mr, e2e, first, reg, idle, n)
	}
}
