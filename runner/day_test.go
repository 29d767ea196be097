package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"rdmasweep/runner/files/manifest"
	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/testhosts"
)

// A researcher's day, as the CLI sees it: check before, manifest during,
// summary and plot after, clean at the end.

func TestCheckLocalTCPPlan(t *testing.T) {
	dir := t.TempDir()
	plan := loopbackPlan(t, dir, "")
	// Probe files from elsewhere (a run killed before its cleanup) are
	// not this check's.
	before, _ := filepath.Glob("/tmp/rdmasweep-check-*.dat*")
	r := runner(t, dir, "check", plan)
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if strings.Contains(r.Stderr, "error:") {
		t.Errorf("errors on a plan that can run:\n%s", r.Stderr)
	}
	for _, role := range []string{"server", "client"} {
		row := clitest.TableRow(t, r.Stdout, role)
		if host := clitest.Column(t, r.Stdout, row, "HOST"); host != "local" {
			t.Errorf("%s host %q", role, host)
		}
		if dp := clitest.Column(t, r.Stdout, row, "DATA_PATH"); !strings.HasPrefix(dp, "ok 127.0.0.1") {
			t.Errorf("%s data path %q", role, dp)
		}
		if n := clitest.Column(t, r.Stdout, row, "NODE"); !strings.HasPrefix(n, "up to date") {
			t.Errorf("%s node %q", role, n)
		}
		// No RDMA device on a tcp plan is not a failure, whatever the machine has.
		if rd := clitest.Column(t, r.Stdout, row, "RDMA"); rd == "" {
			t.Errorf("%s has no RDMA cell", role)
		}
	}
	if f := clitest.Column(t, r.Stdout, clitest.TableRow(t, r.Stdout, "server"), "FILE"); !strings.HasPrefix(f, "will create 4MiB") {
		t.Errorf("server file cell %q", f)
	}
	// The probe cleans up after itself and the plan's file is not made.
	if _, err := os.Stat(filepath.Join(dir, "data file.dat")); err == nil {
		t.Error("check created the plan's data file")
	}
	left, _ := filepath.Glob("/tmp/rdmasweep-check-*.dat*")
	if left = slices.DeleteFunc(left, func(f string) bool { return slices.Contains(before, f) }); len(left) > 0 {
		t.Errorf("probe files left: %v", left)
	}
}

