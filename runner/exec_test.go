package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/files/csvfile"
	"rdmasweep/testbed/clitest"
)

// loopbackPlan writes a small local tcp plan into dir and returns its path.
func loopbackPlan(t *testing.T, dir, extra string) string {
	t.Helper()
	text := fmt.Sprintf(`name: test-loop
hosts:
  server: {address: local}
  client: {address: local}
node: {binary: %s}
transport: tcp
server: {file: %s, file_size: 4MiB, create: true, cache: warm}
client: {queue_depth: 4, verify: true}
sweep:
  zip:
    block_size: [1MiB, 256KiB, 64KiB]
timeouts: {ready: 20s, accept: 20s, point: 40s}
output: {csv: out/test.csv, logs: out/logs}
%s`, filepath.Join(binDir, "node"), filepath.Join(dir, "data file.dat"), extra)
	path := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// execLoopback runs exec of a loopbackPlan in dir, which must succeed,
// and returns what it printed and the rows of its CSV, which must be want.
func execLoopback(t *testing.T, dir, plan string, want int) (clitest.Result, []results.Row) {
	t.Helper()
	r := runner(t, dir, "exec", plan)
	if r.Code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", r.Code, r.Stderr)
	}
	rows := clitest.ReadRows(t, filepath.Join(dir, "out/test.csv"))
	if len(rows) != want {
		t.Fatalf("%d rows, want %d", len(rows), want)
	}
	return r, rows
}

func TestExecWritesRowsSkipsAndReruns(t *testing.T) {
	dir := t.TempDir()
	plan := loopbackPlan(t, dir, "")
	r, rows := execLoopback(t, dir, plan, 3)
	csv := filepath.Join(dir, "out/test.csv")
	keys := map[string]bool{}
	for i, row := range rows {
		want := []int64{1 << 20, 256 << 10, 64 << 10}[i]
		if row.Status != "ok" || row.ParamInt("block_size") != want || row.Repetition != 1 || row.Transport() != "tcp" {
			t.Errorf("row %d: %+v", i, row)
		}
		if row.Bytes == nil || *row.Bytes != 4<<20 || *row.BandwidthMBs <= 0 || *row.IOPS <= 0 || !*row.Verified {
			t.Errorf("row %d measurement: bytes %v bw %v verified %v", i, row.Bytes, row.BandwidthMBs, row.Verified)
		}
		if *row.LatP50Us <= 0 || *row.LatP99Us < *row.LatP50Us || *row.LatMaxUs < *row.LatP99Us {
			t.Errorf("row %d latency not ordered: p50 %v p99 %v max %v", i, *row.LatP50Us, *row.LatP99Us, *row.LatMaxUs)
		}
		if row.RegistrationS != nil || row.Param("registration") != "" {
			t.Errorf("tcp row %d has registration figures", i)
		}
		if _, err := time.Parse(time.RFC3339, row.StartedAt); err != nil || row.RunID == "" || row.ServerHost != "local" {
			t.Errorf("row %d: started_at %q run_id %q server %q", i, row.StartedAt, row.RunID, row.ServerHost)
		}
		keys[row.PointKey] = true
	}
	if len(keys) != 3 {
		t.Errorf("point keys not distinct: %v", keys)
	}
	// The summary goes to stdout, one line per point after the header.
	if lines := strings.Split(strings.TrimSpace(r.Stdout), "\n"); len(lines) != 4 || !strings.Contains(lines[0], "MB/S") {
		t.Errorf("summary:\n%s", r.Stdout)
	}
	if _, err := os.Stat(csv + ".state"); !os.IsNotExist(err) {
		t.Errorf("state file left behind after a clean exec: %v", err)
	}

	// Again: everything is skipped, nothing is appended.
	r = runner(t, dir, "exec", plan)
	if r.Code != 0 || !strings.Contains(r.Stderr, "skipping 3 runs already ok") {
		t.Fatalf("second exec: exit %d\n%s", r.Code, r.Stderr)
	}
	if n := len(clitest.ReadRows(t, csv)); n != 3 {
		t.Fatalf("second exec appended: %d rows", n)
	}
	// --rerun repeats them; --only narrows (flags after the plan work too).
	r = runner(t, dir, "exec", plan, "--rerun", "--only", "block_size=64KiB,1MiB")
	if r.Code != 0 {
		t.Fatalf("rerun: exit %d\n%s", r.Code, r.Stderr)
	}
	rows = clitest.ReadRows(t, csv)
	if len(rows) != 5 || rows[3].ParamInt("block_size") != 1<<20 || rows[4].ParamInt("block_size") != 64<<10 || rows[3].RunID == rows[0].RunID {
		t.Fatalf("after rerun: %d rows", len(rows))
	}

	// runner summary reads the CSV back, grouped by point.
	r = runner(t, dir, "summary", csv)
	if r.Code != 0 || !strings.Contains(r.Stdout, "1MiB") || !strings.Contains(r.Stdout, "256KiB") {
		t.Fatalf("summary: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

func TestForeignHeaderRefusedBeforeAnyPoint(t *testing.T) {
	dir := t.TempDir()
	plan := loopbackPlan(t, dir, "")
	os.MkdirAll(filepath.Join(dir, "out"), 0o755)
	foreign := "time,bandwidth\n1,2\n"
	os.WriteFile(filepath.Join(dir, "out/test.csv"), []byte(foreign), 0o644)
	r := runner(t, dir, "exec", plan)
	if r.Code != 2 || !strings.Contains(r.Stderr, "different header") || !strings.Contains(r.Stderr, "--out") {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "out/test.csv")); string(data) != foreign {
		t.Fatalf("foreign CSV changed:\n%s", data)
	}
	if _, err := os.Stat(filepath.Join(dir, "data file.dat")); err == nil {
		t.Fatal("a point ran although the CSV was refused")
	}
}

func TestSecondRunnerOnSameCSVRefuses(t *testing.T) {
	dir := t.TempDir()
	plan := loopbackPlan(t, dir, "")
	held, err := csvfile.Open(filepath.Join(dir, "out/test.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	r := runner(t, dir, "exec", plan)
	if r.Code != 1 || !strings.Contains(r.Stderr, "another runner is appending to it") || !strings.Contains(r.Stderr, "runner: hint: ") {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
}

func TestFailedPointGetsRowAndSweepGoesOn(t *testing.T) {
	dir := t.TempDir()
	plan := loopbackPlan(t, dir, "")
	// A server file under a regular file cannot be created: every point fails.
	os.WriteFile(filepath.Join(dir, "blocker"), nil, 0o644)
	r := runner(t, dir, "exec", plan, "--set", "file="+filepath.Join(dir, "blocker", "data.dat"))
	if r.Code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.Code, r.Stderr)
	}
	rows := clitest.ReadRows(t, filepath.Join(dir, "out/test.csv"))
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3 failed rows", len(rows))
	}
	for _, row := range rows {
		if row.Status != "failed" || !strings.HasPrefix(row.Error, "server (local): ") || strings.Contains(row.Error, "\n") || row.Bytes != nil {
			t.Fatalf("row: %+v", row)
		}
	}
	// --fail-fast stops at the first.
	r = runner(t, dir, "exec", plan, "--set", "file="+filepath.Join(dir, "blocker", "data.dat"), "--fail-fast", "--out", "ff.csv")
	if r.Code != 1 || len(clitest.ReadRows(t, filepath.Join(dir, "ff.csv"))) != 1 || !strings.Contains(r.Stderr, "--fail-fast") {
		t.Fatalf("fail-fast: exit %d\n%s", r.Code, r.Stderr)
	}
	// The server's stderr tail is in its log.
	logs, _ := filepath.Glob(filepath.Join(dir, "out/logs/*/*.server.log"))
	if len(logs) == 0 {
		t.Fatal("no server logs")
	}
}

func TestSignalsStopBothRolesAndKeepCSVWhole(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			// One quick point, then a long one to interrupt.
			plan := loopbackPlan(t, dir, "")
			r := startRunner(t, dir, nil, "exec", plan, "--set", "duration=20s", "--set", "total=0")
			// Wait until both roles of the first point are up.
			r.Until(t, "both nodes running", 20*time.Second, func() bool { return len(localNodes(t)) >= 2 })
			time.Sleep(300 * time.Millisecond)
			r.Signal(tc.sig)
			if code := r.Wait(t, time.Minute); code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", code, tc.code, r.Stderr())
			}
			if pids := localNodes(t); len(pids) != 0 {
				t.Fatalf("nodes outlived the runner: %v", pids)
			}
			rows := clitest.ReadRows(t, filepath.Join(dir, "out/test.csv"))
			if len(rows) != 0 {
				t.Fatalf("an interrupted point got a row: %+v", rows)
			}
			if !strings.Contains(r.Stderr(), "runner: error: interrupted by SIG") {
				t.Fatalf("stderr:\n%s", r.Stderr())
			}
		})
	}
}

