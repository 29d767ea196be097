package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/files/manifest"
	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/testenv"
	"rdmasweep/testbed/testhosts"
)

// These tests drive real OpenSSH hosts in network namespaces: the runner
// on this machine, node serve on host "a", node read on host "b".

// twoHostPlan has its server on a and its client on b.
func twoHostPlan(t *testing.T, dir string, n *testhosts.Net, extra string) string {
	a, b := n.Hosts["a"], n.Hosts["b"]
	text := fmt.Sprintf(`name: two-hosts
hosts:
  server: {address: %s, user: root, identity_file: %s}
  client: {address: %s, user: root, identity_file: %s}
ssh: {known_hosts: %s, host_key_policy: strict, connect_timeout: 5s, keepalive_interval: 2s}
node: {binary: %s, remote_path: %s/bin dir/node}
transport: tcp
server: {file: "%s/data file.dat", file_size: 8MiB, create: true, cache: warm}
client: {queue_depth: 8, verify: true}
sweep:
  zip:
    block_size: [1MiB, 64KiB]
timeouts: {ready: 30s, accept: 30s, point: 60s}
output: {csv: out/hosts.csv, logs: out/logs}
%s`, a.Addr, n.KeyFile, b.Addr, n.KeyFile, n.KnownHosts, filepath.Join(binDir, "node"), testhosts.DeployDir, testhosts.DeployDir, extra)
	path := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestExecAcrossSSHHosts(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}})
	dir, env := t.TempDir(), clitest.SSHEnv(t)
	plan := twoHostPlan(t, dir, n, "")

	r := runnerEnv(t, dir, env, "exec", plan)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	// One upload per host, reported with its size.
	if c := strings.Count(r.Stderr, "deployed node to "+testhosts.DeployDir+"/bin dir/node"); c != 2 {
		t.Fatalf("want 2 uploads, saw %d:\n%s", c, r.Stderr)
	}
	rows := clitest.ReadRows(t, filepath.Join(dir, "out/hosts.csv"))
	if len(rows) != 2 {
		t.Fatalf("%d rows", len(rows))
	}
	a, b := n.Hosts["a"], n.Hosts["b"]
	for _, row := range rows {
		if row.Status != "ok" || *row.Bytes != 8<<20 || !*row.Verified || *row.BandwidthMBs <= 0 {
			t.Fatalf("row %+v", row)
		}
		if row.ServerHost != "root@"+a.Addr+":22" || row.ClientHost != "root@"+b.Addr+":22" {
			t.Fatalf("hosts in row: %q %q", row.ServerHost, row.ClientHost)
		}
	}
	// The data file was made on a, in a's private directory, not on b.
	if out := a.Run(t, "ls", testhosts.DeployDir); !strings.Contains(out, "data file.dat") {
		t.Fatalf("server host has: %s", out)
	}
	if out := b.Run(t, "ls", testhosts.DeployDir); strings.Contains(out, "data file.dat") {
		t.Fatalf("client host has the data file: %s", out)
	}
	for _, h := range []*testhosts.Host{a, b} {
		if left := clitest.NodesOn(t, h); len(left) > 0 {
			t.Fatalf("node left on %s: %v", h.Name, left)
		}
	}

	// The next exec finds node in place.
	r = runnerEnv(t, dir, env, "exec", plan, "--rerun")
	if r.Code != 0 || strings.Count(r.Stderr, "is up to date") != 2 || strings.Contains(r.Stderr, "deployed") {
		t.Fatalf("second exec: %d\n%s", r.Code, r.Stderr)
	}
}

func TestBothRolesOnOneHostShareConnectionAndUpload(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}})
	dir, env := t.TempDir(), clitest.SSHEnv(t)
	a := n.Hosts["a"]
	plan := twoHostPlan(t, dir, n, "")
	text, _ := os.ReadFile(plan)
	os.WriteFile(plan, bytes.Replace(text, []byte("address: "+n.Hosts["b"].Addr), []byte("address: "+a.Addr), 1), 0o644)
	r := runnerEnv(t, dir, env, "exec", plan)
	if r.Code != 0 || strings.Count(r.Stderr, "deployed node") != 1 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
}

func TestInterruptedSweepLeavesNoNodeOnHosts(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}})
	dir, env := t.TempDir(), clitest.SSHEnv(t)
	plan := twoHostPlan(t, dir, n, "")
	a, b := n.Hosts["a"], n.Hosts["b"]
	r := startRunner(t, dir, env, "exec", plan, "--set", "duration=30s", "--set", "total=0")
	r.WaitNodes(t, a, b)
	r.Signal(syscall.SIGINT)
	start := time.Now()
	if code := r.Wait(t, time.Minute); code != 130 {
		t.Fatalf("exit %d\n%s", code, r.Stderr())
	}
	// Both remote nodes are gone within 5 s of the signal.
	if left := clitest.WaitNoNodes(t, 5*time.Second-time.Since(start), a, b); len(left) > 0 {
		t.Fatalf("node outlived the runner: %v", left)
	}
	if rows := clitest.ReadRows(t, filepath.Join(dir, "out/hosts.csv")); len(rows) != 0 {
		t.Fatalf("interrupted point got a row")
	}
}

