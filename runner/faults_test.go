package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"rdmasweep/internal/testenv"
	"rdmasweep/results"
	"rdmasweep/runner/remote/testhosts"
)

// The fault table of issue 5, injected across the namespace SSH hosts
// (server on host a, client on host b) while a real runner drives them.
// Every case is judged by what a user would look at afterwards: the exit
// code, the runner's stderr, the rows in the CSV, the logs, and whether any
// node is still running on either host.
//
// The cases share one set of hosts, so the harness is built once; each
// case has its own directory, CSV and state file, and a fixed server port,
// so a node one case leaves behind makes the next one fail loudly instead
// of hiding.

// faultPort is the fixed server.port: a leftover server blocks it.
const faultPort = 18515

// faultPlan writes a plan with its server on a and its client on b, small
// and fast, whose sweep is the given YAML flow mapping.
func faultPlan(t *testing.T, dir string, n *testhosts.Net, sweep string) string {
	t.Helper()
	a, b := n.Hosts["a"], n.Hosts["b"]
	text := fmt.Sprintf(`name: faults
hosts:
  server: {address: %s, user: root, identity_file: %s}
  client: {address: %s, user: root, identity_file: %s}
ssh: {known_hosts: %s, host_key_policy: strict, connect_timeout: 5s, keepalive_interval: 2s}
node: {binary: %s, remote_path: %s/bin/node}
transport: tcp
server: {file: %s/faults.dat, file_size: 4MiB, create: true, cache: warm, port: %d}
client: {queue_depth: 4, verify: true}
sweep: %s
timeouts: {ready: 10s, accept: 10s, point: 30s}
output: {csv: out/faults.csv, logs: out/logs}
`, a.Addr, n.KeyFile, b.Addr, n.KeyFile, n.KnownHosts, filepath.Join(binDir, "node"), testhosts.DeployDir,
		testhosts.DeployDir, faultPort, sweep)
	path := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const (
	twoPoints = "{zip: {block_size: [1MiB, 256KiB]}}"
	onePoint  = "{zip: {block_size: [1MiB]}}"
)

// lockedBuffer collects a running runner's output for polling.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// bgRunner is a runner started in the background, to be hurt mid-point.
type bgRunner struct {
	cmd            *exec.Cmd
	stdout, stderr lockedBuffer
	done           chan struct{}
	code           int // valid once done is closed; -1 when killed by a signal
}

func startRunner(t *testing.T, dir string, env []string, args ...string) *bgRunner {
	t.Helper()
	r := &bgRunner{cmd: exec.Command(filepath.Join(binDir, "runner"), args...), done: make(chan struct{})}
	r.cmd.Dir, r.cmd.Env = dir, env
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := r.cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		} else if err != nil {
			r.code = -1
		}
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			r.cmd.Process.Kill()
			<-r.done
		}
	})
	return r
}

// wait returns the runner's exit code, failing if it runs past timeout.
func (r *bgRunner) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-r.done:
		return r.code
	case <-time.After(timeout):
		r.cmd.Process.Kill()
		<-r.done
		t.Fatalf("runner still running after %v\nstderr:\n%s", timeout, r.stderr.String())
		return 0
	}
}

