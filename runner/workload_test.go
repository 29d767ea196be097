package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rdmasweep/runner/files/csvfile"
	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/testenv"
)

// Peer workloads and the CSV's version 2 through the CLI.

// TestValidateRefusesWhatAPeerCannotTake: a parameter a peer cannot take
// is a plan error at the line that sets it (exit 2), one per peer, all at
// once; the same plan without the peers is valid.
func TestValidateRefusesWhatAPeerCannotTake(t *testing.T) {
	dir := t.TempDir()
	plan := loopbackPlan(t, dir, "sweep2: x")
	text, _ := os.ReadFile(plan)
	text = []byte(strings.Replace(string(text), "sweep2: x", "", 1))
	text = []byte(strings.Replace(string(text), "  zip:\n", "  matrix:\n    workload: [node, iperf3, fio]\n  zip:\n", 1))
	os.WriteFile(plan, text, 0o644)
	r := runner(t, dir, "validate", plan)
	lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
	// client: {queue_depth: 4, verify: true} is line 8, verify's value at col 34.
	if r.Code != 2 || len(lines) != 3 ||
		lines[0] != plan+":8:34: client.verify: workload iperf3 cannot take verify: iperf3 sends its own buffer's bytes, not the server's file, so there are no bytes to verify" ||
		lines[1] != plan+":8:34: client.verify: workload fio cannot take verify: fio checks only data it wrote itself, and --readonly writes none" ||
		lines[2] != "runner: error: "+plan+": 2 errors" {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	if r := runner(t, dir, "validate", plan, "--set", "verify=false"); r.Code != 0 {
		t.Fatalf("without verify: exit %d\n%s", r.Code, r.Stderr)
	}
	// ib_read_bw measures rdma: refused on a tcp plan, at the workload.
	r = runner(t, dir, "plan", plan, "--set", "verify=false", "--set", "workload=ib_read_bw", "--set", "total=64MiB")
	if r.Code != 2 || !strings.HasPrefix(r.Stderr, plan+":6:12: transport: workload ib_read_bw cannot take transport: ib_read_bw measures rdma, and the point's transport is tcp") {
		t.Fatalf("ib_read_bw on tcp: exit %d\n%s", r.Code, r.Stderr)
	}
}

// TestExecRefusesAMissingPeerBeforeAnyPoint: a host without the peer's
// program stops exec before the first point (exit 1, no row), naming the
// program and its packages.
func TestExecRefusesAMissingPeerBeforeAnyPoint(t *testing.T) {
	testenv.NeedTool(t, "ss", "iproute2")
	dir := t.TempDir()
	plan := loopbackPlan(t, dir, "workload: iperf3\n")
	// The system's PATH, without iperf3.
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if e.Name() != "iperf3" {
				os.Symlink(filepath.Join(d, e.Name()), filepath.Join(bin, e.Name())) // the first wins
			}
		}
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	r := clitest.Run(t, filepath.Join(binDir, "runner"), dir, append(env, "PATH="+bin), time.Minute, "exec", plan, "--set", "verify=false")
	if r.Code != 1 || !strings.Contains(r.Stderr, "runner: error: server (local): workload iperf3 needs iperf3, which is not on the host's PATH") ||
		!strings.Contains(r.Stderr, "runner: hint: install it: apt-get install iperf3 (Debian, Ubuntu) or dnf install iperf3 (RHEL)") {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	if rows, err := csvfile.Read(filepath.Join(dir, "out/test.csv")); err == nil && len(rows) > 0 {
		t.Fatalf("rows written: %d", len(rows))
	}
	// check shows the column, with the packages.
	r = clitest.Run(t, filepath.Join(binDir, "runner"), dir, append(env, "PATH="+bin), time.Minute, "check", plan, "--set", "verify=false")
	row := clitest.TableRow(t, r.Stdout, "client")
	if c := clitest.Column(t, r.Stdout, row, "IPERF3"); r.Code != 1 || c != "missing (Debian iperf3, RHEL iperf3)" {
		t.Fatalf("check: exit %d, cell %q\n%s%s", r.Code, c, r.Stdout, r.Stderr)
	}
}

// TestOlderCSVNeedsUpgradeThenAppends holds the CSV contract across the
// columns version 2 appended: a version 1 file is refused by exec (exit 2,
// with the command that fixes it) and nothing runs; summary and plot read
// it as it is; runner csv upgrade rewrites it, keeping the old file; then
// exec appends rows with the new columns filled.
func TestOlderCSVNeedsUpgradeThenAppends(t *testing.T) {
	dir := t.TempDir()
	plan := loopbackPlan(t, dir, "")
	old, err := os.ReadFile("files/csvfile/testdata/v1/loopback.csv")
	if err != nil {
		t.Fatal(err)
	}
	csv := filepath.Join(dir, "old.csv")
	os.WriteFile(csv, old, 0o644)

	r := runner(t, dir, "exec", plan, "--out", csv, "--only", "block_size=64KiB")
	if r.Code != 2 || !strings.Contains(r.Stderr, "older rdmasweep header") || !strings.Contains(r.Stderr, "runner csv upgrade "+csv) {
		t.Fatalf("exec on a v1 CSV: exit %d\n%s", r.Code, r.Stderr)
	}
	if b, _ := os.ReadFile(csv); string(b) != string(old) {
		t.Fatal("exec changed the v1 CSV")
	}
	if _, err := os.Stat(filepath.Join(dir, "data file.dat")); err == nil {
		t.Fatal("a point ran although the CSV was refused")
	}
	if r := runner(t, dir, "summary", csv); r.Code != 0 || !strings.Contains(r.Stdout, "4MiB") {
		t.Fatalf("summary of the v1 CSV: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if r := runner(t, dir, "plot", csv, "-o", filepath.Join(dir, "old.svg")); r.Code != 0 {
		t.Fatalf("plot of the v1 CSV: exit %d\n%s", r.Code, r.Stderr)
	}

	r = runner(t, dir, "csv", "upgrade", csv)
	if r.Code != 0 || !strings.Contains(r.Stderr, "upgraded "+csv) {
		t.Fatalf("upgrade: exit %d\n%s", r.Code, r.Stderr)
	}
	if b, _ := os.ReadFile(csv + ".bak"); string(b) != string(old) {
		t.Fatal("the old file is not kept as .bak")
	}
	r = runner(t, dir, "exec", plan, "--out", csv, "--only", "block_size=64KiB")
	if r.Code != 0 {
		t.Fatalf("exec after upgrade: exit %d\n%s", r.Code, r.Stderr)
	}
	rows := clitest.ReadRows(t, csv)
	if len(rows) != 12 {
		t.Fatalf("%d rows, want the 11 old and 1 new", len(rows))
	}
	first, last := rows[0], rows[11]
	if first.Param("workload") != "" || first.Workload() != "node" || first.CPUClient != nil {
		t.Errorf("an old row: workload %q cpu %v", first.Param("workload"), first.CPUClient)
	}
	if last.Param("workload") != "node" || last.CPUClient == nil || last.CPUServer == nil || *last.CPUClient <= 0 {
		t.Errorf("the new row: workload %q cpu %v %v", last.Param("workload"), last.CPUClient, last.CPUServer)
	}
}