// TestSignalDuringConnect: SIGINT or SIGTERM while exec is still
// connecting ends it with 128+signal, saying it was interrupted, at once
// and with no node on either host and no row. Host a's sshd is stopped
// (SIGSTOP): the kernel completes the TCP handshake for it, and the SSH
// handshake is never answered, as with a host that hangs.
func TestSignalDuringConnect(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}})
	dir, env := t.TempDir(), clitest.SSHEnv(t)
	plan := twoHostPlan(t, dir, n, "")
	a, b := n.Hosts["a"], n.Hosts["b"]
	if err := syscall.Kill(a.SSHDPid, syscall.SIGSTOP); err != nil {
		t.Fatalf("stop a's sshd: %v", err)
	}
	t.Cleanup(func() { syscall.Kill(a.SSHDPid, syscall.SIGCONT) })
	for _, c := range []struct {
		sig  syscall.Signal
		code int
		says string
	}{
		{syscall.SIGINT, 130, "interrupted by SIGINT"},
		{syscall.SIGTERM, 143, "interrupted by SIGTERM"},
	} {
		t.Run(c.says[len("interrupted by "):], func(t *testing.T) {
			r := startRunner(t, dir, env, "exec", plan, "--set", "ssh.connect_timeout=2m")
			r.Until(t, "a connection to a's stopped sshd", time.Minute, func() bool { return sshConnections(t, a) > 0 })
			r.Signal(c.sig)
			start := time.Now()
			if code := r.Wait(t, 30*time.Second); code != c.code || !strings.Contains(r.Stderr(), c.says) {
				t.Fatalf("exit %d, want %d and %q on stderr:\n%s", code, c.code, c.says, r.Stderr())
			}
			t.Logf("%s during connect: exit %d after %v", c.says, c.code, time.Since(start).Round(time.Millisecond))
			if left := clitest.WaitNoNodes(t, 5*time.Second, a, b); len(left) > 0 {
				t.Fatalf("node left after a signal during connect: %v", left)
			}
			if _, err := os.Stat(filepath.Join(dir, "out/hosts.csv")); err == nil {
				if rows := clitest.ReadRows(t, filepath.Join(dir, "out/hosts.csv")); len(rows) != 0 {
					t.Fatalf("an exec interrupted while connecting wrote %d rows", len(rows))
				}
			}
		})
	}
}

// sshConnections counts the established TCP connections to h's port 22.
func sshConnections(t *testing.T, h *testhosts.Host) int {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", h.NS, "ss", "-Htn", "state", "established", "( sport = :22 )").Output()
	if err != nil {
		t.Fatalf("ss in %s: %v", h.Name, err)
	}
	return strings.Count(string(out), "\n")
}

// A host where no shell runs fails at once, before node is uploaded there,
// with one line that says so, in exec and in check alike.
func TestHostWithoutAWorkingShell(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}})
	dir, env := t.TempDir(), clitest.SSHEnv(t)
	plan := twoHostPlan(t, dir, n, "")
	a := n.Hosts["a"]
	const says = ": cannot collect facts: no working /bin/sh on the host (exit %d) — the node needs a POSIX shell to be started"
	for _, tc := range []struct {
		name, user string
		breakSh    bool
		status     int
		hostSaid   string
	}{
		{"login_shell_missing", n.NoShellUser, false, 127, testhosts.MissingShell + ": not found"},
		{"bin_sh_broken", "root", true, 126, "/bin/sh: Permission denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.breakSh {
				a.BreakSh(t)
			}
			set := []string{"--set", "hosts.server.user=" + tc.user}
			r := runnerEnv(t, dir, env, append([]string{"exec", plan}, set...)...)
			want := fmt.Sprintf("runner: error: server (%s@%s:22)"+says, tc.user, a.Addr, tc.status)
			if r.Code != 1 || !strings.Contains(r.Stderr, "\n"+want+"\nrunner: hint: the host said ") || !strings.Contains(r.Stderr, tc.hostSaid) {
				t.Fatalf("exec: exit %d, want 1 and the line\n%s\nstderr:\n%s", r.Code, want, r.Stderr)
			}
			if _, err := a.Output("test", "-e", testhosts.DeployDir+"/bin dir/node"); err == nil {
				t.Errorf("node was uploaded to a host where it cannot start")
			}

			r = runnerEnv(t, dir, env, append([]string{"check", plan}, set...)...)
			want = fmt.Sprintf("runner: error: server (%s)"+says, a.Addr, tc.status)
			if r.Code != 1 || !strings.Contains(r.Stderr, want+"\n") || !slices.Contains(clitest.TableRow(t, r.Stdout, "server"), "FAIL") {
				t.Fatalf("check: exit %d, want 1 and the line\n%s\nstdout:\n%s\nstderr:\n%s", r.Code, want, r.Stdout, r.Stderr)
			}
		})
	}
}

