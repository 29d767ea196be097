package vmtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"rdmasweep/results"
	"rdmasweep/runner/files/csvfile"
	"rdmasweep/testbed/guest"
)

// Guest ports of the two extra sshd TestRunnerWithoutCaps starts, both
// with `ulimit -l 64`: one without CAP_IPC_LOCK and CAP_SYS_RESOURCE in its
// bounding set (root in a container with Docker's default capabilities),
// one with them.
const (
	noCapsSSHPort = 2222
	capsSSHPort   = 2223
)

// TestRunnerWithoutCaps is issue 24's memlock item through the runner, on
// Debian 12's kernel. Both roles log in over an sshd whose bounding set
// lacks CAP_IPC_LOCK and CAP_SYS_RESOURCE, as root, with `ulimit -l 64`:
// runner check fails the server's MEMORY cell naming the capability and
// the container case, and
// runner exec's pinned point fails at node's refusal, before
// ibv_reg_mr, naming the capability. With the capabilities back, and the
// same 64 KiB limit (node raises it itself), both pass.
func TestRunnerWithoutCaps(t *testing.T) {
	needHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	runner, node := filepath.Join(t.TempDir(), "runner"), filepath.Join(t.TempDir(), "node")
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, f := range []func() error{
		func() error { _, err := guest.EnsureImage(ctx, guest.Bookworm, testLog{t}); return err },
		func() error { return buildRunner(ctx, runner) },
		func() error { return guest.BuildNode(ctx, node) },
	} {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f() }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	hostPorts := map[int]int{} // guest port -> host port
	fwd := map[int]int{}
	for _, p := range []int{noCapsSSHPort, capsSSHPort} {
		h, err := freeHostPort()
		if err != nil {
			t.Fatal(err)
		}
		hostPorts[p], fwd[h] = h, p
	}
	var console consoleLog
	g, err := guest.Boot(ctx, guest.Options{Kernel: guest.Bookworm, OneNIC: true, Forward: fwd, Console: &console, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	t.Logf("guest %s up after %s", g.Image.Release, time.Since(start).Round(time.Second))
	c, err := g.Dial()
	if err != nil {
		t.Fatalf("ssh to the guest: %v", err)
	}
	defer c.Close()
	startLimitedSSHD(t, g, c, noCapsSSHPort, hostPorts[noCapsSSHPort], true)
	startLimitedSSHD(t, g, c, capsSSHPort, hostPorts[capsSSHPort], false)

	dir := t.TempDir()
	knownHosts := filepath.Join(dir, "known_hosts")
	key := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(g.HostKey)))
	var kh strings.Builder
	for _, p := range []int{g.SSHPort, hostPorts[noCapsSSHPort], hostPorts[capsSSHPort]} {
		fmt.Fprintf(&kh, "[127.0.0.1]:%d %s\n", p, key)
	}
	if err := os.WriteFile(knownHosts, []byte(kh.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "SSH_AUTH_SOCK=") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+t.TempDir())
	hostAt := func(port int) string {
		return fmt.Sprintf("{address: 127.0.0.1, port: %d, user: %s, identity_file: %q, data_address: %s}", port, g.User, g.KeyPath, guest.GuestIP)
	}
	for _, c := range []struct {
		name  string
		port  int
		drop  bool
		guest int
	}{
		{"without", hostPorts[noCapsSSHPort], true, noCapsSSHPort},
		{"with", hostPorts[capsSSHPort], false, capsSSHPort},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "vmtest-caps-" + c.name
			plan := fmt.Sprintf(`name: %s
hosts:
  server: %s
  client: %s
ssh: {known_hosts: %q, host_key_policy: strict, connect_timeout: 60s, keepalive_interval: 60s}
node: {binary: %q, remote_path: %s}
transport: rdma
rdma: {device: rxe0}
server: {file: /tmp/rdmasweep-caps.dat, file_size: 1MiB, create: true, cache: warm, registration: pinned}
client: {block_size: 64KiB, total: 1MiB, queue_depth: 4, verify: true}
timeouts: {ready: 1m, accept: 1m, point: 2m}
output: {csv: out/%s.csv, logs: out/logs}
`, name, hostAt(c.port), hostAt(c.port), knownHosts, node, remoteNode, name)
			path := filepath.Join(dir, name+".yaml")
			if err := os.WriteFile(path, []byte(plan), 0o644); err != nil {
				t.Fatal(err)
			}
			runnerCapsCase(t, ctx, runner, dir, env, path, name, c.drop)
		})
	}
	t.Logf("%s from the start to the end of the runs", time.Since(start).Round(time.Second))
}

