package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"rdmasweep/runner/files/manifest"
	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/testenv"
	"rdmasweep/testbed/testhosts"
)

// TestDiskCeilingAcrossSSHHosts is issue 40's ceiling through runner
// exec on namespace hosts: a plan reading the server's file (on this
// machine's disk, not there yet) cold and then warm. Before the cold
// point exec makes the file, runs fio's O_DIRECT probe and grid on the
// server's host once, and says what it measured; the manifest holds the
// figure with every run; the cold row carries it in disk_ceiling_mb_s
// and is still proven cold (the ceiling left nothing in the page cache),
// the warm one has none. With the file on the host's tmpfs, exec warns
// and leaves the cell empty.
func TestDiskCeilingAcrossSSHHosts(t *testing.T) {
	testenv.NeedTool(t, "fio", "fio")
	// The hosts share the machine's /tmp (their /var/tmp is their own
	// tmpfs).
	dataDir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dataDir, &fs); err != nil || fs.Type == unix.TMPFS_MAGIC {
		testenv.Skip(t, dataDir+" is not on a disk here")
	}
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}})
	a := n.Hosts["a"]
	exec := func(file string) (clitest.Result, string) {
		dir := t.TempDir()
		plan := twoHostPlan(t, dir, n, "")
		text, _ := os.ReadFile(plan)
		text = bytes.Replace(text, []byte(fmt.Sprintf(`{file: "%s/data file.dat", file_size: 8MiB, create: true, cache: warm}`, testhosts.DeployDir)),
			[]byte(fmt.Sprintf(`{file: %s, file_size: 32MiB, create: true}`, file)), 1)
		text = bytes.Replace(text, []byte("  zip:\n    block_size: [1MiB, 64KiB]\n"), []byte("  matrix: {cache: [cold, warm]}\n"), 1)
		os.WriteFile(plan, text, 0o644)
		r := runnerEnv(t, dir, clitest.SSHEnv(t), "exec", plan)
		if r.Code != 0 {
			t.Fatalf("exec: exit %d\n%s", r.Code, r.Stderr)
		}
		return r, dir
	}

	file := filepath.Join(dataDir, "f.dat")
	r, dir := exec(file)
	host := "root@" + a.Addr + ":22"
	said := fmt.Sprintf("disk ceiling of %s:%s: ", host, file)
	if !strings.Contains(r.Stderr, said) || !strings.Contains(r.Stderr, "MB/s (fio O_DIRECT, best of ") {
		t.Errorf("exec does not say %q…:\n%s", said, r.Stderr)
	}
	rows := clitest.ReadRows(t, filepath.Join(dir, "out/hosts.csv"))
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	m, err := manifest.Read(manifest.PathFor(filepath.Join(dir, "out/hosts.csv"), rows[0].RunID))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.DiskCeilings) != 1 {
		t.Fatalf("manifest disk_ceilings %+v, want one", m.DiskCeilings)
	}
	dc := m.DiskCeilings[0]
	t.Logf("disk ceiling of %s:%s: %.0f MB/s over %d runs; %s", dc.Host, dc.File, dc.MBs, len(dc.Runs), testenv.Load())
	// The probe, then at least the grid's run with the fewest bytes in
	// flight (128 KiB × 32): 4 MiB, under a second of any disk's rate.
	if dc.Host != host || dc.File != file || !(dc.MBs > 0) || len(dc.Runs) < 2 || len(dc.Runs) > 9 {
		t.Errorf("manifest disk_ceilings[0] %s %s %v MB/s, %d runs; want %s %s, > 0, 2 to 9 runs", dc.Host, dc.File, dc.MBs, len(dc.Runs), host, file)
	}
	// The probe only sizes the grid: it reads its range round again, and
	// may read faster than the disk gives once; the ceiling is the grid's
	// best, every grid run at or under it.
	best := 0.0
	for i, run := range dc.Runs {
		if run.Probe != (i == 0) || !strings.Contains(strings.Join(run.Argv, " "), "--direct=1") {
			t.Errorf("run %d %v: probe %v, want the probe first and alone, all O_DIRECT", i, run.Argv, run.Probe)
		}
		if !run.Probe {
			best = max(best, run.MBs)
		}
	}
	if best != dc.MBs {
		t.Errorf("ceiling %v MB/s, want the grid's best, %v", dc.MBs, best)
	}
	for _, row := range rows {
		cache := row.Param("cache")
		t.Logf("cache=%s: disk_ceiling_mb_s %s, disk_read_mb_s %s, cold_read_fraction %s, bound_by %s (%s)", cache, floatCell(row.DiskCeilingMBs), floatCell(row.DiskReadMBs), floatCell(row.ColdReadFraction), row.BoundBy, row.BoundByDetail)
		switch {
		case row.Status != "ok":
			t.Errorf("cache=%s: %s %s", cache, row.Status, row.Error)
		case cache == "cold" && (row.DiskCeilingMBs == nil || *row.DiskCeilingMBs != dc.MBs):
			t.Errorf("cold row: disk_ceiling_mb_s %s, want the manifest's %v", floatCell(row.DiskCeilingMBs), dc.MBs)
		case cache == "cold" && row.NotCold() != "":
			t.Errorf("cold row not proven cold after the ceiling: %s", row.NotCold())
		case cache == "cold" && (row.DiskReadMBs == nil || !strings.Contains(row.BoundByDetail, fmt.Sprintf("disk %.2f", *row.DiskReadMBs / *row.DiskCeilingMBs))):
			// bound_by weighs the disk against the ceiling.
			t.Errorf("cold row: bound_by_detail %q, disk_read_mb_s %s; want the disk's share disk_read_mb_s ÷ disk_ceiling_mb_s", row.BoundByDetail, floatCell(row.DiskReadMBs))
		case cache == "warm" && row.DiskCeilingMBs != nil:
			t.Errorf("warm row: disk_ceiling_mb_s %v, want empty", *row.DiskCeilingMBs)
		}
	}

	// On the host's tmpfs there is no disk to measure.
	onTmpfs := testhosts.VarTmp + "/ceiling.dat"
	r, dir = exec(onTmpfs)
	if want := fmt.Sprintf("%s is on tmpfs, with no disk under it, so disk_ceiling_mb_s stays empty", onTmpfs); !strings.Contains(r.Stderr, want) {
		t.Errorf("exec does not warn %q:\n%s", want, r.Stderr)
	}
	for _, row := range clitest.ReadRows(t, filepath.Join(dir, "out/hosts.csv")) {
		if row.DiskCeilingMBs != nil {
			t.Errorf("cache=%s on tmpfs: disk_ceiling_mb_s %v, want empty", row.Param("cache"), *row.DiskCeilingMBs)
		}
	}
}

// floatCell is a float cell as the CSV shows it: empty or its value.
func floatCell(p *float64) string {
	if p == nil {
		return "(empty)"
	}
	return fmt.Sprint(*p)
}