// runCPUInLog is node run's cpu line in the log of row's role.
func runCPUInLog(t *testing.T, logDir string, row results.Row, roleName string) results.RunCPU {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(logDir, fmt.Sprintf("*-%s-r%d.%s.log", row.PointKey, row.Repetition, roleName)))
	if len(logs) != 1 {
		t.Fatalf("logs of %s's %s: %v", row.PointKey, roleName, logs)
	}
	b, _ := os.ReadFile(logs[0])
	if !strings.Contains(string(b), "/node run --deadline ") {
		t.Errorf("%s: iperf3 did not run under node run:\n%s", logs[0], b)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if _, c, ok, err := results.CutRunCPU([]byte(l)); ok && err == nil {
			return c
		}
	}
	t.Fatalf("%s holds no cpu line of node run:\n%s", logs[0], b)
	return results.RunCPU{}
}

// TestNodeBesideIperf3AcrossSSHHosts is issue 14's check on namespace
// hosts: a plan with workload [node, iperf3] gives interleaved ok rows in
// one CSV, iperf3's server started on a and awaited with ss -ltn there,
// its client on b; exec prints each node point's ratio to iperf3's, and
// no iperf3 or node is left on either host.
func TestNodeBesideIperf3AcrossSSHHosts(t *testing.T) {
	testenv.NeedTool(t, "iperf3", "iperf3")
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}})
	dir, env := t.TempDir(), clitest.SSHEnv(t)
	plan := twoHostPlan(t, dir, n, "")
	text, _ := os.ReadFile(plan)
	text = bytes.Replace(text, []byte("client: {queue_depth: 8, verify: true}"), []byte("client: {queue_depth: 8, total: 256MiB}"), 1)
	text = bytes.Replace(text, []byte("sweep:\n"), []byte("sweep:\n  matrix: {workload: [node, iperf3]}\n"), 1)
	os.WriteFile(plan, text, 0o644)

	r := runnerEnv(t, dir, env, "exec", plan)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	rows := clitest.ReadRows(t, filepath.Join(dir, "out/hosts.csv"))
	var order []string
	a, b := n.Hosts["a"], n.Hosts["b"]
	for _, row := range rows {
		order = append(order, fmt.Sprintf("%s/%d", row.Workload(), row.ParamInt("block_size")))
		if row.Status != "ok" || *row.BandwidthMBs <= 0 || row.CPUClient == nil || row.CPUServer == nil ||
			row.ServerHost != "root@"+a.Addr+":22" || row.ClientHost != "root@"+b.Addr+":22" {
			t.Errorf("row %+v", row)
		}
	}
	if want := fmt.Sprint([]string{"node/1048576", "iperf3/1048576", "node/65536", "iperf3/65536"}); fmt.Sprint(order) != want {
		t.Fatalf("rows %v, want interleaved %s", order, want)
	}
	// iperf3's CPU cells are node run's figures of iperf3's own
	// processes on each host, as its roles' logs show them; iperf3's
	// own figures are in the counters sidecar.
	lines, err := manifest.ReadCounters(manifest.CountersPathFor(filepath.Join(dir, "out/hosts.csv"), rows[0].RunID))
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if row.Workload() != "iperf3" {
			continue
		}
		for roleName, cell := range map[string]*float64{"client": row.CPUClient, "server": row.CPUServer} {
			want := runCPUInLog(t, filepath.Join(dir, "out/logs", row.RunID), row, roleName)
			t.Logf("iperf3 %d: cpu_%s %.3f = node run's %+v", row.ParamInt("block_size"), roleName, *cell, want)
			if *cell != *want.PerSecond() {
				t.Errorf("iperf3 %d: cpu_%s %v, want node run's %v", row.ParamInt("block_size"), roleName, *cell, *want.PerSecond())
			}
		}
		i := slices.IndexFunc(lines, func(l manifest.CounterLine) bool {
			return l.PointKey == row.PointKey && l.Role == "client" && l.Reported["host_total"] > 0 && l.Reported["remote_total"] > 0
		})
		if i < 0 {
			t.Errorf("iperf3 %d: no sidecar line with its own host_total and remote_total", row.ParamInt("block_size"))
		}
	}
	if !strings.Contains(r.Stdout, "IPERF3_MB/S") || !strings.Contains(r.Stdout, "node / iperf3: median ratio") {
		t.Fatalf("no ratios in the summary:\n%s", r.Stdout)
	}
	t.Logf("summary:\n%s", r.Stdout)
	for _, h := range []*testhosts.Host{a, b} {
		for _, pid := range h.SessionPids(t) {
			if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && (strings.HasSuffix(exe, "/iperf3") || strings.HasSuffix(exe, "/node")) {
				t.Errorf("left on %s: %d %s", h.Name, pid, exe)
			}
		}
	}
	// runner summary gives the same table from the CSV.
	r = runnerEnv(t, dir, env, "summary", "--baseline", "workload=iperf3", filepath.Join(dir, "out/hosts.csv"))
	if r.Code != 0 || !strings.Contains(r.Stdout, "node / iperf3: median ratio") {
		t.Fatalf("summary --baseline: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}
