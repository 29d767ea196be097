package vmtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/files/csvfile"
	"rdmasweep/runner/files/manifest"
	"rdmasweep/testbed/guest"
	"rdmasweep/testbed/testenv"
	"rdmasweep/testbed/testhosts"
)

// needArm64 skips (or fails under CI) unless the host can also cross-build
// the arm64 rdma node and emulate an arm64 machine.
func needArm64(t *testing.T) {
	t.Helper()
	needHost(t)
	testenv.NeedTool(t, "qemu-system-aarch64", "qemu-system-arm")
	testenv.NeedTool(t, "aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu")
	for _, lib := range []string{"libibverbs.a", "librdmacm.a", "libnl-3.a", "libnl-route-3.a"} {
		if _, err := os.Stat("/usr/lib/aarch64-linux-gnu/" + lib); err != nil {
			testenv.Skip(t, "no arm64 "+lib+" (dpkg --add-architecture arm64; apt-get update; apt-get install libibverbs-dev:arm64 librdmacm-dev:arm64 libnl-3-dev:arm64 libnl-route-3-dev:arm64)")
		}
	}
}

// TestArm64Guest boots Debian 12's arm64 kernel and user space under
// qemu-system-aarch64 with soft-RoCE (rxe0) and sshd, one vCPU, and has
// the runner drive it with a build of two nodes, as make build leaves
// them: node (x86-64, this machine's) with node-linux-arm64 beside it.
//   - An rdma plan with both roles in the guest: the runner gives the
//     guest the arm64 node, and every row is ok and verified.
//   - A tcp plan with a mixed-arch pair: the server on an x86-64
//     namespace host, the client in the arm64 guest, which reaches the
//     server's address through qemu's user-mode network. The rows are ok,
//     and the manifest records which node (file, architecture, sha256)
//     went to which host.
func TestArm64Guest(t *testing.T) {
	needArm64(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	start := time.Now()
	build := t.TempDir()
	node, arm64Node := filepath.Join(build, "node"), filepath.Join(build, "node-linux-arm64")
	runner := filepath.Join(t.TempDir(), "runner")
	var im *guest.Image
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i, f := range []func() error{
		func() (err error) { im, err = guest.EnsureImage(ctx, guest.BookwormArm64, testLog{t}); return err },
		func() error { return buildRunner(ctx, runner) },
		func() error { return guest.BuildNode(ctx, node) },
		func() error { return guest.BuildNodeFor(ctx, arm64Node, "arm64") },
	} {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f() }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("arm64 image (%s) and the binaries ready after %s", im.Release, time.Since(start).Round(time.Second))

	var console consoleLog
	bootStart := time.Now()
	g, err := guest.Boot(ctx, guest.Options{Kernel: guest.BookwormArm64, OneNIC: true, CPUs: 1, MemoryMB: 1024, Console: &console, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	t.Logf("arm64 guest %s: sshd up %s after qemu started", g.Image.Release, time.Since(bootStart).Round(100*time.Millisecond))
	if !strings.Contains(console.String(), "VMTEST KERNEL "+g.Image.Release) || !strings.HasSuffix(g.Image.Release, "-arm64") {
		t.Fatalf("the guest did not say it runs %s:\n%s", g.Image.Release, console.String())
	}

	dir := t.TempDir()
	knownHosts := filepath.Join(dir, "known_hosts")
	guestHost := fmt.Sprintf("{address: 127.0.0.1, port: %d, user: %s, identity_file: %q, data_address: %s}", g.SSHPort, g.User, g.KeyPath, guest.GuestIP)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "SSH_AUTH_SOCK=") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+t.TempDir())
	// run writes the plan and runs `runner CMD` on it, which must succeed.
	run := func(t *testing.T, cmd, name, plan string) (string, string) {
		t.Helper()
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(plan), 0o644); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		stdout, stderr, err := runRunner(ctx, runner, dir, env, cmd, path)
		if err != nil {
			t.Fatalf("runner %s %s: %v\nstdout:\n%s\nstderr:\n%s\nconsole:\n%s", cmd, name, err, stdout, stderr, lastLines(console.String(), 20))
		}
		t.Logf("runner %s %s took %s:\n%s", cmd, name, time.Since(start).Round(100*time.Millisecond), stdout)
		return stdout, stderr
	}
	// checkTable holds runner check's table to a row per role, each with
	// node up to date (the host's node is the build's file for its
	// architecture, by sha256) and the data path, and the RDMA probe when
	// rdma is true, ok.
	checkTable := func(t *testing.T, stdout string, rdma bool) {
		t.Helper()
		table := strings.Split(strings.TrimSpace(stdout), "\n")
		if len(table) != 3 {
			t.Fatalf("check table:\n%s", stdout)
		}
		for _, row := range table[1:] {
			want := []string{"up to date vmtest", " ok "}
			if rdma {
				want = append(want, "rxe0", "ACTIVE", "4KiB in")
			}
			for _, w := range want {
				if !strings.Contains(row, w) {
					t.Errorf("check row lacks %q: %s", w, row)
				}
			}
		}
	}

	t.Run("RDMA", func(t *testing.T) {
		if err := os.WriteFile(knownHosts, []byte(g.KnownHostsLine()+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		plan := fmt.Sprintf(`name: arm64-rxe
hosts:
  server: %s
  client: %s
ssh: {known_hosts: %q, host_key_policy: strict, connect_timeout: 10s, keepalive_interval: 5s}
node: {binary: %q, remote_path: %s}
transport: rdma
server: {file: /tmp/rdmasweep-arm64.dat, file_size: 8MiB, create: true, cache: warm, registration: pinned}
client: {queue_depth: 8, qps: 1, pattern: sequential, verify: true}
sweep:
  zip:
    block_size: [4KiB, 1MiB]
    total: [2MiB, 16MiB]
timeouts: {ready: 2m, accept: 1m, point: 4m}
output: {csv: out/arm64-rxe.csv, logs: out/logs}
`, guestHost, guestHost, knownHosts, node, remoteNode)
		_, stderr := run(t, "exec", "arm64-rxe", plan)
		if want := "deployed node to " + remoteNode + "-linux-arm64"; strings.Count(stderr, want) != 1 {
			t.Errorf("want the arm64 node deployed once to %s-linux-arm64:\n%s", remoteNode, stderr)
		}
		if strings.Contains(stderr, "built without") {
			t.Errorf("the runner judged the arm64 rdma node to lack rdma:\n%s", stderr)
		}
		rows, err := csvfile.Read(filepath.Join(dir, "out/arm64-rxe.csv"))
		if err != nil || len(rows) != 2 {
			t.Fatalf("%d rows, %v", len(rows), err)
		}
		for i, r := range rows {
			t.Logf("row %d: %s %s, %d B blocks, %.1f MB/s, p50 %.0f µs, verified %v", i+1, r.Status, r.Transport(),
				r.ParamInt("block_size"), deref(r.BandwidthMBs), deref(r.LatP50Us), r.Verified != nil && *r.Verified)
			if r.Status != results.StatusOK || r.Transport() != "rdma" || r.Verified == nil || !*r.Verified || r.Bytes == nil || *r.Bytes != r.ParamInt("total") {
				t.Errorf("row %d: status %q error %q transport %q verified %v bytes %v", i+1, r.Status, r.Error, r.Transport(), r.Verified, r.Bytes)
			}
		}
		m := onlyManifest(t, filepath.Join(dir, "out"), rows[0].RunID)
		// One host a role, both the guest: a manifest with none would
		// check no node at all.
		if len(m.Hosts) != 2 {
			t.Fatalf("manifest hosts: %+v; want the server's and the client's", m.Hosts)
		}
		for _, h := range m.Hosts {
			checkNode(t, h, "aarch64", arm64Node, remoteNode+"-linux-arm64")
		}
		stdout, _ := run(t, "check", "arm64-rxe", plan)
		checkTable(t, stdout, true)
	})

	t.Run("MixedArch", func(t *testing.T) {
		n := testhosts.Start(t, testhosts.Options{Hosts: []string{"x86"}})
		a := n.Hosts["x86"]
		kh, err := os.ReadFile(n.KnownHosts)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(knownHosts, append(kh, []byte(g.KnownHostsLine()+"\n")...), 0o600); err != nil {
			t.Fatal(err)
		}
		// The guest's client reaches the namespace host's address through
		// qemu's user-mode network, which connects from this machine.
		plan := fmt.Sprintf(`name: arm64-mixed
hosts:
  server: {address: %s, user: root, identity_file: %q}
  client: %s
ssh: {known_hosts: %q, host_key_policy: strict, connect_timeout: 10s, keepalive_interval: 5s}
node: {binary: %q, remote_path: %s}
transport: tcp
server: {file: %s/mixed.dat, file_size: 8MiB, create: true, cache: warm}
client: {queue_depth: 4, verify: true}
sweep:
  zip:
    block_size: [64KiB, 1MiB]
    total: [8MiB, 8MiB]
timeouts: {ready: 2m, accept: 1m, point: 4m}
output: {csv: out/arm64-mixed.csv, logs: out/logs}
`, a.Addr, n.KeyFile, strings.Replace(guestHost, ", data_address: "+guest.GuestIP, "", 1), knownHosts, node, remoteNode, testhosts.DeployDir)
		_, stderr := run(t, "exec", "arm64-mixed", plan)
		// The guest still has its node from the rdma plan, at the same path.
		for _, want := range []string{"server (root@" + a.Addr + ":22): deployed node to " + remoteNode + " ",
			"client (root@127.0.0.1:" + fmt.Sprint(g.SSHPort) + "): node at " + remoteNode + "-linux-arm64 is up to date"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
		}
		rows, err := csvfile.Read(filepath.Join(dir, "out/arm64-mixed.csv"))
		if err != nil || len(rows) != 2 {
			t.Fatalf("%d rows, %v", len(rows), err)
		}
		for i, r := range rows {
			t.Logf("row %d: %s %s %s ← %s, %d B blocks, %.1f MB/s", i+1, r.Status, r.Transport(), r.ServerHost, r.ClientHost, r.ParamInt("block_size"), deref(r.BandwidthMBs))
			if r.Status != results.StatusOK || r.Transport() != "tcp" || r.Verified == nil || !*r.Verified || r.Bytes == nil || *r.Bytes != 8<<20 {
				t.Errorf("row %d: status %q error %q verified %v bytes %v", i+1, r.Status, r.Error, r.Verified, r.Bytes)
			}
		}
		m := onlyManifest(t, filepath.Join(dir, "out"), rows[0].RunID)
		if len(m.Hosts) != 2 {
			t.Fatalf("manifest hosts: %+v", m.Hosts)
		}
		checkNode(t, m.Hosts[0], "x86_64", node, remoteNode)
		checkNode(t, m.Hosts[1], "aarch64", arm64Node, remoteNode+"-linux-arm64")
		stdout, _ := run(t, "check", "arm64-mixed", plan)
		checkTable(t, stdout, false)
	})

	// No node the runner started is left in the guest.
	c, err := g.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	out, err := sess.Output("ls -l /proc/[0-9]*/exe 2>/dev/null; echo END")
	if err != nil || !strings.Contains(string(out), "/usr/sbin/sshd") || !strings.HasSuffix(strings.TrimSpace(string(out)), "END") {
		t.Fatalf("list the guest's processes: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "node-linux-arm64") {
		t.Errorf("node left running in the guest:\n%s", out)
	}
	t.Logf("arm64: %s from the start of the image build to the end of the runs", time.Since(start).Round(time.Second))
}

// runRunner runs the runner in dir and returns its stdout and stderr.
func runRunner(ctx context.Context, runner, dir string, env []string, args ...string) (string, string, error) {
	cmd := exec.CommandContext(ctx, runner, args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// onlyManifest reads the manifest of run runID in dir.
func onlyManifest(t *testing.T, dir, runID string) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Read(manifest.PathFor(filepath.Join(dir, "x.csv"), runID))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkNode holds a manifest host to the node it should have got: the
// host's architecture, the build's file for it, and on the host that
// file's bytes (its sha256, taken there) at the path for its architecture.
func checkNode(t *testing.T, h manifest.Host, arch, binary, path string) {
	t.Helper()
	b, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	t.Logf("manifest: %s on %s (%s): node %s (%s) from %s, sha256 %.12s…", h.Role, h.Name, h.Arch, h.Node.Path, h.Node.Arch, filepath.Base(h.Node.Binary), h.Node.SHA256)
	if h.Arch != arch || h.Node.Arch != arch || h.Node.Binary != binary || h.Node.Path != path || h.Node.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("manifest host %s: arch %q, node %+v; want %s, %s from %s with sha256 %x", h.Role, h.Arch, h.Node, arch, path, binary, sum)
	}
}