func TestExecWritesManifestAndSummaryAndPlotReadTheCSV(t *testing.T) {
	dir := t.TempDir()
	plan := loopbackPlan(t, dir, "repeat: 2\n")
	_, rows := execLoopback(t, dir, plan, 3*2)
	csv := filepath.Join(dir, "out/test.csv")

	// Every row's run_id names a manifest beside the CSV.
	m, err := manifest.Read(filepath.Join(dir, "out", rows[0].RunID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	planText, _ := os.ReadFile(plan)
	sum := sha256.Sum256(planText)
	if m.RunID != rows[0].RunID || m.Plan.SHA256 != hex.EncodeToString(sum[:]) || m.Plan.Text != string(planText) || m.Plan.Name != "test-loop" {
		t.Errorf("manifest plan: %+v", m.Plan)
	}
	nodeBin, _ := os.ReadFile(filepath.Join(binDir, "node"))
	nodeSum := sha256.Sum256(nodeBin)
	hostname, _ := os.Hostname()
	if len(m.Hosts) != 2 || m.Hosts[0].Role != "server" || m.Hosts[1].Role != "client" {
		t.Fatalf("manifest hosts: %+v", m.Hosts)
	}
	for _, h := range m.Hosts {
		if h.Name != rows[0].ServerHost || h.Hostname != hostname || h.Kernel == "" || h.Node.SHA256 != hex.EncodeToString(nodeSum[:]) || h.Node.Version == "" {
			t.Errorf("manifest host %s: %+v", h.Role, h)
		}
	}
	if f := m.Hosts[0].File; f == nil || f.Path != filepath.Join(dir, "data file.dat") || f.FSType == "" {
		t.Errorf("server file facts: %+v", f)
	}
	if m.Hosts[1].File != nil {
		t.Errorf("client has file facts: %+v", m.Hosts[1].File)
	}

	// summary: one line per point, with the spread of its 2 repeats.
	r := runner(t, dir, "summary", csv)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if r.Code != 0 || len(lines) != 4 {
		t.Fatalf("summary: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, l := range lines[1:] {
		if !strings.Contains(l, " 2 ") || !strings.Contains(l, "±") {
			t.Errorf("summary line without 2 runs and a spread: %q", l)
		}
	}

	// plot: one series (nothing but block size varies), three points.
	chart := filepath.Join(dir, "chart.png")
	r = runner(t, dir, "plot", csv, "-o", chart)
	if r.Code != 0 || !strings.Contains(r.Stderr, "1 series, 3 points") {
		t.Fatalf("plot: exit %d\n%s", r.Code, r.Stderr)
	}
	f, err := os.Open(chart)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Fatalf("chart does not decode: %v", err)
	}
	r = runner(t, dir, "plot", "--run", rows[0].RunID, "-o", filepath.Join(dir, "chart.svg"), csv)
	if svg, _ := os.ReadFile(filepath.Join(dir, "chart.svg")); r.Code != 0 || !strings.Contains(string(svg), "<svg") {
		t.Fatalf("plot --run to svg: exit %d\n%s", r.Code, r.Stderr)
	}
	if r = runner(t, dir, "plot", "--run", "nope", "-o", chart, csv); r.Code != 1 || !strings.Contains(r.Stderr, "runner: hint: ") {
		t.Errorf("plot of an unknown run: exit %d\n%s", r.Code, r.Stderr)
	}
	if r = runner(t, dir, "plot", csv, "-o", filepath.Join(dir, "chart.pdf")); r.Code != 2 {
		t.Errorf("plot to pdf: exit %d\n%s", r.Code, r.Stderr)
	}
}

func TestCleanRemovesOnlyWhatThePlanMade(t *testing.T) {
	dir := t.TempDir()
	plan := loopbackPlan(t, dir, "")
	if r := runner(t, dir, "exec", plan, "--only", "block_size=1MiB"); r.Code != 0 {
		t.Fatalf("exec: exit %d\n%s", r.Code, r.Stderr)
	}
	data := filepath.Join(dir, "data file.dat")
	state := filepath.Join(dir, "out/test.csv.state")
	// What a runner killed with SIGKILL leaves: a node it no longer runs.
	os.WriteFile(state, []byte(`[{"host":"local","pid":999999999,"pgid":999999999,"start_time":"1","boot_id":"x","exe":"/nope/node"}]`), 0o644)

	// Without --yes and without a terminal it lists, then refuses.
	r := runner(t, dir, "clean", plan)
	if r.Code != 1 || !strings.Contains(r.Stderr, "--yes") {
		t.Fatalf("clean without --yes: exit %d\n%s", r.Code, r.Stderr)
	}
	for _, want := range []string{data, data + ".rdmasweep", state} {
		if rel, _ := filepath.Rel(dir, want); !strings.Contains(r.Stdout, want) && !strings.Contains(r.Stdout, " "+rel+" ") {
			t.Errorf("list lacks %s:\n%s", want, r.Stdout)
		}
		if _, err := os.Stat(want); err != nil {
			t.Errorf("%s removed without confirmation", want)
		}
	}
	// The local node runs in place and is never listed.
	if strings.Contains(r.Stdout, "node binary") {
		t.Errorf("local node listed:\n%s", r.Stdout)
	}

	r = runner(t, dir, "clean", plan, "--yes")
	if r.Code != 0 || !strings.Contains(r.Stderr, "removed 3 files") {
		t.Fatalf("clean --yes: exit %d\n%s", r.Code, r.Stderr)
	}
	for _, gone := range []string{data, data + ".rdmasweep", state} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", gone, err)
		}
	}
	if _, err := os.Stat(filepath.Join(binDir, "node")); err != nil {
		t.Errorf("the local node binary went: %v", err)
	}

	// A data file without a sidecar is the user's own.
	os.WriteFile(data, []byte("precious"), 0o644)
	r = runner(t, dir, "clean", plan, "--yes")
	if r.Code != 0 || !strings.Contains(r.Stderr, "keeping") || !strings.Contains(r.Stderr, "nothing to clean") {
		t.Fatalf("clean of a user file: exit %d\n%s", r.Code, r.Stderr)
	}
	if b, err := os.ReadFile(data); err != nil || string(b) != "precious" {
		t.Fatalf("user file touched: %q %v", b, err)
	}
}