// runnerCapsCase runs check and exec of the plan at path, whose server
// logs in without the capabilities when drop, and holds them to it.
func runnerCapsCase(t *testing.T, ctx context.Context, runner, dir string, env []string, path, name string, drop bool) {
	start := time.Now()
	out, errOut, err := runRunner(ctx, runner, dir, env, "check", path)
	t.Logf("runner check (%s):\n%s%s", time.Since(start).Round(100*time.Millisecond), out, errOut)
	cells := columnCells(out, "MEMORY", "DATA_PATH")
	if len(cells) != 2 {
		t.Fatalf("check table, want a row per role:\n%s%s", out, errOut)
	}
	if drop {
		if err == nil || !strings.Contains(errOut, "): memory: the memlock limit 64KiB") || !strings.Contains(errOut, "CAP_IPC_LOCK") || !strings.Contains(errOut, "--cap-add IPC_LOCK") {
			t.Errorf("check without CAP_IPC_LOCK: %v; want the server's memory judged failed, naming CAP_IPC_LOCK and --cap-add IPC_LOCK", err)
		}
		if !strings.Contains(cells[0], "memlock 64KiB") || strings.Contains(cells[0], "CAP_") {
			t.Errorf("server's MEMORY cell %q: want memlock 64KiB and no capability", cells[0])
		}
	} else {
		if err != nil {
			t.Errorf("check with the capabilities: %v", err)
		}
		if !strings.Contains(cells[0], "memlock 64KiB (CAP_IPC_LOCK)") {
			t.Errorf("server's MEMORY cell %q: want memlock 64KiB (CAP_IPC_LOCK)", cells[0])
		}
	}

	start = time.Now()
	_, errOut, err = runRunner(ctx, runner, dir, env, "exec", path)
	t.Logf("runner exec took %s", time.Since(start).Round(100*time.Millisecond))
	rows, rerr := csvfile.Read(filepath.Join(dir, "out", name+".csv"))
	if drop && (errors.Is(rerr, os.ErrNotExist) || rerr == nil && len(rows) == 0) {
		// Refused before any point: no row, and the reason on stderr.
		if err == nil || !strings.Contains(errOut, "CAP_IPC_LOCK") {
			t.Errorf("exec without CAP_IPC_LOCK wrote no row: %v; want the refusal naming CAP_IPC_LOCK\n%s", err, errOut)
		}
		t.Logf("refused before any point: %v", err)
		return
	}
	if rerr != nil || len(rows) != 1 {
		t.Fatalf("exec: %v, rows %d (%v); want one row\n%s", err, len(rows), rerr, errOut)
	}
	r := rows[0]
	if drop {
		if err == nil || r.Status != results.StatusFailed || !strings.Contains(r.Error, "CAP_IPC_LOCK") || strings.Contains(r.Error, "ibv_reg_mr") || r.RegistrationS != nil {
			t.Errorf("exec without CAP_IPC_LOCK: %v, row %s %q, registration_s %v; want a failed row naming CAP_IPC_LOCK, refused before ibv_reg_mr\n%s", err, r.Status, r.Error, r.RegistrationS, errOut)
		}
		t.Logf("refused: %s", r.Error)
		return
	}
	if err != nil || r.Status != results.StatusOK || r.Verified == nil || !*r.Verified || r.RegistrationS == nil {
		t.Errorf("exec with the capabilities: %v, row %s %q; want ok, verified, registered\n%s", err, r.Status, r.Error, errOut)
	}
	t.Logf("with CAP_IPC_LOCK and memlock 64 KiB: %s, registration %s s, %.1f MB/s", r.Status, fmtPtr(r.RegistrationS), deref(r.BandwidthMBs))
}

// startLimitedSSHD starts, over c, a second sshd in the guest on port as
// root with `ulimit -l 64`, and when drop with CAP_IPC_LOCK and
// CAP_SYS_RESOURCE dropped from its bounding set (capsh), so no login
// through it holds them. It then logs in through hostPort, forwarded to
// port, and checks the login's limit and bounding set.
func startLimitedSSHD(t *testing.T, g *guest.Guest, c *ssh.Client, port, hostPort int, drop bool) {
	t.Helper()
	sshd := fmt.Sprintf("ulimit -l 64 && exec /usr/sbin/sshd -p %d -o PidFile=/run/sshd-%d.pid -E /tmp/sshd-%d.log", port, port, port)
	cmd := "sh -c '" + sshd + "'"
	if drop {
		cmd = "capsh --shell=/bin/sh --drop=cap_ipc_lock,cap_sys_resource -- -c '" + sshd + "'"
	}
	if out, err := guestRun(c, cmd); err != nil {
		t.Fatalf("start sshd on guest port %d: %v\n%s", port, err, out)
	}
	var lc *ssh.Client
	var err error
	for range 20 { // sshd listens once it has daemonized
		lc, err = ssh.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", hostPort), &ssh.ClientConfig{
			User: g.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(g.Signer)},
			HostKeyCallback: ssh.FixedHostKey(g.HostKey), Timeout: 10 * time.Second,
		})
		if err == nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		log, _ := guestRun(c, fmt.Sprintf("cat /tmp/sshd-%d.log", port))
		t.Fatalf("log in through the sshd on guest port %d: %v\n%s", port, err, log)
	}
	defer lc.Close()
	out, err := guestRun(lc, "ulimit -l; grep CapBnd /proc/self/status")
	var memlock string
	var bnd uint64
	if err == nil {
		_, err = fmt.Sscanf(out, "%s\nCapBnd:\t%x", &memlock, &bnd)
	}
	const ipcLock, sysResource = 1 << 14, 1 << 24
	if err != nil || memlock != "64" || (bnd&ipcLock != 0) == drop || (bnd&sysResource != 0) == drop {
		t.Fatalf("a login through the sshd on guest port %d: %v\n%s\nwant memlock 64 and CAP_IPC_LOCK, CAP_SYS_RESOURCE in the bounding set: %v", port, err, out, !drop)
	}
	t.Logf("a login through guest port %d: memlock %s KiB, bounding set %#x", port, memlock, bnd)
}

// guestRun runs cmd over c and returns its combined output.
func guestRun(c *ssh.Client, cmd string) (string, error) {
	s, err := c.NewSession()
	if err != nil {
		return "", err
	}
	defer s.Close()
	out, err := s.CombinedOutput(cmd)
	return string(out), err
}