// waitStderr waits until the runner's stderr holds s and returns when.
func (r *bgRunner) waitStderr(t *testing.T, s string, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(r.stderr.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q on the runner's stderr within %v:\n%s", s, timeout, r.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Now()
}

// nodePids lists the node processes running on h.
func nodePids(t *testing.T, h *testhosts.Host) []int {
	t.Helper()
	var pids []int
	for _, pid := range h.SessionPids(t) {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err == nil && strings.HasSuffix(strings.TrimSuffix(exe, " (deleted)"), "/node") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitNodes waits until every host runs a node (both roles of a point are
// up, so the point is under way) and returns each host's node pid.
func waitNodes(t *testing.T, r *bgRunner, hosts ...*testhosts.Host) map[*testhosts.Host]int {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := map[*testhosts.Host]int{}
		for _, h := range hosts {
			if pids := nodePids(t, h); len(pids) == 1 {
				got[h] = pids[0]
			}
		}
		if len(got) == len(hosts) {
			return got
		}
		select {
		case <-r.done:
			t.Fatalf("runner exited (%d) before nodes ran on every host\n%s", r.code, r.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes never ran on every host\n%s", r.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitNoNodes waits up to timeout for every host to be free of node, and
// reports what is left.
func waitNoNodes(t *testing.T, timeout time.Duration, hosts ...*testhosts.Host) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var left []string
		for _, h := range hosts {
			for _, pid := range nodePids(t, h) {
				left = append(left, fmt.Sprintf("%s: pid %d", h.Name, pid))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killLeftNodes is each case's cleanup: whatever a failed case left must
// not block the fixed port for the next.
func killLeftNodes(t *testing.T, hosts ...*testhosts.Host) {
	t.Cleanup(func() {
		for _, h := range hosts {
			for _, pid := range nodePids(t, h) {
				t.Logf("killing node pid %d left on %s", pid, h.Name)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}

// waitRows waits until the CSV holds n rows.
func waitRows(t *testing.T, r *bgRunner, csv string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if rows, err := results.ReadCSV(csv); err == nil && len(rows) >= n {
			return
		}
		select {
		case <-r.done:
			t.Fatalf("runner exited (%d) before %d rows\n%s", r.code, n, r.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %d rows in %s\n%s", n, csv, r.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkWholeCSV checks the CSV as a user's script would read it: header
// intact, every line a whole row.
func checkWholeCSV(t *testing.T, path string) []results.Row {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("%s ends in a partial line:\n%s", path, data)
	}
	if !bytes.HasPrefix(data, []byte(strings.Join(results.Columns, ",")+"\n")) {
		t.Fatalf("%s lost its header:\n%s", path, data)
	}
	rows, err := results.ReadCSV(path)
	if err != nil {
		t.Fatalf("%s does not parse: %v", path, err)
	}
	if lines := bytes.Count(data, []byte("\n")); lines != len(rows)+1 {
		t.Fatalf("%s: %d lines for %d rows", path, lines, len(rows))
	}
	return rows
}

// hostLabel is how the runner names a role in its messages and rows.
func hostLabel(role string, h *testhosts.Host) string {
	return fmt.Sprintf("%s (root@%s:22)", role, h.Addr)
}

func TestFaultsAcrossSSHHosts(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}})
	a, b := n.Hosts["a"], n.Hosts["b"]
	env := sshEnv(t)
	var injected, survived int
	count := func(t *testing.T) {
		injected++
		t.Cleanup(func() {
			if !t.Failed() {
				survived++
			}
		})
	}
	t.Cleanup(func() { t.Logf("faults injected: %d, survived: %d", injected, survived) })

	// (a), (b): kill -9 of node serve or node read mid-point.
	for _, tc := range []struct {
		name, role string
		host       *testhosts.Host
		failFast   bool
	}{
		{"a_serve_killed", "server", a, false},
		{"b_read_killed", "client", b, false},
		{"a_serve_killed_fail_fast", "server", a, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			count(t)
			killLeftNodes(t, a, b)
			dir := t.TempDir()
			args := []string{"exec", faultPlan(t, dir, n, twoPoints), "--set", "duration=2s", "--set", "total=0"}
			if tc.failFast {
				args = append(args, "--fail-fast")
			}
			r := startRunner(t, dir, env, args...)
			pids := waitNodes(t, r, a, b)
			time.Sleep(300 * time.Millisecond)
			tc.host.Run(t, "kill", "-9", strconv.Itoa(pids[tc.host]))
			if code := r.wait(t, 60*time.Second); code != 1 {
				t.Fatalf("exit %d, want 1\n%s", code, r.stderr.String())
			}
			rows := checkWholeCSV(t, filepath.Join(dir, "out/faults.csv"))
			want := 2
			if tc.failFast {
				want = 1
			}
			if len(rows) != want {
				t.Fatalf("%d rows, want %d\n%s", len(rows), want, r.stderr.String())
			}
			// The row blames the killed role, on one line that says how it died.
			got := rows[0]
			if got.Status != results.StatusFailed || !strings.HasPrefix(got.Error, hostLabel(tc.role, tc.host)+": ") ||
				!strings.Contains(got.Error, "killed by signal KILL") || strings.Contains(got.Error, "\n") || got.Bytes != nil {
				t.Fatalf("row of the hurt point: status %q error %q\n%s", got.Status, got.Error, r.stderr.String())
			}
			if !strings.Contains(r.stderr.String(), "failed: "+got.Error) {
				t.Errorf("the failure is not shown on stderr:\n%s", r.stderr.String())
			}
			if tc.failFast {
				if !strings.Contains(r.stderr.String(), "--fail-fast") {
					t.Errorf("no word of --fail-fast:\n%s", r.stderr.String())
				}
			} else if rows[1].Status != results.StatusOK || rows[1].Bytes == nil {
				t.Errorf("the sweep did not go on to an ok point: %+v\n%s", rows[1], r.stderr.String())
			}
			// Each role's stderr is kept in its log, named for the point.
			logs, _ := filepath.Glob(filepath.Join(dir, "out/logs/*/001-*."+tc.role+".log"))
			if len(logs) != 1 {
				t.Fatalf("logs of the hurt point's %s: %v", tc.role, logs)
			}
			if log, _ := os.ReadFile(logs[0]); !bytes.HasPrefix(log, []byte("# "+hostLabel(tc.role, tc.host)+": ")) {
				t.Errorf("log %s:\n%s", logs[0], log)
			}
			if left := waitNoNodes(t, 5*time.Second, a, b); len(left) > 0 {
				t.Fatalf("nodes left: %v", left)
			}
		})
	}

	// (c): the sshd process serving the runner's connection to a dies.
	t.Run("c_sshd_killed", func(t *testing.T) {
		count(t)
		killLeftNodes(t, a, b)
		dir := t.TempDir()
		r := startRunner(t, dir, env, "exec", faultPlan(t, dir, n, onePoint), "--set", "duration=20s", "--set", "total=0")
		pids := waitNodes(t, r, a, b)
		time.Sleep(300 * time.Millisecond)
		sshdPid := parentPid(t, pids[a])
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", sshdPid)); exe != "/usr/sbin/sshd" || sshdPid == a.SSHDPid {
			t.Fatalf("node serve's parent %d is %q, not a connection's sshd", sshdPid, exe)
		}
		a.Run(t, "kill", "-9", strconv.Itoa(sshdPid))
		killed := time.Now()
		lost := r.waitStderr(t, hostLabel("server", a)+": connection lost", 10*time.Second)
		t.Logf("connection lost reported %v after its sshd was killed", lost.Sub(killed).Round(time.Millisecond))
		if code := r.wait(t, 20*time.Second); code != 1 {
			t.Fatalf("exit %d, want 1\n%s", code, r.stderr.String())
		}
		rows := checkWholeCSV(t, filepath.Join(dir, "out/faults.csv"))
		if len(rows) != 1 || rows[0].Status != results.StatusFailed || !strings.Contains(rows[0].Error, "connection lost") {
			t.Fatalf("rows: %+v", rows)
		}
		// node serve lost its stdin with its sshd: it exits on EOF, long
		// before its --deadline.
		if left := waitNoNodes(t, 5*time.Second, a, b); len(left) > 0 {
			t.Fatalf("nodes outlived the lost connection: %v", left)
		}
	})

	// (d): a's link goes down mid-point, then comes back.
	t.Run("d_link_down", func(t *testing.T) {
		count(t)
		killLeftNodes(t, a, b)
		t.Cleanup(func() { a.SetLink(t, true) })
		dir := t.TempDir()
		plan := faultPlan(t, dir, n, onePoint)
		// Put node in place first: a 1 s keepalive can time out behind a
		// 5 MB upload on a loaded machine, and the upload is not the fault.
		for _, h := range []*testhosts.Host{a, b} {
			h.Run(t, "install", "-D", "-m", "0755", filepath.Join(binDir, "node"), testhosts.DeployDir+"/bin/node")
		}
		const keepalive = time.Second
		r := startRunner(t, dir, env, "exec", plan, "--set", "duration=20s", "--set", "total=0",
			"--set", "ssh.keepalive_interval="+keepalive.String())
		pids := waitNodes(t, r, a, b)
		time.Sleep(300 * time.Millisecond)
		// When the link comes back, the FINs of the runner's old connection
		// and of the stopped client would reach a, and node serve would
		// exit on its own. Dropping them keeps it running, as on a host
		// that never heard: the next exec must reap it.
		blackholeConnections(t, a, parentPid(t, pids[a]), pids[a])
		a.SetLink(t, false)
		down := time.Now()
		failed := r.waitStderr(t, "failed: ", 3*keepalive+5*time.Second)
		t.Logf("point failed %v after the link went down (keepalive_interval %v)", failed.Sub(down).Round(time.Millisecond), keepalive)
		if code := r.wait(t, 20*time.Second); code != 1 {
			t.Fatalf("exit %d, want 1\n%s", code, r.stderr.String())
		}
		rows := checkWholeCSV(t, filepath.Join(dir, "out/faults.csv"))
		if len(rows) != 1 || rows[0].Status != results.StatusFailed || !strings.HasPrefix(rows[0].Error, hostLabel("server", a)+": connection lost") ||
			!strings.Contains(rows[0].Error, "no answer to keepalives") {
			t.Fatalf("rows: %+v\n%s", rows, r.stderr.String())
		}
		// Cut off, node serve runs on; the state file remembers it.
		if left := nodePids(t, a); len(left) != 1 || left[0] != pids[a] {
			t.Fatalf("node serve on a while cut off: %v, want pid %d", left, pids[a])
		}
		if _, err := os.Stat(filepath.Join(dir, "out/faults.csv.state")); err != nil {
			t.Fatalf("the node cut off is not in the state file: %v", err)
		}
		a.SetLink(t, true)
		// The next exec, at once, kills it from the state file and gets
		// the fixed port.
		again := runnerEnv(t, dir, env, "exec", plan, "--set", "duration=1s", "--set", "total=0")
		if again.code != 0 || !strings.Contains(again.stderr, fmt.Sprintf("killed leftover node pid %d from an earlier exec", pids[a])) {
			t.Fatalf("next exec: exit %d\n%s", again.code, again.stderr)
		}
		if rows := checkWholeCSV(t, filepath.Join(dir, "out/faults.csv")); len(rows) != 2 || rows[1].Status != results.StatusOK {
			t.Fatalf("rows after the next exec: %+v", rows)
		}
		if left := waitNoNodes(t, 0, a, b); len(left) > 0 {
			t.Fatalf("nodes left: %v", left)
		}
		if _, err := os.Stat(filepath.Join(dir, "out/faults.csv.state")); !os.IsNotExist(err) {
			t.Fatalf("state file left after a clean exec: %v", err)
		}
	})

	// (e): SIGINT or SIGTERM to the runner mid-point, after a first row.
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
	}{{"SIGTERM", syscall.SIGTERM}, {"SIGINT", syscall.SIGINT}} {
		t.Run("e_"+tc.name, func(t *testing.T) {
			count(t)
			killLeftNodes(t, a, b)
			dir := t.TempDir()
			csv := filepath.Join(dir, "out/faults.csv")
			r := startRunner(t, dir, env, "exec", faultPlan(t, dir, n, "{zip: {block_size: [1MiB, 256KiB], duration: [0s, 20s]}}"))
			waitRows(t, r, csv, 1)
			waitNodes(t, r, a, b)
			time.Sleep(300 * time.Millisecond)
			r.cmd.Process.Signal(tc.sig)
			sent := time.Now()
			if code := r.wait(t, 20*time.Second); code != 128+int(tc.sig) {
				t.Fatalf("exit %d, want %d\n%s", code, 128+int(tc.sig), r.stderr.String())
			}
			left := waitNoNodes(t, 5*time.Second-time.Since(sent), a, b)
			t.Logf("runner and nodes gone %v after %s", time.Since(sent).Round(time.Millisecond), tc.name)
			if len(left) > 0 {
				t.Fatalf("nodes outlived the runner by 5 s: %v", left)
			}
			rows := checkWholeCSV(t, csv)
			if len(rows) != 1 || rows[0].Status != results.StatusOK {
				t.Fatalf("rows: %+v", rows)
			}
			if !strings.Contains(r.stderr.String(), "runner: error: interrupted by "+tc.name) {
				t.Errorf("stderr:\n%s", r.stderr.String())
			}
		})
	}

	// (f): kill -9 of the runner mid-point, then exec again at once.
	t.Run("f_runner_killed", func(t *testing.T) {
		count(t)
		killLeftNodes(t, a, b)
		dir := t.TempDir()
		csv := filepath.Join(dir, "out/faults.csv")
		plan := faultPlan(t, dir, n, "{zip: {block_size: [1MiB, 256KiB, 64KiB], duration: [0s, 3s, 0s]}}")
		r := startRunner(t, dir, env, "exec", plan)
		waitRows(t, r, csv, 1)
		old := waitNodes(t, r, a, b)
		time.Sleep(300 * time.Millisecond)
		r.cmd.Process.Kill()
		<-r.done
		again := runnerEnv(t, dir, env, "exec", plan)
		if again.code != 0 || !strings.Contains(again.stderr, "skipping 1 run already ok") {
			t.Fatalf("exec after the kill: exit %d\n%s", again.code, again.stderr)
		}
		if strings.Contains(again.stderr, "killed leftover") {
			t.Logf("old nodes %v were killed from the state file", old)
		} else {
			t.Logf("old nodes %v had exited on stdin EOF", old)
		}
		rows := checkWholeCSV(t, csv)
		okTimes := map[string]int{}
		for _, row := range rows {
			if row.Status != results.StatusOK {
				t.Errorf("row not ok: %+v", row)
			}
			okTimes[row.PointKey]++
		}
		if len(rows) != 3 || len(okTimes) != 3 {
			t.Fatalf("want each of 3 points ok exactly once, got %v", okTimes)
		}
		if left := waitNoNodes(t, 0, a, b); len(left) > 0 {
			t.Fatalf("nodes left: %v", left)
		}
		if _, err := os.Stat(csv + ".state"); !os.IsNotExist(err) {
			t.Fatalf("state file left: %v", err)
		}
	})

	// (i): a's disk fills while node is uploaded.
	t.Run("i_remote_disk_full", func(t *testing.T) {
		count(t)
		st, err := os.Stat(filepath.Join(binDir, "node"))
		if err != nil {
			t.Fatal(err)
		}
		const tiny = 1 << 20
		if st.Size() <= tiny {
			t.Fatalf("node binary is %d bytes, too small to overflow a %d-byte disk", st.Size(), tiny)
		}
		full := testhosts.DeployDir + "/tiny"
		a.Run(t, "mkdir", "-p", full)
		a.Run(t, "mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(tiny), "tmpfs", full)
		t.Cleanup(func() { a.Output("umount", full) })
		dir := t.TempDir()
		remotePath := full + "/bin/node"
		r := runnerEnv(t, dir, env, "exec", faultPlan(t, dir, n, onePoint), "--set", "node.remote_path="+remotePath)
		if r.code != 1 || !strings.Contains(r.stderr, "runner: error: "+hostLabel("server", a)+": deploy node to "+remotePath+": ") {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, "runner: hint: the host's disk is full: ") {
			t.Errorf("the error does not say the disk is full:\n%s", r.stderr)
		}
		if _, err := a.Output("test", "-e", remotePath); err == nil {
			t.Fatalf("a half-written node is at %s", remotePath)
		}
		if out := a.Run(t, "ls", "-A", full+"/bin"); strings.TrimSpace(out) != "" {
			t.Fatalf("upload left files behind: %s", out)
		}
		if rows := checkWholeCSV(t, filepath.Join(dir, "out/faults.csv")); len(rows) != 0 {
			t.Fatalf("a point ran: %+v", rows)
		}
	})

	// (j): a server that never becomes ready: its file is a FIFO that no one
	// writes, so opening it blocks.
	t.Run("j_never_ready", func(t *testing.T) {
		count(t)
		killLeftNodes(t, a, b)
		fifo := testhosts.DeployDir + "/never-ready.fifo"
		a.Run(t, "mkfifo", fifo)
		t.Cleanup(func() { a.Output("rm", "-f", fifo) })
		dir := t.TempDir()
		const ready, grace = 2 * time.Second, 2 * time.Second
		r := startRunner(t, dir, env, "exec", faultPlan(t, dir, n, onePoint),
			"--set", "server.file="+fifo, "--set", "server.create=false", "--set", "timeouts.ready="+ready.String())
		begun := procStarted(t, waitNodes(t, r, a)[a])
		failed := r.waitStderr(t, "failed: ", ready+3*grace+5*time.Second)
		if took := failed.Sub(begun); took < ready {
			t.Fatalf("failed after %v, before timeouts.ready %v\n%s", took, ready, r.stderr.String())
		}
		t.Logf("never-ready point failed %v after it began (timeouts.ready %v)", failed.Sub(begun).Round(time.Millisecond), ready)
		if code := r.wait(t, 10*time.Second); code != 1 {
			t.Fatalf("exit %d\n%s", code, r.stderr.String())
		}
		rows := checkWholeCSV(t, filepath.Join(dir, "out/faults.csv"))
		if len(rows) != 1 || rows[0].Error != hostLabel("server", a)+": not ready within timeouts.ready ("+ready.String()+")" {
			t.Fatalf("rows: %+v", rows)
		}
		if left := waitNoNodes(t, 0, a, b); len(left) > 0 {
			t.Fatalf("the server was not killed: %v", left)
		}
	})

	// (j): a client that hangs (stopped) mid-point.
	t.Run("j_client_hangs", func(t *testing.T) {
		count(t)
		killLeftNodes(t, a, b)
		dir := t.TempDir()
		const point, grace = 6 * time.Second, 2 * time.Second
		r := startRunner(t, dir, env, "exec", faultPlan(t, dir, n, onePoint), "--set", "duration=2s", "--set", "total=0",
			"--set", "timeouts.ready=3s", "--set", "timeouts.point="+point.String())
		pids := waitNodes(t, r, a, b)
		b.Run(t, "kill", "-STOP", strconv.Itoa(pids[b]))
		stopped := time.Now()
		failed := r.waitStderr(t, "failed: ", point+3*grace+5*time.Second)
		t.Logf("hung point failed %v after the client stopped (timeouts.point %v)", failed.Sub(stopped).Round(time.Millisecond), point)
		if code := r.wait(t, 10*time.Second); code != 1 {
			t.Fatalf("exit %d\n%s", code, r.stderr.String())
		}
		rows := checkWholeCSV(t, filepath.Join(dir, "out/faults.csv"))
		if len(rows) != 1 || rows[0].Error != "runner: point timed out (timeouts.point "+point.String()+")" {
			t.Fatalf("rows: %+v", rows)
		}
		if left := waitNoNodes(t, 0, a, b); len(left) > 0 {
			t.Fatalf("nodes not killed: %v", left)
		}
	})

	// Exposure: no secret in argv, the environment, the CSV or the logs;
	// node serve listens on the data address only.
	t.Run("secret_and_listen", func(t *testing.T) {
		killLeftNodes(t, a, b)
		dir := t.TempDir()
		r := startRunner(t, dir, env, "exec", faultPlan(t, dir, n, onePoint), "--set", "duration=2s", "--set", "total=0")
		pids := waitNodes(t, r, a, b)
		for h, pid := range pids {
			argv := procStrings(t, pid, "cmdline")
			if !hasString(argv, "--control-stdin") {
				t.Errorf("%s: node not given its control on stdin: %q", h.Name, argv)
			}
			for _, s := range append(argv, procStrings(t, pid, "environ")...) {
				if hex64.MatchString(s) || strings.Contains(strings.ToLower(s), "secret") {
					t.Errorf("%s: node pid %d shows %q to ps", h.Name, pid, s)
				}
			}
		}
		ss := a.Run(t, "ss", "-Hltnp")
		var listening []string
		for _, line := range strings.Split(ss, "\n") {
			if strings.Contains(line, fmt.Sprintf("pid=%d,", pids[a])) {
				listening = append(listening, strings.Fields(line)[3])
			}
		}
		if want := fmt.Sprintf("%s:%d", a.Addr, faultPort); len(listening) != 1 || listening[0] != want {
			t.Errorf("node serve listens on %v, want only %s\n%s", listening, want, ss)
		}
		if code := r.wait(t, 60*time.Second); code != 0 {
			t.Fatalf("exit %d\n%s", code, r.stderr.String())
		}
		files := []string{filepath.Join(dir, "out/faults.csv")}
		logs, _ := filepath.Glob(filepath.Join(dir, "out/logs/*/*"))
		if len(logs) != 2 {
			t.Fatalf("want a log per role, got %v", logs)
		}
		for _, f := range append(files, logs...) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if m := hex64.Find(data); m != nil {
				t.Errorf("%s holds a secret-like token %s", f, m)
			}
		}
		if m := hex64.FindString(r.stdout.String() + r.stderr.String()); m != "" {
			t.Errorf("the runner printed a secret-like token %s", m)
		}
	})

	// A changed host key is refused under strict and accept-new, before
	// anything runs, naming the known_hosts line.
	for _, policy := range []string{"strict", "accept-new"} {
		t.Run("changed_host_key_"+policy, func(t *testing.T) {
			dir := t.TempDir()
			known, line := knownHostsWithChangedKey(t, n, a)
			before, _ := os.ReadFile(known)
			r := runnerEnv(t, dir, env, "exec", faultPlan(t, dir, n, onePoint),
				"--set", "ssh.known_hosts="+known, "--set", "ssh.host_key_policy="+policy)
			if r.code != 1 || !strings.Contains(r.stderr, fmt.Sprintf("known_hosts %s:%d", known, line)) ||
				!strings.Contains(r.stderr, "CHANGED") {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			if after, _ := os.ReadFile(known); !bytes.Equal(after, before) {
				t.Fatalf("known_hosts was changed:\n%s", after)
			}
			if rows, err := results.ReadCSV(filepath.Join(dir, "out/faults.csv")); err == nil && len(rows) > 0 {
				t.Fatalf("rows written: %+v", rows)
			}
			if left := waitNoNodes(t, 0, a, b); len(left) > 0 {
				t.Fatalf("nodes ran: %v", left)
			}
		})
	}
}

// blackholeConnections makes h drop every packet that reaches it on the
// established TCP connections of the given processes (an nftables table
// in h's namespace, removed at the end of the test), as if their peers
// had vanished without a word.
func blackholeConnections(t *testing.T, h *testhosts.Host, pids ...int) {
	t.Helper()
	h.Run(t, "nft", "add table inet rswfault")
	t.Cleanup(func() { h.Output("nft", "delete table inet rswfault") })
	h.Run(t, "nft", "add chain inet rswfault input { type filter hook input priority 0 ; }")
	ss := h.Run(t, "ss", "-Htnp", "state", "established")
	for _, pid := range pids {
		n := 0
		for _, line := range strings.Split(ss, "\n") {
			// Recv-Q Send-Q Local:Port Peer:Port Process
			f := strings.Fields(line)
			if len(f) < 5 || !strings.Contains(line, fmt.Sprintf("pid=%d,", pid)) {
				continue
			}
			split := func(s string) (string, string) {
				i := strings.LastIndexByte(s, ':')
				return s[:i], s[i+1:]
			}
			_, lport := split(f[2])
			paddr, pport := split(f[3])
			h.Run(t, "nft", "add rule inet rswfault input ip saddr "+paddr+" tcp sport "+pport+" tcp dport "+lport+" drop")
			n++
		}
		if n == 0 {
			t.Fatalf("no connection of pid %d on %s:\n%s", pid, h.Name, ss)
		}
	}
}

// hex64 matches a 32-byte value in hex: what a point's secret looks like.
var hex64 = regexp.MustCompile(`[0-9a-fA-F]{64}`)

// procStarted is when pid began, from /proc (to the clock tick).
func procStarted(t *testing.T, pid int) time.Time {
	t.Helper()
	const ticksPerSecond = 100 // USER_HZ: fixed at 100 in the Linux ABI
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	uptime, err := os.ReadFile("/proc/uptime")
	now := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the parenthesised command; starttime is field 22.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	ticks, err := strconv.ParseInt(fields[22-3], 10, 64)
	if err != nil {
		t.Fatalf("starttime of %d: %v", pid, err)
	}
	up, err := strconv.ParseFloat(strings.Fields(string(uptime))[0], 64)
	if err != nil {
		t.Fatalf("/proc/uptime: %v", err)
	}
	age := time.Duration(up*float64(time.Second)) - time.Duration(ticks)*time.Second/ticksPerSecond
	return now.Add(-age)
}

func procStrings(t *testing.T, pid int, file string) []string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// parentPid reads field 4 of /proc/PID/stat.
func parentPid(t *testing.T, pid int) int {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}

// knownHostsWithChangedKey copies the hosts' known_hosts with h's key
// replaced by a fresh one, as after a reinstall (or an attack), and returns
// the file and h's line.
func knownHostsWithChangedKey(t *testing.T, n *testhosts.Net, h *testhosts.Host) (string, int) {
	t.Helper()
	dir := t.TempDir()
	key := filepath.Join(dir, "other")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(n.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	at := 0
	for i, l := range lines {
		if strings.HasPrefix(l, h.Addr+" ") {
			lines[i] = h.Addr + " " + strings.TrimSpace(string(pub))
			at = i + 1
		}
	}
	if at == 0 {
		t.Fatalf("%s not in %s", h.Addr, n.KnownHosts)
	}
	known := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(known, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return known, at
}

// (g): the CSV sits on a filesystem that fills up.
func TestFaultCSVOnFullFilesystem(t *testing.T) {
	testenv.NeedRoot(t)
	dir := t.TempDir()
	mnt := filepath.Join(dir, "tiny")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	// The exec writes its manifest beside the CSV before the first row;
	// measure how many pages this plan's manifest takes on a roomy disk.
	page := os.Getpagesize()
	probeDir := t.TempDir()
	probe := runner(t, probeDir, "exec", loopbackPlan(t, probeDir, ""), "--out", filepath.Join(probeDir, "test.csv"), "--only", "block_size=1MiB")
	manifests, _ := filepath.Glob(filepath.Join(probeDir, "*.json"))
	if probe.code != 0 || len(manifests) != 1 {
		t.Fatalf("probe exec: %d %v\n%s", probe.code, manifests, probe.stderr)
	}
	st, err := os.Stat(manifests[0])
	if err != nil {
		t.Fatal(err)
	}
	manifestPages := int(st.Size())/page + 2 // and slack for a longer run id or path
	// One page for a filler, the manifest's pages, and one page for the
	// CSV, so a row that crosses the CSV's first page boundary finds no
	// space (a short write).
	size := strconv.Itoa((2 + manifestPages) * page)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	// The filler takes what the manifest will not need.
	if err := os.WriteFile(filepath.Join(mnt, "slack"), make([]byte, (manifestPages-int(st.Size())/page-1)*page), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "filler"), make([]byte, page), 0o644); err != nil {
		t.Fatal(err)
	}
	csv := filepath.Join(mnt, "test.csv")
	padCSV(t, csv, int64(page-500))
	before, err := os.ReadFile(csv)
	if err != nil {
		t.Fatal(err)
	}
	earlier := len(readRows(t, csv))

	r := runner(t, dir, "exec", loopbackPlan(t, dir, ""), "--out", csv)
	t.Logf("runner stderr:\n%s", r.stderr)
	if r.code != 1 || !strings.Contains(r.stderr, "no space left on device") || !strings.Contains(r.stderr, "runner: hint: ") {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	after, err := os.ReadFile(csv)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(after, before) {
		t.Fatalf("rows already in the CSV were changed")
	}
	rows := checkWholeCSV(t, csv)
	added := len(rows) - earlier
	// The runner stopped at the row it could not write: every point that
	// ran has its row, but for that last one.
	logs, _ := filepath.Glob(filepath.Join(dir, "out/logs/*/*.server.log"))
	if len(logs) != added+1 || added >= 3 {
		t.Fatalf("%d points ran, %d rows added: the runner measured on\n%s", len(logs), added, r.stderr)
	}
	if pids := nodesRunning(t); len(pids) != 0 {
		t.Fatalf("nodes left: %v", pids)
	}
	if left, _ := filepath.Glob(csv + ".state*"); len(left) != 0 {
		t.Fatalf("state files left on the full filesystem: %v", left)
	}
}

// padCSV makes path a results CSV of exactly size bytes, with rows of
// another plan that the runner must keep intact.
func padCSV(t *testing.T, path string, size int64) {
	t.Helper()
	c, err := results.OpenCSV(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	row := results.Row{RunID: "earlier", Plan: "other", PointKey: "0000000000000000", Repetition: 1, Status: results.StatusFailed, Error: "x"}
	st, _ := os.Stat(path)
	if err := c.Append(row); err != nil {
		t.Fatal(err)
	}
	st2, _ := os.Stat(path)
	rowSize := st2.Size() - st.Size()
	row.Error = strings.Repeat("x", int(size-st2.Size()-rowSize)+1)
	if err := c.Append(row); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Size() != size {
		t.Fatalf("padded %s to %d bytes, want %d", path, st.Size(), size)
	}
}

// (h): two runners at once on one CSV: the second refuses while the first
// holds the lock for its whole exec, and the first is not disturbed.
func TestFaultTwoRunnersAtOnceOnOneCSV(t *testing.T) {
	dir := t.TempDir()
	plan := loopbackPlan(t, dir, "")
	first := startRunner(t, dir, os.Environ(), "exec", plan, "--only", "block_size=1MiB", "--set", "duration=2s", "--set", "total=0")
	deadline := time.Now().Add(30 * time.Second)
	for len(nodesRunning(t)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("first runner's nodes never ran\n%s", first.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	second := runner(t, dir, "exec", plan)
	if second.code != 1 || !strings.Contains(second.stderr, "another runner is appending to it") || strings.Contains(second.stderr, "[1/") {
		t.Fatalf("second runner: exit %d\n%s", second.code, second.stderr)
	}
	if code := first.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("first runner: exit %d\n%s", code, first.stderr.String())
	}
	if rows := checkWholeCSV(t, filepath.Join(dir, "out/test.csv")); len(rows) != 1 || rows[0].Status != results.StatusOK {
		t.Fatalf("rows: %+v", rows)
	}
}