// A state file that names a node's pid with another process's group (a
// forged file, or a node that reported a wrong pgid): runner clean kills
// the node, which is still the very process recorded, and not the group.
func TestCleanSignalsNoGroupButTheNodesOwn(t *testing.T) {
	dir := t.TempDir()
	plan := loopbackPlan(t, dir, "")
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	sleep, _ = filepath.EvalSymlinks(sleep)
	start := func() *exec.Cmd {
		c := exec.Command(sleep, "300")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	node, bystander := start(), start()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", node.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(stat[strings.LastIndex(string(stat), ") ")+2:]))
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	state := filepath.Join(dir, "out/test.csv.state")
	os.MkdirAll(filepath.Dir(state), 0o755)
	os.WriteFile(state, fmt.Appendf(nil, `[{"host":"local","pid":%d,"pgid":%d,"start_time":%q,"boot_id":%q,"exe":%q}]`,
		node.Process.Pid, bystander.Process.Pid, f[19], strings.TrimSpace(string(boot)), sleep), 0o644)

	r := runner(t, dir, "clean", plan, "--yes")
	if r.Code != 0 {
		t.Fatalf("clean --yes: exit %d\n%s", r.Code, r.Stderr)
	}
	gone := func(c *exec.Cmd) bool {
		done := make(chan struct{})
		go func() { c.Process.Wait(); close(done) }()
		select {
		case <-done:
			return true
		case <-time.After(500 * time.Millisecond):
			return false
		}
	}
	if !gone(node) {
		t.Errorf("the leftover node was not killed:\n%s", r.Stderr)
	}
	if gone(bystander) {
		t.Errorf("the process group the state file named, not the node's own, was killed:\n%s", r.Stderr)
	}
	if !strings.Contains(r.Stderr, "killing the pid alone") {
		t.Errorf("no warning about the group:\n%s", r.Stderr)
	}
}

