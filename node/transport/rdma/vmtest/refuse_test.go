package vmtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/runner/files/csvfile"
	"rdmasweep/testbed/guest"
)

// SiwIP is the guest's address on eth2, the netdev of siw0 (init.sh).
const SiwIP = "10.0.4.15"

// runnerRefusesSiwUnderTCP is issue 19's first defect in the guest: a
// plan that reads over siw0, an iWARP device, with rdma.connect: tcp,
// which iWARP cannot do. runner check refused it, but exec ran the points
// and each failed with a row. exec must refuse it before any point, exit
// 2 with check's reason and the hint to use cm, and write no row.
func runnerRefusesSiwUnderTCP(t *testing.T, ctx context.Context, g *guest.Guest, runner, node string) {
	dir := t.TempDir()
	knownHosts := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(knownHosts, []byte(g.KnownHostsLine()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	host := fmt.Sprintf("{address: 127.0.0.1, port: %d, user: %s, identity_file: %q, data_address: %s}", g.SSHPort, g.User, g.KeyPath, SiwIP)
	plan := fmt.Sprintf(`name: vmtest-siw-tcp
hosts:
  server: %s
  client: %s
ssh: {known_hosts: %q, host_key_policy: strict, connect_timeout: 10s, keepalive_interval: 5s}
node: {binary: %q, remote_path: %s}
transport: rdma
rdma: {device: siw0, connect: tcp}
server: {file: /tmp/rdmasweep-siw.dat, file_size: 4MiB, create: true, cache: warm, registration: pinned}
client: {queue_depth: 4, total: 4MiB}
sweep:
  matrix:
    block_size: [4KiB, 64KiB]
timeouts: {ready: 1m, accept: 1m, point: 2m}
output: {csv: out/siw.csv, logs: out/logs}
`, host, host, knownHosts, node, remoteNode)
	planPath := filepath.Join(dir, "siw.yaml")
	if err := os.WriteFile(planPath, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "SSH_AUTH_SOCK=") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+t.TempDir())

	cmd := exec.CommandContext(ctx, runner, "exec", planPath)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("runner exec:\n%s", stderr.String())
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("runner exec of siw0 under connect: tcp: %v, want exit 2\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	for _, want := range []string{
		"runner: error: server (",
		"siw0 is an iWARP device, which connects only through rdma_cm: refusing to run 2 points on it",
		"runner: hint: set rdma.connect: cm",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	rows, err := csvfile.Read(filepath.Join(dir, "out/siw.csv"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if len(rows) != 0 {
		t.Errorf("the refused exec wrote %d rows: %+v", len(rows), rows)
	}
	if logs, _ := filepath.Glob(filepath.Join(dir, "out/logs/*/*")); len(logs) != 0 {
		t.Errorf("a refused exec started nodes: %v", logs)
	}
}
