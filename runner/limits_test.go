package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/testhosts"
)

// oneHostPlan has both roles on host h, sharing one SSH host: the case
// that failed at random on MaxSessions 2 and always on MaxSessions 1.
func oneHostPlan(t *testing.T, dir string, n *testhosts.Net, h *testhosts.Host) string {
	text := fmt.Sprintf(`name: one-host
hosts:
  server: {address: %[1]s, user: root, identity_file: %[2]s}
  client: {address: %[1]s, user: root, identity_file: %[2]s}
ssh: {known_hosts: %[3]s, host_key_policy: strict, connect_timeout: 5s}
node: {binary: %[4]s, remote_path: %[5]s/bin/node}
transport: tcp
server: {file: "%[5]s/data.dat", file_size: 4MiB, create: true, cache: warm}
client: {queue_depth: 4, verify: true}
timeouts: {ready: 30s, accept: 30s, point: 60s}
output: {csv: out/one.csv, logs: out/logs}
`, h.Addr, n.KeyFile, n.KnownHosts, filepath.Join(binDir, "node"), testhosts.DeployDir)
	path := filepath.Join(dir, "plan-"+h.Name+".yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestExecOnSessionLimitedHosts runs a point with both roles on one host
// whose sshd allows 1 or 2 sessions per connection (MaxSessions), and
// checks `runner check` names the limit on a host that allows none.
// RDMASWEEP_LIMIT_RUNS=N repeats each exec N times and reports the
// failures (the measurement for issue 12; CI runs each once).
func TestExecOnSessionLimitedHosts(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"one", "two", "none"},
		SSHDConfig: map[string]string{"one": "MaxSessions 1", "two": "MaxSessions 2", "none": "MaxSessions 0"}})
	dir, env := t.TempDir(), clitest.SSHEnv(t)
	runs := 1
	if v, err := strconv.Atoi(os.Getenv("RDMASWEEP_LIMIT_RUNS")); err == nil && v > 0 {
		runs = v
	}
	for _, name := range []string{"two", "one"} {
		plan := oneHostPlan(t, dir, n, n.Hosts[name])
		failed := 0
		for i := 0; i < runs; i++ {
			r := runnerEnv(t, dir, env, "exec", plan, "--rerun")
			if r.Code != 0 {
				failed++
				t.Logf("%s run %d: exit %d\n%s", name, i+1, r.Code, r.Stderr)
			}
		}
		t.Logf("MaxSessions on %s: %d of %d execs failed", name, failed, runs)
		if failed > 0 {
			t.Errorf("MaxSessions host %s: %d of %d execs with both roles on it failed", name, failed, runs)
		}
		if left := clitest.NodesOn(t, n.Hosts[name]); len(left) > 0 {
			t.Errorf("node left on %s: %v", name, left)
		}
	}
	r := runnerEnv(t, dir, env, "check", oneHostPlan(t, dir, n, n.Hosts["none"]))
	t.Logf("runner check on a MaxSessions 0 host:\n%s", r.Stderr)
	if r.Code != 1 || !strings.Contains(r.Stderr, "hint: ") || !strings.Contains(r.Stderr, "MaxSessions") ||
		strings.Contains(r.Stderr, "check the user's shell") {
		t.Errorf("runner check on a MaxSessions 0 host: exit %d\n%s\nwant a hint naming MaxSessions, not the shell", r.Code, r.Stderr)
	}
}