func TestCheckAndCleanOnSSHHosts(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}})
	dir, env := t.TempDir(), clitest.SSHEnv(t)
	plan := twoHostPlan(t, dir, n, "")
	a, b := n.Hosts["a"], n.Hosts["b"]

	r := runnerEnv(t, dir, env, "check", plan)
	if r.Code != 0 {
		t.Fatalf("check: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	for role, h := range map[string]*testhosts.Host{"server": a, "client": b} {
		row := clitest.TableRow(t, r.Stdout, role)
		if got := clitest.Column(t, r.Stdout, row, "HOST"); got != "root@"+h.Addr+":22" {
			t.Errorf("%s host %q", role, got)
		}
		if ssh := clitest.Column(t, r.Stdout, row, "SSH"); !strings.HasPrefix(ssh, "ok ") {
			t.Errorf("%s ssh %q", role, ssh)
		}
		if dp := clitest.Column(t, r.Stdout, row, "DATA_PATH"); !strings.HasPrefix(dp, "ok "+a.Addr+" ") {
			t.Errorf("%s data path %q", role, dp)
		}
		// The namespace hosts share this machine's clock: the true
		// offset, 0, lies within the interval shown, however wide a
		// loaded machine makes it.
		if c := clitest.Column(t, r.Stdout, row, "CLOCK"); !clockHolds(t, c, 0) || strings.HasPrefix(c, "WARN") {
			t.Errorf("%s clock %q, want an interval about 0 and no warning", role, c)
		}
	}
	if strings.Contains(r.Stderr, "): clock ") {
		t.Errorf("a clock warning for hosts on one clock:\n%s", r.Stderr)
	}

	// A host whose clock is 2 s ahead: check warns, naming the offset
	// and what it skews, and passes (the figures of one host are sound).
	fakeCommand(t, b, "/usr/bin/date", "#!/bin/sh\necho $(( $('{orig}' +%s%N) + 2000000000 ))\n")
	r = runnerEnv(t, dir, env, "check", plan)
	if r.Code != 0 {
		t.Fatalf("check with a clock 2 s ahead: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	c := clitest.Column(t, r.Stdout, clitest.TableRow(t, r.Stdout, "client"), "CLOCK")
	if !strings.HasPrefix(c, "WARN ") || !clockHolds(t, strings.TrimPrefix(c, "WARN "), 2*time.Second) {
		t.Errorf("client clock %q, want WARN and an interval about +2s", c)
	}
	if want := "runner: warning: client (root@" + b.Addr + ":22): clock +"; !strings.Contains(r.Stderr, want) || !strings.Contains(r.Stderr, "chrony") {
		t.Errorf("stderr lacks %q… with a hint to sync:\n%s", want, r.Stderr)
	}

	// exec warns the same, and its manifest records each host's clock.
	if r = runnerEnv(t, dir, env, "exec", plan); r.Code != 0 {
		t.Fatalf("exec: exit %d\n%s", r.Code, r.Stderr)
	}
	if want := "runner: warning: client (root@" + b.Addr + ":22): clock +"; strings.Count(r.Stderr, want) != 1 || strings.Contains(r.Stderr, "server (root@"+a.Addr+":22): clock") {
		t.Errorf("exec's stderr, want one clock warning, the client's:\n%s", r.Stderr)
	}
	rows := clitest.ReadRows(t, filepath.Join(dir, "out/hosts.csv"))
	m, err := manifest.Read(filepath.Join(dir, "out", rows[0].RunID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	// The true offsets are known, 0 and exactly 2 s: each lies within
	// the bound recorded (1 µs spare for rounding).
	for _, h := range m.Hosts {
		want := map[string]int64{"server": 0, "client": 2e9}[h.Role]
		if c := h.Clock; c == nil || c.UncertaintyNs <= 0 || c.OffsetNs-want > c.UncertaintyNs+1e3 || want-c.OffsetNs > c.UncertaintyNs+1e3 {
			t.Errorf("manifest: %s clock %+v, want %d ns within the bound", h.Role, h.Clock, want)
		}
	}

	// After an exec, clean removes the data file, its sidecar and node
	// from both hosts.
	r = runnerEnv(t, dir, env, "clean", plan, "--yes")
	if r.Code != 0 || !strings.Contains(r.Stderr, "removed 4 files") {
		t.Fatalf("clean: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if out := a.Run(t, "ls", "-A", testhosts.DeployDir, testhosts.DeployDir+"/bin dir"); strings.Contains(out, "data file") || strings.Contains(out, "node") {
		t.Errorf("left on the server host: %s", out)
	}
	if out := b.Run(t, "ls", "-A", testhosts.DeployDir+"/bin dir"); strings.Contains(out, "node") {
		t.Errorf("left on the client host: %s", out)
	}

	// An unreachable server fails the check, on the server's row.
	a.SetLink(t, false)
	r = runnerEnv(t, dir, env, "check", plan)
	if r.Code != 1 || clitest.Column(t, r.Stdout, clitest.TableRow(t, r.Stdout, "server"), "SSH") != "FAIL" || !strings.Contains(r.Stderr, "runner: hint: ") {
		t.Fatalf("unreachable server: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// clockHolds reports whether the true offset lies within the CLOCK
// column's interval, "+0.21ms ±0.35ms" or "+2.004s ±2ms" (1 µs spare for
// its rounding).
func clockHolds(t *testing.T, c string, truth time.Duration) bool {
	t.Helper()
	m := regexp.MustCompile(`^(?:WARN )?([+-][0-9.]+m?s) ±([0-9.]+m?s)$`).FindStringSubmatch(c)
	if m == nil {
		t.Errorf("clock %q is not an offset ± its uncertainty", c)
		return false
	}
	off, err1 := time.ParseDuration(m[1])
	unc, err2 := time.ParseDuration(m[2])
	if err1 != nil || err2 != nil {
		t.Errorf("clock %q: %v %v", c, err1, err2)
		return false
	}
	d := off - truth
	return max(d, -d) <= unc+time.Microsecond+unitSpare(m[1])+unitSpare(m[2])
}

// unitSpare is half the last digit a CLOCK figure shows.
func unitSpare(s string) time.Duration {
	digits := 0
	if i := strings.IndexByte(s, '.'); i >= 0 {
		digits = len(strings.TrimRight(s[i+1:], "ms"))
	}
	unit := time.Millisecond
	if !strings.HasSuffix(s, "ms") {
		unit = time.Second
	}
	for range digits {
		unit /= 10
	}
	return unit / 2
}