func TestExecWithoutPlanRunsBuiltInLoopback(t *testing.T) {
	dir := t.TempDir()
	// Points keep plan order (8KiB before 4KiB), whatever order --only names.
	r := runner(t, dir, "exec", "--only", "block_size=4KiB,8KiB")
	if r.Code != 0 || !strings.Contains(r.Stderr, "running the built-in plans/loopback.yaml") {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	rows := clitest.ReadRows(t, filepath.Join(dir, "out/loopback.csv"))
	if len(rows) != 2 || rows[0].Plan != "loopback" || rows[0].Status != "ok" || *rows[0].Bytes != 8<<20 || *rows[1].Bytes != 4<<20 {
		t.Fatalf("rows: %+v", rows)
	}
}

func TestCPUsPinNode(t *testing.T) {
	dir := t.TempDir()
	plan := loopbackPlan(t, dir, "")
	text, _ := os.ReadFile(plan)
	text = bytes.Replace(text, []byte("  server: {address: local}"), []byte("  server: {address: local, cpus: \"0\"}"), 1)
	os.WriteFile(plan, text, 0o644)
	r := runner(t, dir, "exec", plan, "--only", "block_size=1MiB")
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "out/logs/*/*.server.log"))
	if len(logs) != 1 {
		t.Fatalf("logs: %v", logs)
	}
	head, _ := os.ReadFile(logs[0])
	if !strings.Contains(string(head), ": taskset -c 0 "+filepath.Join(binDir, "node")+" serve") {
		t.Fatalf("server not started under taskset:\n%s", head)
	}
	clientLogs, _ := filepath.Glob(filepath.Join(dir, "out/logs/*/*.client.log"))
	if c, _ := os.ReadFile(clientLogs[0]); strings.Contains(string(c), "taskset") {
		t.Fatalf("client pinned without cpus:\n%s", c)
	}
}
