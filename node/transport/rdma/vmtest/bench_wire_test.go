//go:build bench

package vmtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/testbed/guest"
	"rdmasweep/testbed/testenv"
)

// TestBenchSSDWire is docs/ssd.md's figures: across the two guests on the
// wire, the server's file on its NVMe drive (throttled to wireDiskBPS),
// node reads the cold file serially and pipelined at three block sizes,
// three times each, beside NVMe over Fabrics (nvmet-rdma) reading the
// same file and fio's cold read of it on the server. The CSV, `runner
// plot -y end_to_end_mb_s` of it (node, serial against pipelined) and
// `runner plot` of every workload's bandwidth go to $RDMASWEEP_BENCH_OUT.
//
//	RDMASWEEP_BENCH_OUT=out/ssd go test -tags bench -run TestBenchSSDWire -v ./node/transport/rdma/vmtest
func TestBenchSSDWire(t *testing.T) {
	out := os.Getenv("RDMASWEEP_BENCH_OUT")
	if out == "" {
		out = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	lab := startWireLab(t, ctx, guest.Bookworm)
	plan := lab.plan(t, "ssd-wire", fmt.Sprintf(`server: {file: %s, file_size: %dMiB, create: true, cache: cold, registration: pinned, mr_size: 1MiB}
client: {queue_depth: 4}
repeat: 3
sweep:
  matrix:
    block_size: [64KiB, 256KiB, 1MiB]
    pipeline: [false, true]
    workload: [node, nvmeof, fio]
`, wirePipeFile, wirePipeSize>>20))
	lab.exec(t, plan, "ssd-wire", "--only", "workload=node")
	lab.exec(t, plan, "ssd-wire", "--only", "workload=nvmeof,fio", "--only", "pipeline=false")
	csv := filepath.Join(lab.dir, "out", "ssd-wire.csv")
	b, err := os.ReadFile(csv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "ssd-wire.csv"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"plot", "-y", "end_to_end_mb_s", "-o", filepath.Join(out, "ssd-pipeline.png"), csv},
		{"plot", "-o", filepath.Join(out, "ssd-nvmeof.png"), csv},
		{"summary", "--baseline", "workload=node", csv},
	} {
		stdout, stderr, err := runRunner(ctx, lab.runner, lab.dir, lab.env, args...)
		if err != nil {
			t.Fatalf("runner %v: %v\n%s", args, err, stderr)
		}
		t.Logf("runner %s:\n%s%s", args[0], stdout, stderr)
	}
}

// TestBenchBoundByLink is the link's side of bound_by on the wire, which
// TestGuestWire/BoundByLink leaves to an idle machine: with the server's
// wire NIC at 100 Mb/s by its speed and by netem's rate, a warm tcp
// point is named bound by the link, its bandwidth 0.9 to 1.05 × the line
// rate (TCP's payload in a full frame is 0.956 of it). It prints the
// load beside the figures; above half the CPUs, its verdict says little.
//
//	go test -tags bench -run TestBenchBoundByLink -v ./node/transport/rdma/vmtest
func TestBenchBoundByLink(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	lab := startWireLab(t, ctx, guest.Bookworm)
	r := lab.linkBoundRow(t)
	bw := deref(r.BandwidthMBs) / deref(r.LineRateMBs)
	t.Logf("BENCH bound_by %s (%s): %.1f MB/s = %.2f × line rate %s MB/s; %s", r.BoundBy, r.BoundByDetail, deref(r.BandwidthMBs), bw, fmtPtr(r.LineRateMBs), testenv.Load())
	if r.BoundBy != results.BoundLink || bw < 0.9 || bw > 1.05 {
		t.Errorf("bound_by %q, bandwidth %.2f × line rate; want link, 0.9 to 1.05", r.BoundBy, bw)
	}
}
