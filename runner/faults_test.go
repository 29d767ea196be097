package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/files/csvfile"
	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/testenv"
	"rdmasweep/testbed/testhosts"
)

// The fault table of issue 5, injected across the namespace SSH hosts
// (server on host a, client on host b) while a real runner drives them.
// Every row is one fault, judged by what a user would look at afterwards:
// the exit code, the runner's stderr, the rows in the CSV, the logs, and
// whether any node is still running on either host.
//
// The rows share one set of hosts, so the harness is built once; each
// row has its own directory, CSV and state file, and a fixed server port,
// so a node one row leaves behind makes the next one fail loudly instead
// of hiding.

// faultPort is the fixed server.port: a leftover server blocks it.
const faultPort = 18515

// faultPlan writes a plan with its server on a and its client on b, small
// and fast, whose sweep is the given YAML flow mapping. Its keepalive is
// 5 s × 3: in CI, beside two busy TCG guests, a host's sshd went 7.1 s
// without answering a keepalive while nothing was wrong with it, and only
// d_link_down, which sets its own, is about keepalives.
func faultPlan(t *testing.T, dir string, n *testhosts.Net, sweep string) string {
	t.Helper()
	a, b := n.Hosts["a"], n.Hosts["b"]
	text := fmt.Sprintf(`name: faults
hosts:
  server: {address: %s, user: root, identity_file: %s}
  client: {address: %s, user: root, identity_file: %s}
ssh: {known_hosts: %s, host_key_policy: strict, connect_timeout: 5s, keepalive_interval: 5s}
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

// hostLabel is how the runner names a role in its messages and rows.
func hostLabel(role string, h *testhosts.Host) string {
	return fmt.Sprintf("%s (root@%s:22)", role, h.Addr)
}

// fault is one row of the fault table: what is done to an exec of a
// faultPlan while it runs, and what a user finds afterwards.
type fault struct {
	name  string
	sweep string   // the plan's sweep
	args  []string // after "exec PLAN"
	// tally counts the row in "faults injected: N, survived: M".
	tally bool
	// setup runs before the runner starts; it returns more exec args.
	setup func(f *faultRun) []string
	// inject hurts the running exec; nil lets it run to its end.
	inject func(f *faultRun)
	code   int           // the runner's exit code; -1: killed by a signal
	wait   time.Duration // the longest the runner may run after inject
	// check judges the CSV, stderr, logs and what is left on the hosts.
	check func(f *faultRun)
}

// faultRun is one row as it runs.
type faultRun struct {
	*testing.T
	n    *testhosts.Net
	a, b *testhosts.Host // the server's host and the client's
	env  []string
	dir  string
	plan string
	csv  string
	r    *clitest.Proc
	// pids are each host's node, once inject has waited for them; at is
	// when the fault was injected.
	pids map[*testhosts.Host]int
	at   time.Time
}

// host is the host of role ("server" or "client").
func (f *faultRun) host(role string) *testhosts.Host {
	if role == "server" {
		return f.a
	}
	return f.b
}

// bothUp waits until both roles of a point run, and a moment more, so the
// point is under way when the fault comes.
func (f *faultRun) bothUp() {
	f.Helper()
	f.pids = f.r.WaitNodes(f, f.a, f.b)
	time.Sleep(300 * time.Millisecond)
}

// noNodesLeft fails the row if a node is still on either host after
// timeout.
func (f *faultRun) noNodesLeft(timeout time.Duration) {
	f.Helper()
	if left := clitest.WaitNoNodes(f, timeout, f.a, f.b); len(left) > 0 {
		f.Fatalf("nodes left: %v", left)
	}
}

// short is a point that reads for the given time rather than a total.
func short(d string) []string { return []string{"--set", "duration=" + d, "--set", "total=0"} }

func TestFaultsAcrossSSHHosts(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}})
	a, b := n.Hosts["a"], n.Hosts["b"]
	env := clitest.SSHEnv(t)
	var injected, survived int
	t.Cleanup(func() { t.Logf("faults injected: %d, survived: %d", injected, survived) })
	for _, fc := range faults {
		t.Run(fc.name, func(t *testing.T) {
			if fc.tally {
				injected++
				t.Cleanup(func() {
					if !t.Failed() {
						survived++
					}
				})
			}
			clitest.KillLeftNodes(t, a, b)
			f := &faultRun{T: t, n: n, a: a, b: b, env: env, dir: t.TempDir()}
			f.plan = faultPlan(t, f.dir, n, fc.sweep)
			f.csv = filepath.Join(f.dir, "out/faults.csv")
			args := append([]string{"exec", f.plan}, fc.args...)
			if fc.setup != nil {
				args = append(args, fc.setup(f)...)
			}
			f.r = startRunner(t, f.dir, env, args...)
			if fc.inject != nil {
				fc.inject(f)
			}
			if code := f.r.Wait(t, fc.wait); code != fc.code {
				t.Fatalf("exit %d, want %d\n%s", code, fc.code, f.r.Stderr())
			}
			fc.check(f)
		})
	}
}

// faults is the table, in the order the rows run.
var faults = []fault{
	killNode("a_serve_killed", "server", false),
	killNode("b_read_killed", "client", false),
	killNode("a_serve_killed_fail_fast", "server", true),
	sshdKilled(),
	linkDown(),
	signalled(syscall.SIGTERM),
	signalled(syscall.SIGINT),
	runnerKilled(),
	remoteDiskFull(),
	neverReady(),
	clientHangs(),
	secretAndListen(),
	changedHostKey("strict"),
	changedHostKey("accept-new"),
}

// killNode is (a) and (b): kill -9 of node serve or node read mid-point.
func killNode(name, role string, failFast bool) fault {
	args, want := short("2s"), 2
	if failFast {
		args, want = append(args, "--fail-fast"), 1
	}
	return fault{
		name: name, sweep: twoPoints, args: args, tally: true, code: 1, wait: 60 * time.Second,
		inject: func(f *faultRun) {
			f.bothUp()
			h := f.host(role)
			h.Run(f, "kill", "-9", strconv.Itoa(f.pids[h]))
		},
		check: func(f *faultRun) {
			h, stderr := f.host(role), f.r.Stderr()
			rows := clitest.WholeCSV(f, f.csv)
			if len(rows) != want {
				f.Fatalf("%d rows, want %d\n%s", len(rows), want, stderr)
			}
			// The row blames the killed role, on one line that says how it died.
			got := rows[0]
			if got.Status != results.StatusFailed || !strings.HasPrefix(got.Error, hostLabel(role, h)+": ") ||
				!strings.Contains(got.Error, "killed by signal KILL") || strings.Contains(got.Error, "\n") || got.Bytes != nil {
				f.Fatalf("row of the hurt point: status %q error %q\n%s", got.Status, got.Error, stderr)
			}
			if !strings.Contains(stderr, "failed: "+got.Error) {
				f.Errorf("the failure is not shown on stderr:\n%s", stderr)
			}
			if failFast {
				if !strings.Contains(stderr, "--fail-fast") {
					f.Errorf("no word of --fail-fast:\n%s", stderr)
				}
			} else if rows[1].Status != results.StatusOK || rows[1].Bytes == nil {
				f.Errorf("the sweep did not go on to an ok point: %+v\n%s", rows[1], stderr)
			}
			// Each role's stderr is kept in its log, named for the point.
			logs, _ := filepath.Glob(filepath.Join(f.dir, "out/logs/*/001-*."+role+".log"))
			if len(logs) != 1 {
				f.Fatalf("logs of the hurt point's %s: %v", role, logs)
			}
			if log, _ := os.ReadFile(logs[0]); !bytes.HasPrefix(log, []byte("# "+hostLabel(role, h)+": ")) {
				f.Errorf("log %s:\n%s", logs[0], log)
			}
			f.noNodesLeft(5 * time.Second)
		},
	}
}

// sshdKilled is (c): the sshd process serving the runner's connection to
// a dies.
func sshdKilled() fault {
	return fault{
		name: "c_sshd_killed", sweep: onePoint, args: short("20s"), tally: true, code: 1, wait: 20 * time.Second,
		inject: func(f *faultRun) {
			f.bothUp()
			sshdPid := parentPid(f.T, f.pids[f.a])
			if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", sshdPid)); exe != "/usr/sbin/sshd" || sshdPid == f.a.SSHDPid {
				f.Fatalf("node serve's parent %d is %q, not a connection's sshd", sshdPid, exe)
			}
			f.a.Run(f, "kill", "-9", strconv.Itoa(sshdPid))
			killed := time.Now()
			lost := f.r.WaitStderr(f, hostLabel("server", f.a)+": connection lost", 10*time.Second)
			f.Logf("connection lost reported %v after its sshd was killed", lost.Sub(killed).Round(time.Millisecond))
		},
		check: func(f *faultRun) {
			rows := clitest.WholeCSV(f, f.csv)
			if len(rows) != 1 || rows[0].Status != results.StatusFailed || !strings.Contains(rows[0].Error, "connection lost") {
				f.Fatalf("rows: %+v", rows)
			}
			// node serve lost its stdin with its sshd: it exits on EOF, long
			// before its --deadline.
			if left := clitest.WaitNoNodes(f, 5*time.Second, f.a, f.b); len(left) > 0 {
				f.Fatalf("nodes outlived the lost connection: %v", left)
			}
		},
	}
}

// linkDown is (d): a's link goes down mid-point, then comes back.
func linkDown() fault {
	const keepalive = time.Second
	return fault{
		name: "d_link_down", sweep: onePoint, tally: true, code: 1, wait: 20 * time.Second,
		args: append(short("20s"), "--set", "ssh.keepalive_interval="+keepalive.String()),
		setup: func(f *faultRun) []string {
			f.Cleanup(func() { f.a.SetLink(f, true) })
			// Put node in place first: a 1 s keepalive can time out behind a
			// 5 MB upload on a loaded machine, and the upload is not the fault.
			for _, h := range []*testhosts.Host{f.a, f.b} {
				h.Run(f, "install", "-D", "-m", "0755", filepath.Join(binDir, "node"), testhosts.DeployDir+"/bin/node")
			}
			return nil
		},
		inject: func(f *faultRun) {
			f.bothUp()
			// When the link comes back, the FINs of the runner's old connection
			// and of the stopped client would reach a, and node serve would
			// exit on its own. Dropping them keeps it running, as on a host
			// that never heard: the next exec must reap it.
			blackholeConnections(f.T, f.a, parentPid(f.T, f.pids[f.a]), f.pids[f.a])
			f.a.SetLink(f, false)
			down := time.Now()
			failed := f.r.WaitStderr(f, "failed: ", 3*keepalive+5*time.Second)
			f.Logf("point failed %v after the link went down (keepalive_interval %v)", failed.Sub(down).Round(time.Millisecond), keepalive)
		},
		check: func(f *faultRun) {
			rows := clitest.WholeCSV(f, f.csv)
			if len(rows) != 1 || rows[0].Status != results.StatusFailed || !strings.HasPrefix(rows[0].Error, hostLabel("server", f.a)+": connection lost") ||
				!strings.Contains(rows[0].Error, "no answer to keepalives") {
				f.Fatalf("rows: %+v\n%s", rows, f.r.Stderr())
			}
			// Cut off, node serve runs on; the state file remembers it.
			if left := clitest.NodesOn(f, f.a); len(left) != 1 || left[0] != f.pids[f.a] {
				f.Fatalf("node serve on a while cut off: %v, want pid %d", left, f.pids[f.a])
			}
			if _, err := os.Stat(f.csv + ".state"); err != nil {
				f.Fatalf("the node cut off is not in the state file: %v", err)
			}
			f.a.SetLink(f, true)
			// The next exec, at once, kills it from the state file and gets
			// the fixed port.
			again := runnerEnv(f.T, f.dir, f.env, "exec", f.plan, "--set", "duration=1s", "--set", "total=0")
			if again.Code != 0 || !strings.Contains(again.Stderr, fmt.Sprintf("killed leftover node pid %d from an earlier exec", f.pids[f.a])) {
				f.Fatalf("next exec: exit %d\n%s", again.Code, again.Stderr)
			}
			if rows := clitest.WholeCSV(f, f.csv); len(rows) != 2 || rows[1].Status != results.StatusOK {
				f.Fatalf("rows after the next exec: %+v", rows)
			}
			f.noNodesLeft(0)
			if _, err := os.Stat(f.csv + ".state"); !os.IsNotExist(err) {
				f.Fatalf("state file left after a clean exec: %v", err)
			}
		},
	}
}

// signalled is (e): SIGINT or SIGTERM to the runner mid-point, after a
// first row.
func signalled(sig syscall.Signal) fault {
	name := map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM"}[sig]
	return fault{
		name: "e_" + name, sweep: "{zip: {block_size: [1MiB, 256KiB], duration: [0s, 20s]}}", tally: true,
		code: 128 + int(sig), wait: 20 * time.Second,
		inject: func(f *faultRun) {
			f.r.WaitRows(f, f.csv, 1)
			f.bothUp()
			f.r.Signal(sig)
			f.at = time.Now()
		},
		check: func(f *faultRun) {
			left := clitest.WaitNoNodes(f, 5*time.Second-time.Since(f.at), f.a, f.b)
			f.Logf("runner and nodes gone %v after %s", time.Since(f.at).Round(time.Millisecond), name)
			if len(left) > 0 {
				f.Fatalf("nodes outlived the runner by 5 s: %v", left)
			}
			rows := clitest.WholeCSV(f, f.csv)
			if len(rows) != 1 || rows[0].Status != results.StatusOK {
				f.Fatalf("rows: %+v", rows)
			}
			if !strings.Contains(f.r.Stderr(), "runner: error: interrupted by "+name) {
				f.Errorf("stderr:\n%s", f.r.Stderr())
			}
		},
	}
}

// runnerKilled is (f): kill -9 of the runner mid-point, then exec again at
// once.
func runnerKilled() fault {
	return fault{
		name: "f_runner_killed", sweep: "{zip: {block_size: [1MiB, 256KiB, 64KiB], duration: [0s, 3s, 0s]}}", tally: true,
		code: -1, wait: 10 * time.Second,
		inject: func(f *faultRun) {
			f.r.WaitRows(f, f.csv, 1)
			f.bothUp()
			f.r.Kill()
		},
		check: func(f *faultRun) {
			again := runnerEnv(f.T, f.dir, f.env, "exec", f.plan)
			if again.Code != 0 || !strings.Contains(again.Stderr, "skipping 1 run already ok") {
				f.Fatalf("exec after the kill: exit %d\n%s", again.Code, again.Stderr)
			}
			old := fmt.Sprintf("pid %d on a, pid %d on b", f.pids[f.a], f.pids[f.b])
			if strings.Contains(again.Stderr, "killed leftover") {
				f.Logf("old nodes (%s) were killed from the state file", old)
			} else {
				f.Logf("old nodes (%s) had exited on stdin EOF", old)
			}
			rows := clitest.WholeCSV(f, f.csv)
			okTimes := map[string]int{}
			for _, row := range rows {
				if row.Status != results.StatusOK {
					f.Errorf("row not ok: %+v", row)
				}
				okTimes[row.PointKey]++
			}
			if len(rows) != 3 || len(okTimes) != 3 {
				f.Fatalf("want each of 3 points ok exactly once, got %v", okTimes)
			}
			f.noNodesLeft(0)
			if _, err := os.Stat(f.csv + ".state"); !os.IsNotExist(err) {
				f.Fatalf("state file left: %v", err)
			}
		},
	}
}

// remoteDiskFull is (i): a's disk fills while node is uploaded.
func remoteDiskFull() fault {
	const tiny = 1 << 20
	full := testhosts.DeployDir + "/tiny"
	remotePath := full + "/bin/node"
	return fault{
		name: "i_remote_disk_full", sweep: onePoint, tally: true, code: 1, wait: 3 * time.Minute,
		setup: func(f *faultRun) []string {
			st, err := os.Stat(filepath.Join(binDir, "node"))
			if err != nil {
				f.Fatal(err)
			}
			if st.Size() <= tiny {
				f.Fatalf("node binary is %d bytes, too small to overflow a %d-byte disk", st.Size(), tiny)
			}
			f.a.Run(f, "mkdir", "-p", full)
			f.a.Run(f, "mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(tiny), "tmpfs", full)
			f.Cleanup(func() { f.a.Output("umount", full) })
			return []string{"--set", "node.remote_path=" + remotePath}
		},
		check: func(f *faultRun) {
			stderr := f.r.Stderr()
			if !strings.Contains(stderr, "runner: error: "+hostLabel("server", f.a)+": deploy node to "+remotePath+": ") {
				f.Fatalf("stderr:\n%s", stderr)
			}
			if !strings.Contains(stderr, "runner: hint: the host's disk is full: ") {
				f.Errorf("the error does not say the disk is full:\n%s", stderr)
			}
			if _, err := f.a.Output("test", "-e", remotePath); err == nil {
				f.Fatalf("a half-written node is at %s", remotePath)
			}
			if out := f.a.Run(f, "ls", "-A", full+"/bin"); strings.TrimSpace(out) != "" {
				f.Fatalf("upload left files behind: %s", out)
			}
			if rows := clitest.WholeCSV(f, f.csv); len(rows) != 0 {
				f.Fatalf("a point ran: %+v", rows)
			}
		},
	}
}

// neverReady is (j): a server that never becomes ready: its file is a
// FIFO that no one writes, so opening it blocks.
func neverReady() fault {
	const ready, grace = 2 * time.Second, 2 * time.Second
	fifo := testhosts.DeployDir + "/never-ready.fifo"
	return fault{
		name: "j_never_ready", sweep: onePoint, tally: true, code: 1, wait: 10 * time.Second,
		args: []string{"--set", "server.file=" + fifo, "--set", "server.create=false", "--set", "timeouts.ready=" + ready.String()},
		setup: func(f *faultRun) []string {
			f.a.Run(f, "mkfifo", fifo)
			f.Cleanup(func() { f.a.Output("rm", "-f", fifo) })
			return nil
		},
		inject: func(f *faultRun) {
			begun := procStarted(f.T, f.r.WaitNodes(f, f.a)[f.a])
			failed := f.r.WaitStderr(f, "failed: ", ready+3*grace+5*time.Second)
			if took := failed.Sub(begun); took < ready {
				f.Fatalf("failed after %v, before timeouts.ready %v\n%s", took, ready, f.r.Stderr())
			}
			f.Logf("never-ready point failed %v after it began (timeouts.ready %v)", failed.Sub(begun).Round(time.Millisecond), ready)
		},
		check: func(f *faultRun) {
			rows := clitest.WholeCSV(f, f.csv)
			if len(rows) != 1 || rows[0].Error != hostLabel("server", f.a)+": not ready within timeouts.ready ("+ready.String()+")" {
				f.Fatalf("rows: %+v", rows)
			}
			if left := clitest.WaitNoNodes(f, 0, f.a, f.b); len(left) > 0 {
				f.Fatalf("the server was not killed: %v", left)
			}
		},
	}
}

// clientHangs is (j): a client that hangs (stopped) mid-point.
func clientHangs() fault {
	const point, grace = 6 * time.Second, 2 * time.Second
	return fault{
		name: "j_client_hangs", sweep: onePoint, tally: true, code: 1, wait: 10 * time.Second,
		args: append(short("2s"), "--set", "timeouts.ready=3s", "--set", "timeouts.point="+point.String()),
		inject: func(f *faultRun) {
			f.pids = f.r.WaitNodes(f, f.a, f.b)
			f.b.Run(f, "kill", "-STOP", strconv.Itoa(f.pids[f.b]))
			stopped := time.Now()
			failed := f.r.WaitStderr(f, "failed: ", point+3*grace+5*time.Second)
			f.Logf("hung point failed %v after the client stopped (timeouts.point %v)", failed.Sub(stopped).Round(time.Millisecond), point)
		},
		check: func(f *faultRun) {
			rows := clitest.WholeCSV(f, f.csv)
			if len(rows) != 1 || rows[0].Error != "runner: point timed out (timeouts.point "+point.String()+")" {
				f.Fatalf("rows: %+v", rows)
			}
			if left := clitest.WaitNoNodes(f, 0, f.a, f.b); len(left) > 0 {
				f.Fatalf("nodes not killed: %v", left)
			}
		},
	}
}

// secretAndListen is exposure, not a fault: no secret in argv, the
// environment, the CSV or the logs; node serve listens on the data
// address only.
func secretAndListen() fault {
	return fault{
		name: "secret_and_listen", sweep: onePoint, args: short("2s"), code: 0, wait: 60 * time.Second,
		inject: func(f *faultRun) {
			f.pids = f.r.WaitNodes(f, f.a, f.b)
			for h, pid := range f.pids {
				argv := procStrings(f.T, pid, "cmdline")
				if !slices.Contains(argv, "--control-stdin") {
					f.Errorf("%s: node not given its control on stdin: %q", h.Name, argv)
				}
				for _, s := range append(argv, procStrings(f.T, pid, "environ")...) {
					if strings.HasPrefix(s, results.NodeSHA256Env+"=") {
						continue // the deployed node's sha256, public (docs/ssh.md#deploy-path)
					}
					if hex64.MatchString(s) || strings.Contains(strings.ToLower(s), "secret") {
						f.Errorf("%s: node pid %d shows %q to ps", h.Name, pid, s)
					}
				}
			}
			ss := f.a.Run(f, "ss", "-Hltnp")
			var listening []string
			for _, line := range strings.Split(ss, "\n") {
				if strings.Contains(line, fmt.Sprintf("pid=%d,", f.pids[f.a])) {
					listening = append(listening, strings.Fields(line)[3])
				}
			}
			if want := fmt.Sprintf("%s:%d", f.a.Addr, faultPort); len(listening) != 1 || listening[0] != want {
				f.Errorf("node serve listens on %v, want only %s\n%s", listening, want, ss)
			}
		},
		check: func(f *faultRun) {
			files := []string{f.csv}
			logs, _ := filepath.Glob(filepath.Join(f.dir, "out/logs/*/*"))
			if len(logs) != 2 {
				f.Fatalf("want a log per role, got %v", logs)
			}
			for _, file := range append(files, logs...) {
				data, err := os.ReadFile(file)
				if err != nil {
					f.Fatal(err)
				}
				if m := hex64.Find(data); m != nil {
					f.Errorf("%s holds a secret-like token %s", file, m)
				}
			}
			if m := hex64.FindString(f.r.Stdout() + f.r.Stderr()); m != "" {
				f.Errorf("the runner printed a secret-like token %s", m)
			}
		},
	}
}

// changedHostKey: a changed host key is refused under strict and
// accept-new, before anything runs, naming the known_hosts line.
func changedHostKey(policy string) fault {
	var (
		known  string
		line   int
		before []byte
	)
	return fault{
		name: "changed_host_key_" + policy, sweep: onePoint, code: 1, wait: 3 * time.Minute,
		setup: func(f *faultRun) []string {
			known, line = knownHostsWithChangedKey(f.T, f.n, f.a)
			before, _ = os.ReadFile(known)
			return []string{"--set", "ssh.known_hosts=" + known, "--set", "ssh.host_key_policy=" + policy}
		},
		check: func(f *faultRun) {
			stderr := f.r.Stderr()
			if !strings.Contains(stderr, fmt.Sprintf("known_hosts %s:%d", known, line)) || !strings.Contains(stderr, "CHANGED") {
				f.Fatalf("stderr:\n%s", stderr)
			}
			if after, _ := os.ReadFile(known); !bytes.Equal(after, before) {
				f.Fatalf("known_hosts was changed:\n%s", after)
			}
			if rows, err := csvfile.Read(f.csv); err == nil && len(rows) > 0 {
				f.Fatalf("rows written: %+v", rows)
			}
			if left := clitest.WaitNoNodes(f, 0, f.a, f.b); len(left) > 0 {
				f.Fatalf("nodes ran: %v", left)
			}
		},
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
	if probe.Code != 0 || len(manifests) != 1 {
		t.Fatalf("probe exec: %d %v\n%s", probe.Code, manifests, probe.Stderr)
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
	earlier := len(clitest.ReadRows(t, csv))

	r := runner(t, dir, "exec", loopbackPlan(t, dir, ""), "--out", csv)
	t.Logf("runner stderr:\n%s", r.Stderr)
	if r.Code != 1 || !strings.Contains(r.Stderr, "no space left on device") || !strings.Contains(r.Stderr, "runner: hint: ") {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	after, err := os.ReadFile(csv)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(after, before) {
		t.Fatalf("rows already in the CSV were changed")
	}
	rows := clitest.WholeCSV(t, csv)
	added := len(rows) - earlier
	// The runner stopped at the row it could not write: every point that
	// ran has its row, but for that last one.
	logs, _ := filepath.Glob(filepath.Join(dir, "out/logs/*/*.server.log"))
	if len(logs) != added+1 || added >= 3 {
		t.Fatalf("%d points ran, %d rows added: the runner measured on\n%s", len(logs), added, r.Stderr)
	}
	if pids := localNodes(t); len(pids) != 0 {
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
	c, err := csvfile.Open(path)
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
	first.Until(t, "the first runner's nodes", 30*time.Second, func() bool { return len(localNodes(t)) >= 2 })
	second := runner(t, dir, "exec", plan)
	if second.Code != 1 || !strings.Contains(second.Stderr, "another runner is appending to it") || strings.Contains(second.Stderr, "[1/") {
		t.Fatalf("second runner: exit %d\n%s", second.Code, second.Stderr)
	}
	if code := first.Wait(t, 60*time.Second); code != 0 {
		t.Fatalf("first runner: exit %d\n%s", code, first.Stderr())
	}
	if rows := clitest.WholeCSV(t, filepath.Join(dir, "out/test.csv")); len(rows) != 1 || rows[0].Status != results.StatusOK {
		t.Fatalf("rows: %+v", rows)
	}
}
