package vmtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"rdmasweep/results"
)

// buildRunner builds the runner into out. node must never import the
// runner, so the sweep drives it as a user would: as a program.
func buildRunner(ctx context.Context, out string) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./runner")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./runner: %w\n%s", err, b)
	}
	return nil
}

// remoteNode is where the sweep deploys node in the guest.
const remoteNode = "/var/tmp/rdmasweep/node"

// sweepPoints are the sweep's block sizes and the bytes each reads: 1024
// reads at 4KiB and 64KiB; at 1MiB, 1024 reads would take most of a
// minute under TCG, so that point makes 128 (the runner warns).
var sweepPoints = []struct {
	block, total string
	bs, bytes    int64
}{
	{"4KiB", "4MiB", 4 << 10, 4 << 20},
	{"64KiB", "64MiB", 64 << 10, 64 << 20},
	{"1MiB", "128MiB", 1 << 20, 128 << 20},
}

// runnerSweep runs `runner exec` on a plan whose server and client are both
// the guest, reached over SSH through qemu's hostfwd with strict host key
// checking, as they would be real hosts: deploy over SFTP, node serve and
// node read over rxe0, one CSV row per point. c is an SSH connection to the
// guest, used only to look for leftover node processes.
func runnerSweep(t *testing.T, ctx context.Context, g *Guest, c *ssh.Client, runner, node string) {
	dir := t.TempDir()
	knownHosts := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(knownHosts, []byte(g.KnownHostsLine()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var blocks, totals []string
	for _, p := range sweepPoints {
		blocks, totals = append(blocks, p.block), append(totals, p.total)
	}
	host := fmt.Sprintf("{address: 127.0.0.1, port: %d, user: %s, identity_file: %q, data_address: %s}", g.SSHPort, g.User, g.KeyPath, GuestIP)
	plan := fmt.Sprintf(`name: vmtest-rxe
description: block-size sweep over soft-RoCE in the vmtest guest, driven over SSH
hosts:
  server: %s
  client: %s
ssh: {known_hosts: %q, host_key_policy: strict, connect_timeout: 10s, keepalive_interval: 5s}
node: {binary: %q, remote_path: %s}
transport: rdma
server: {file: /tmp/rdmasweep-vmtest.dat, file_size: 16MiB, create: true, cache: warm, registration: pinned}
client: {queue_depth: 16, qps: 1, pattern: sequential, verify: true}
sweep:
  zip:
    block_size: [%s]
    total: [%s]
timeouts: {ready: 1m, accept: 1m, point: 3m}
output: {csv: out/rxe.csv, logs: out/logs}
`, host, host, knownHosts, node, remoteNode, strings.Join(blocks, ", "), strings.Join(totals, ", "))
	planPath := filepath.Join(dir, "rxe.yaml")
	if err := os.WriteFile(planPath, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}

	// A HOME of its own, so whoever runs the test lends it no ssh_config,
	// known_hosts or agent: the plan alone must be enough.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "SSH_AUTH_SOCK=") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+t.TempDir())

	// Preflight first, as a user would: it deploys node, reads rxe0's port
	// and limits, and proves the path with one 4 KiB RDMA READ.
	check := exec.CommandContext(ctx, runner, "check", planPath)
	check.Dir, check.Env = dir, env
	var checkOut, checkErr bytes.Buffer
	check.Stdout, check.Stderr = &checkOut, &checkErr
	if err := check.Run(); err != nil {
		t.Fatalf("runner check: %v\nstdout:\n%s\nstderr:\n%s", err, checkOut.String(), checkErr.String())
	}
	t.Logf("runner check:\n%s", checkOut.String())
	table := strings.Split(strings.TrimSpace(checkOut.String()), "\n")
	if len(table) != 3 || !strings.Contains(table[0], "RDMA_PROBE") {
		t.Fatalf("check table:\n%s", checkOut.String())
	}
	for _, row := range table[1:] {
		for _, want := range []string{"rxe0", "ACTIVE", "128/128", "ok " + GuestIP} {
			if !strings.Contains(row, want) {
				t.Errorf("check row lacks %q: %s", want, row)
			}
		}
	}
	if !strings.Contains(table[1], "4KiB in") || strings.Count(checkOut.String(), "ok "+GuestIP) != 4 {
		t.Errorf("want the tcp data path and the rdma probe ok on both rows:\n%s", checkOut.String())
	}

	cmd := exec.CommandContext(ctx, runner, "exec", planPath)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	logs, _ := filepath.Glob(filepath.Join(dir, "out/logs/*/*"))
	if err != nil {
		var tails strings.Builder
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			fmt.Fprintf(&tails, "--- %s\n%s\n", l, lastLines(string(b), 15))
		}
		t.Fatalf("runner exec: %v\nstderr:\n%s\nnode logs:\n%s", err, stderr.String(), tails.String())
	}
	// check deployed node; exec finds it in place, once for both roles.
	if n := strings.Count(checkErr.String(), "deployed node to "+remoteNode); n != 1 {
		t.Errorf("runner check deployed node %d times, want once (both roles share the guest):\n%s", n, checkErr.String())
	}
	if n := strings.Count(stderr.String(), "node at "+remoteNode+" is up to date"); n != 1 {
		t.Errorf("runner exec: want node up to date once:\n%s", stderr.String())
	}

	rows, err := results.ReadCSV(filepath.Join(dir, "out/rxe.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(sweepPoints) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(sweepPoints), stderr.String())
	}
	for i, r := range rows {
		p := sweepPoints[i]
		t.Logf("row %d: %s %s, %d B blocks, %s, %.1f MB/s, p50 %.0f µs, registration %s s (%s MB/s)", i+1, r.Status, r.Transport(),
			r.ParamInt("block_size"), r.Param("registration"), deref(r.BandwidthMBs), deref(r.LatP50Us), fmtPtr(r.RegistrationS), fmtPtr(r.RegistrationMBs))
		if r.Status != results.StatusOK || r.Error != "" {
			t.Errorf("row %d: status %q, error %q", i+1, r.Status, r.Error)
			continue
		}
		if r.Transport() != "rdma" || r.Param("registration") != "pinned" || r.ParamInt("block_size") != p.bs || r.ParamInt("total") != p.bytes {
			t.Errorf("row %d: transport %q, registration %q, block %d, total %d; want rdma, pinned, %d, %d",
				i+1, r.Transport(), r.Param("registration"), r.ParamInt("block_size"), r.ParamInt("total"), p.bs, p.bytes)
		}
		if r.RegistrationS == nil || *r.RegistrationS <= 0 || r.RegistrationMBs == nil || *r.RegistrationMBs <= 0 {
			t.Errorf("row %d: registration_s %s, registration_mb_s %s; want both measured", i+1, fmtPtr(r.RegistrationS), fmtPtr(r.RegistrationMBs))
		}
		if r.Bytes == nil || *r.Bytes != p.bytes || r.Verified == nil || !*r.Verified || r.BandwidthMBs == nil || *r.BandwidthMBs <= 0 {
			t.Errorf("row %d: bytes %v, verified %v, bandwidth %v; want %d bytes, verified, bandwidth > 0", i+1, r.Bytes, r.Verified, r.BandwidthMBs, p.bytes)
		}
		if r.ServerHost != r.ClientHost || !strings.Contains(r.ServerHost, fmt.Sprint(g.SSHPort)) {
			t.Errorf("row %d: hosts %q and %q, want the guest's forwarded port %d for both", i+1, r.ServerHost, r.ClientHost, g.SSHPort)
		}
	}

	peerSweep(t, ctx, dir, env, host, knownHosts, runner, node)

	// Every node and peer the runner started in the guest is gone.
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	out, err := sess.Output("ls -l /proc/[0-9]*/exe 2>/dev/null; echo END")
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "END") {
		t.Fatalf("list the guest's processes: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "/usr/sbin/sshd") {
		t.Fatalf("the guest's process list shows no sshd, so it cannot show a node either:\n%s", out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, remoteNode) || strings.Contains(l, "/ib_read_bw") || strings.Contains(l, "/fio") {
			t.Errorf("left running in the guest: %s", l)
		}
	}
}

// peerSweep is issue 14's check in the guest: one plan with workload
// [node, ib_read_bw, fio] gives interleaved ok rows in one CSV, ib_read_bw
// over the same rxe0 at the same depth (its report file read back over
// SSH), fio on the server's own file; exec prints node's ratio to
// ib_read_bw.
func peerSweep(t *testing.T, ctx context.Context, dir string, env []string, host, knownHosts, runner, node string) {
	plan := fmt.Sprintf(`name: vmtest-peers
hosts:
  server: %s
  client: %s
ssh: {known_hosts: %q, host_key_policy: strict, connect_timeout: 10s, keepalive_interval: 5s}
node: {binary: %q, remote_path: %s}
transport: rdma
rdma: {device: rxe0, gid_index: 1}
server: {file: /tmp/rdmasweep-peers.dat, file_size: 16MiB, create: true, cache: warm, registration: pinned}
client: {queue_depth: 16, qps: 1}
sweep:
  zip:
    block_size: [64KiB, 1MiB]
    total: [32MiB, 32MiB]
  matrix:
    workload: [node, ib_read_bw, fio]
timeouts: {ready: 1m, accept: 1m, point: 3m}
output: {csv: out/peers.csv, logs: out/logs}
`, host, host, knownHosts, node, remoteNode)
	planPath := filepath.Join(dir, "peers.yaml")
	if err := os.WriteFile(planPath, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, runner, "exec", planPath)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("runner exec of the peer plan: %v\nstderr:\n%s", err, stderr.String())
	}
	t.Logf("peer sweep took %s:\n%s", time.Since(start).Round(100*time.Millisecond), stdout.String())
	rows, err := results.ReadCSV(filepath.Join(dir, "out/peers.csv"))
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, r := range rows {
		order = append(order, fmt.Sprintf("%s/%d", r.Workload(), r.ParamInt("block_size")))
		if r.Status != results.StatusOK || r.Bytes == nil || *r.Bytes != 32<<20 || r.BandwidthMBs == nil || *r.BandwidthMBs <= 0 {
			t.Errorf("%s row: status %q error %q bytes %v", r.Workload(), r.Status, r.Error, r.Bytes)
			continue
		}
		switch r.Workload() {
		case "ib_read_bw":
			if r.IOPS == nil || r.LatP99Us != nil || r.Verified != nil {
				t.Errorf("ib_read_bw row: iops %v, latency %v, verified %v", r.IOPS, r.LatP99Us, r.Verified)
			}
		case "fio":
			if r.LatP99Us == nil || r.CPUClient == nil || r.ClientHost != r.ServerHost {
				t.Errorf("fio row: latency %v, cpu %v, hosts %q %q", r.LatP99Us, r.CPUClient, r.ServerHost, r.ClientHost)
			}
		case "node":
			if r.CPUClient == nil || r.CPUServer == nil {
				t.Errorf("node row: cpu %v %v", r.CPUClient, r.CPUServer)
			}
		}
	}
	want := "[node/65536 ib_read_bw/65536 fio/65536 node/1048576 ib_read_bw/1048576 fio/1048576]"
	if fmt.Sprint(order) != want {
		t.Errorf("rows %v, want %s", order, want)
	}
	if !strings.Contains(stdout.String(), "IB_READ_BW_MB/S") || !strings.Contains(stdout.String(), "node / ib_read_bw: median ratio") {
		t.Errorf("exec printed no ratios to ib_read_bw:\n%s", stdout.String())
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func fmtPtr(p *float64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprintf("%.4g", *p)
}
