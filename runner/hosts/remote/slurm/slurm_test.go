package slurm_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/hosts/deploy"
	"rdmasweep/runner/hosts/hostfacts"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/remote/agent"
	"rdmasweep/runner/hosts/remote/hosttest"
	"rdmasweep/runner/hosts/remote/slurm"
	"rdmasweep/testbed/slurmlab"
	"rdmasweep/testbed/testenv"
	"rdmasweep/testbed/wiretap"
)

// helperEnv makes the test binary a runner stand-in that starts a step and
// waits to be killed (see TestRunnerKilled).
const helperEnv = "RDMASWEEP_SLURM_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		helper()
		return
	}
	os.Exit(m.Run())
}

func helper() {
	ctx := context.Background()
	a, err := slurm.FromEnv(ctx, os.Environ())
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	h, err := a.Host(a.Nodes()[len(a.Nodes())-1], slurm.HostOptions{})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	if _, err := h.Start(ctx, []string{"sleep", "300"}); err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println("started")
	select {}
}

// lab is a running cluster with one allocation and the Allocation the
// package sees inside it.
type lab struct {
	c   *slurmlab.Cluster
	job *slurmlab.Job
	a   *slurm.Allocation
}

func startLab(t *testing.T, opts slurmlab.AllocOptions) *lab {
	t.Helper()
	c := slurmlab.Start(t)
	job := c.Allocate(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := slurm.FromEnv(ctx, append(os.Environ(), job.Env...))
	if err != nil {
		t.Fatalf("FromEnv inside job %s: %v", job.ID, err)
	}
	return &lab{c: c, job: job, a: a}
}

// leftovers lists live steps, processes on any node other than slurmd,
// and srun processes of this test.
func (l *lab) leftovers(t *testing.T) []string {
	var out []string
	for _, s := range l.job.Steps(t) {
		out = append(out, "step "+s+" (squeue -s)")
	}
	out = append(out, l.c.Leftovers(t)...)
	srun, _ := exec.LookPath("srun")
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		exe, _ := os.Readlink(p + "/exe")
		stat, _ := os.ReadFile(p + "/stat")
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if exe == srun && len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) && f[0] != "Z" {
			out = append(out, "srun "+filepath.Base(p))
		}
	}
	return out
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestSlurm runs the remote.Host suite, and what only Slurm does, on a
// real cluster inside an allocation of whole nodes.
func TestSlurm(t *testing.T) {
	l := startLab(t, slurmlab.AllocOptions{Exclusive: true})
	start := time.Now()
	t.Run("Conformance", func(t *testing.T) {
		hosttest.Run(t, hosttest.Target{
			New: func(t *testing.T) remote.Host {
				h, err := l.a.Host("n2", slurm.HostOptions{Log: func(s string) { t.Logf("slurm: %s", s) }})
				if err != nil {
					t.Fatal(err)
				}
				return h
			},
			Dir:       slurmlab.LocalDir + "/hosttest",
			Leftovers: l.leftovers,
		})
	})
	t.Logf("conformance suite on Slurm: %v", time.Since(start).Round(time.Millisecond))
	t.Run("Nodes", func(t *testing.T) { testNodes(t, l) })
	t.Run("Interrupt", func(t *testing.T) { testInterrupt(t, l) })
	t.Run("RunnerKilled", func(t *testing.T) { testRunnerKilled(t, l) })
	t.Run("Deploy", func(t *testing.T) { testDeploy(t, l) })
	t.Run("DeployNode", func(t *testing.T) { testDeployNode(t, l) })
	t.Run("DeployForeignDir", func(t *testing.T) { testDeployForeignDir(t, l) })
	t.Run("Prestart", func(t *testing.T) { testPrestart(t, l) })
	t.Run("AttachSecurity", func(t *testing.T) { testAttachSecurity(t, l) })
	t.Run("Sniffed", func(t *testing.T) { testSniffed(t, l) })
	t.Run("CPUBind", func(t *testing.T) { testCPUBind(t, l) })
	t.Run("LaunchFailure", func(t *testing.T) { testLaunchFailure(t, l) })
	t.Run("StartCancelled", func(t *testing.T) { testStartCancelled(t, l) })
}

// A node whose slurmd hangs: Start gives up when its ctx ends, and once
// the node is back nothing of the attempt is left.
func testStartCancelled(t *testing.T, l *lab) {
	n := l.c.Nodes["n3"]
	h, err := l.a.Host("n3", slurm.HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	syscall.Kill(n.SlurmdPid, syscall.SIGSTOP)
	stopped := true
	defer func() {
		if stopped {
			syscall.Kill(n.SlurmdPid, syscall.SIGCONT)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err = h.Start(ctx, []string{"sleep", "300"})
	el := time.Since(start)
	syscall.Kill(n.SlurmdPid, syscall.SIGCONT)
	stopped = false
	if !errors.Is(err, context.DeadlineExceeded) || el > 5*time.Second {
		t.Errorf("Start on a hung node = %v after %v, want the deadline within 5s", err, el)
	}
	t.Logf("Start on a hung node gave up after %v", el.Round(time.Millisecond))
	hosttest.WaitNoLeftovers(t, l.leftovers)
}

func testNodes(t *testing.T, l *lab) {
	if got := l.a.Nodes(); !slices.Equal(got, slurmlab.NodeNames) {
		t.Errorf("Nodes() = %q, want %q", got, slurmlab.NodeNames)
	}
	if m := l.a.Missing("n3", "n1"); m != nil {
		t.Errorf("Missing(n3, n1) = %q, want none", m)
	}
	// Each host's commands run on its node.
	for _, n := range slurmlab.NodeNames {
		h, err := l.a.Host(n, slurm.HostOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := h.Run(ctxFor(t), []string{"hostname"})
		if err != nil || string(out) != n+"\n" {
			t.Errorf("hostname on %s = %q, %v", n, out, err)
		}
		if h.Name() != n {
			t.Errorf("Name() = %q, want %q", h.Name(), n)
		}
		h.Close()
	}
}

// An interrupted run: the runner asks its node to stop (SIGTERM), which
// this one ignores, as do its children, then gives up and closes the
// host. Nothing may be left: no step in squeue, no process on the node.
func testInterrupt(t *testing.T, l *lab) {
	ctx := ctxFor(t)
	h, err := l.a.Host("n3", slurm.HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The ignored TERM is inherited by both sleeps; the leader execs one,
	// so it ends by KILL whichever process Slurm kills first.
	p, err := h.Start(ctx, []string{"sh", "-c", `trap "" TERM; sleep 300 & echo ready; exec sleep 301`})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	go io.Copy(io.Discard, p.Stderr())
	if line, _ := bufio.NewReader(p.Stdout()).ReadString('\n'); line != "ready\n" {
		t.Fatalf("first line %q", line)
	}
	if steps := l.job.Steps(t); len(steps) != 1 {
		t.Fatalf("live steps while the command runs = %q, want its one step", steps)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal TERM: %v", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- p.Wait() }()
	select {
	case err := <-waited:
		t.Fatalf("a command ignoring TERM ended: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	start := time.Now()
	if err := h.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	t.Logf("Close with a step running took %v", time.Since(start).Round(time.Millisecond))
	var ee *remote.ExitError
	if err := <-waited; !errors.As(err, &ee) || ee.Signal != "KILL" {
		t.Errorf("Wait after Close = %v, want killed by KILL", err)
	}
	if steps := l.job.Steps(t); len(steps) != 0 {
		t.Errorf("steps after Close: %q", steps)
	}
	if left := l.c.Leftovers(t); len(left) != 0 {
		t.Errorf("processes left on the nodes after Close: %q", left)
	}
	if _, err := h.Run(ctx, []string{"true"}); !errors.Is(err, slurm.ErrClosed) {
		t.Errorf("Run after Close = %v, want ErrClosed", err)
	}
}

// A runner killed outright (SIGKILL, no cleanup of its own) still takes
// its steps with it: srun gets SIGTERM when its parent dies, and cancels
// its step.
func testRunnerKilled(t *testing.T, l *lab) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), l.job.Env...), helperEnv+"=1")
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "started\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %q", line)
	}
	if steps := l.job.Steps(t); len(steps) != 1 {
		t.Errorf("steps while the helper runs = %q, want one", steps)
	}
	cmd.Process.Kill()
	cmd.Wait()
	start := time.Now()
	hosttest.WaitNoLeftovers(t, func(t *testing.T) []string {
		return append(l.job.Steps(t), l.c.Leftovers(t)...)
	})
	t.Logf("step and task gone %v after the runner was killed", time.Since(start).Round(time.Millisecond))
}

// Deploy to a node-local path: every node gets the file (checked outside
// Slurm, in each node's own mount namespace), the login side does not,
// each Host reports for its own node, one node's stale copy is found and
// replaced, and Hosts uploading at once share the broadcast.
func testDeploy(t *testing.T, l *lab) {
	ctx := ctxFor(t)
	local := filepath.Join(t.TempDir(), "node")
	data := make([]byte, 16<<20)
	rand.Read(data)
	if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	target := slurmlab.LocalDir + "/deploy/node"
	hosts := map[string]*slurm.Host{}
	for _, n := range slurmlab.NodeNames {
		h, err := l.a.Host(n, slurm.HostOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		hosts[n] = h
	}
	start := time.Now()
	res, err := hosts["n1"].Upload(ctx, local, target)
	if err != nil || res.UpToDate || res.BytesSent != int64(len(data)) {
		t.Fatalf("Upload 16 MiB = %+v, %v", res, err)
	}
	t.Logf("broadcast of 16 MiB to 3 nodes: %v", time.Since(start).Round(time.Millisecond))
	check := func(when string) {
		t.Helper()
		for _, n := range slurmlab.NodeNames {
			out, err := l.c.Nodes[n].Output("sh", "-c", "sha256sum "+target+" && stat -c %a "+target+" && ls -A "+filepath.Dir(target))
			if want := hex.EncodeToString(sum[:]) + "  " + target + "\n755\nnode\n"; err != nil || out != want {
				t.Errorf("%s, on %s: %q, %v; want %q", when, n, out, err, want)
			}
		}
	}
	check("after the broadcast")
	if _, err := os.Stat(target); err == nil {
		t.Errorf("%s exists on the login side too: the node-local directory is shared", target)
	}
	// n2's own Upload, after n1's, reports what n1's broadcast sent it;
	// the next one finds every node up to date and sends nothing.
	res, err = hosts["n2"].Upload(ctx, local, target)
	if err != nil || res.UpToDate || res.BytesSent != int64(len(data)) {
		t.Errorf("n2's Upload after n1's broadcast = %+v, %v; want the %d bytes that broadcast sent it", res, err, len(data))
	}
	res, err = hosts["n2"].Upload(ctx, local, target)
	if err != nil || !res.UpToDate || res.BytesSent != 0 {
		t.Errorf("Upload when every node has the file = %+v, %v", res, err)
	}
	// One node's copy differs: the file goes out again, and each Host
	// reports for its own node.
	if _, err := l.c.Nodes["n2"].Output("sh", "-c", "echo stale > "+target); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := map[string]remote.UploadResult{}
	var mu sync.Mutex
	for n, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := h.Upload(ctx, local, target)
			if err != nil {
				t.Errorf("Upload from %s with n2 stale: %v", n, err)
			}
			mu.Lock()
			results[n] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	size := int64(len(data))
	want := map[string]remote.UploadResult{"n1": {UpToDate: true, BytesSent: size}, "n2": {BytesSent: size}, "n3": {UpToDate: true, BytesSent: size}}
	for n, w := range want {
		if results[n] != w {
			t.Errorf("Upload for %s with n2 stale = %+v, want %+v", n, results[n], w)
		}
	}
	check("after n2's stale copy was replaced")
}

// A deploy directory another user made first on one node (issue 31) is
// refused, naming it, its owner and its mode, and nothing is sent or run
// there; a deployed file another user comes to own is never run.
func testDeployForeignDir(t *testing.T, l *lab) {
	ctx := ctxFor(t)
	local := filepath.Join(t.TempDir(), "node")
	marker := slurmlab.LocalDir + "/foreign-ran"
	if err := os.WriteFile(local, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := slurmlab.LocalDir + "/foreign"
	target := dir + "/node"
	if _, err := l.c.Nodes["n2"].Output("sh", "-c", `install -d -o nobody -m 755 "$1" && cp "$2" "$1/node" && chown nobody "$1/node"`, "sh", dir, local); err != nil {
		t.Fatal(err)
	}
	h, err := l.a.Host("n1", slurm.HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	_, err = h.Upload(ctx, local, target)
	var unsafe *remote.UnsafePathError
	if !errors.As(err, &unsafe) || unsafe.Path != dir || unsafe.Owner != "nobody" || unsafe.Mode != "drwxr-xr-x" {
		t.Fatalf("broadcast into nobody's directory on n2 = %v; want an UnsafePathError naming %s, nobody, drwxr-xr-x", err, dir)
	}
	if out, _ := l.c.Nodes["n2"].Output("ls", "-A", dir); out != "node\n" {
		t.Errorf("%s on n2 holds %q after the refusal; want only the planted node", dir, out)
	}
	for _, n := range slurmlab.NodeNames {
		if _, err := l.c.Nodes[n].Output("test", "-e", marker); err == nil {
			t.Errorf("the planted node ran on %s", n)
		}
	}

	// Deployed, then another user's on one node: every step naming it
	// there is refused before it runs.
	own := slurmlab.LocalDir + "/own/node"
	if _, err := h.Upload(ctx, local, own); err != nil {
		t.Fatal(err)
	}
	if _, err := l.c.Nodes["n1"].Output("chown", "nobody", own); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Run(ctx, []string{own}); !errors.As(err, &unsafe) || unsafe.Why != "another user owns it" {
		t.Errorf("run the deployed node once nobody owns it = %v; want an UnsafePathError", err)
	}
	if _, err := l.c.Nodes["n1"].Output("test", "-e", marker); err == nil {
		t.Errorf("the node another user owns ran")
	}
}

// The runner's own facts and deploy work through Slurm steps: each node's
// facts come from that node, and the real node binary, checked against the
// architecture they report, goes to every node and runs there.
func testDeployNode(t *testing.T, l *lab) {
	ctx := ctxFor(t)
	bin := filepath.Join(t.TempDir(), "node")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "rdmasweep/node")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build node: %v: %s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	target := slurmlab.LocalDir + "/bin/node"
	var wg sync.WaitGroup
	for _, n := range slurmlab.NodeNames {
		h, err := l.a.Host(n, slurm.HostOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := hostfacts.Collect(ctx, h, hostfacts.Query{})
			if err != nil || f.Hostname != n || f.Arch == "" {
				t.Errorf("facts of %s: hostname %q, arch %q, %v", n, f.Hostname, f.Arch, err)
				return
			}
			res, err := deploy.Deploy(ctx, h, bin, target, f.Arch)
			if err != nil || res.UpToDate {
				t.Errorf("deploy node to %s: %+v, %v", n, res, err)
				return
			}
			f, err = hostfacts.Collect(ctx, h, hostfacts.Query{NodePath: target})
			if err != nil || !f.Node.Present || f.Node.SHA256 != hex.EncodeToString(sum[:]) || !slices.Contains(f.Node.Transports, "tcp") {
				t.Errorf("facts of %s after the deploy: node %+v, %v", n, f.Node, err)
			}
		}()
	}
	wg.Wait()
}

// A node started ahead of its command line (Prestart, the deployed node of
// DeployNode) takes the command, and its control lines, over its own
// connection to the runner: srun gives it no stdin, so a server that
// reads its secret and stays up until the connection closes shows that
// the lines came that way. Its step then serves the next command too. A
// pending never started, or given another program, or whose node is
// missing, leaves nothing behind once the Host is closed.
func testPrestart(t *testing.T, l *lab) {
	ctx := ctxFor(t)
	node := slurmlab.LocalDir + "/bin/node"
	var mu sync.Mutex
	var slurmLines []string
	h, err := l.a.Host("n2", slurm.HostOptions{Log: func(s string) {
		mu.Lock()
		slurmLines = append(slurmLines, s)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	pd := h.Prestart(ctx, node)
	p, err := pd.Start(ctx, []string{node, "serve", "--transport", "tcp", "--file", slurmlab.LocalDir + "/prestart.dat",
		"--file-size", "1MiB", "--create", "--cache", "warm", "--listen", "127.0.0.1", "--port", "0",
		"--accept-timeout", "30s", "--control-stdin"})
	if err != nil {
		t.Fatalf("Start a prestarted node: %v", err)
	}
	go io.Copy(io.Discard, p.Stderr())
	if _, err := io.WriteString(p.Stdin(), `{"secret":"`+strings.Repeat("ab", 32)+`"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(p.Stdout())
	var events []string
	for sc.Scan() && !strings.Contains(sc.Text(), `"type":"ready"`) {
		events = append(events, sc.Text())
	}
	if len(events) == 0 || !strings.Contains(events[0], `"role":"serve"`) {
		t.Fatalf("prestarted serve printed %q before ready (or exited)", events)
	}
	p.Stdin().Close()
	for sc.Scan() {
		events = append(events, sc.Text())
	}
	var ee *remote.ExitError
	if err := p.Wait(); !errors.As(err, &ee) || ee.Status != 1 || !strings.Contains(events[len(events)-1], "stdin closed") {
		t.Errorf("after its connection closed: %v, last event %q", err, events[len(events)-1])
	}

	// The step stays, idle, for the next command: a second Prestart
	// starts no step, and its command runs in the same step.
	before, err := l.a.Steps(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err = h.Prestart(ctx, node).Start(ctx, []string{node, "version"})
	if err != nil {
		t.Fatalf("Start of a second command on the prestarted node: %v", err)
	}
	go io.Copy(io.Discard, p.Stderr())
	out, _ := io.ReadAll(p.Stdout())
	if err := p.Wait(); err != nil || !strings.HasPrefix(string(out), "node ") {
		t.Errorf("a second command in the same step: %q, %v", out, err)
	}
	if after, err := l.a.Steps(ctx); err != nil || !slices.Equal(after, before) {
		t.Errorf("steps before the second command %v, after %v (%v): want the same step", before, after, err)
	}
	if err := h.Prestart(ctx, node).Close(); err != nil {
		t.Errorf("Close of a pending never started: %v", err)
	}
	p, err = h.Prestart(ctx, node).Start(ctx, []string{"sh", "-c", "echo other"})
	if err != nil {
		t.Fatalf("Start of another program through a pending: %v", err)
	}
	if out, _ := io.ReadAll(p.Stdout()); string(out) != "other\n" || p.Wait() != nil {
		t.Errorf("another program through a pending: %q, %v", out, p.Wait())
	}
	p, err = h.Prestart(ctx, slurmlab.LocalDir+"/missing/node").Start(ctx, []string{slurmlab.LocalDir + "/missing/node", "version"})
	if err == nil {
		go io.Copy(io.Discard, p.Stdout())
		go io.Copy(io.Discard, p.Stderr())
		err = p.Wait()
	}
	if err == nil {
		t.Errorf("a prestarted node that is not there: no error")
	}
	// The idle steps are the Host's until its Close, where they end by
	// themselves: nothing killed or cancelled for Slurm to report.
	mu.Lock()
	n := len(slurmLines)
	mu.Unlock()
	if err := h.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	mu.Lock()
	if len(slurmLines) > n {
		t.Errorf("Slurm's lines at Close: %q", slurmLines[n:])
	}
	mu.Unlock()
	hosttest.WaitNoLeftovers(t, l.leftovers)
}

// --cpu-bind from a CPU list pins the task where the node's kernel says.
func testCPUBind(t *testing.T, l *lab) {
	ctx := ctxFor(t)
	ncpu, err := l.c.Nodes["n1"].Output("nproc")
	if err != nil {
		t.Fatal(err)
	}
	last := strconv.Itoa(mustAtoi(t, strings.TrimSpace(ncpu)) - 1)
	lists := []string{"0"}
	if last != "0" {
		lists = append(lists, last, "0-"+last)
	}
	for _, cpus := range lists {
		h, err := l.a.Host("n1", slurm.HostOptions{CPUs: cpus})
		if err != nil {
			t.Fatal(err)
		}
		out, err := h.Run(ctx, []string{"sh", "-c", "grep Cpus_allowed_list /proc/self/status"})
		if want := "Cpus_allowed_list:\t" + cpus + "\n"; err != nil || string(out) != want {
			t.Errorf("pinned to %s: %q, %v; want %q", cpus, out, err, want)
		}
		h.Close()
	}
	if _, err := l.a.Host("n1", slurm.HostOptions{CPUs: "3-1"}); err == nil || !strings.Contains(err.Error(), `"3-1"`) {
		t.Errorf("Host with cpus 3-1 = %v, want an error naming it", err)
	}
}

// A step Slurm refuses to start is a Start error that says why (Slurm's
// own words), and leaves nothing behind.
func testLaunchFailure(t *testing.T, l *lab) {
	ctx := ctxFor(t)
	h, err := l.a.Host("n1", slurm.HostOptions{CPUs: "4095"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	_, err = h.Start(ctx, []string{"true"})
	if err == nil || !strings.Contains(err.Error(), "srun on n1") || !strings.Contains(err.Error(), "cpu bind") {
		t.Errorf("Start pinned to a CPU the node lacks = %v, want srun's refusal", err)
	}
	hosttest.WaitNoLeftovers(t, l.leftovers)
}

// TestSlurmPartialAllocation: in an allocation of two of the three nodes,
// the third is named as missing, and CPUs the job does not hold on a node
// are refused with the way out.
func TestSlurmPartialAllocation(t *testing.T) {
	l := startLab(t, slurmlab.AllocOptions{Nodes: 2})
	nodes := l.a.Nodes()
	if len(nodes) != 2 {
		t.Fatalf("Nodes() = %q, want 2", nodes)
	}
	var other string
	for _, n := range slurmlab.NodeNames {
		if !slices.Contains(nodes, n) {
			other = n
		}
	}
	if m := l.a.Missing(slurmlab.NodeNames...); !slices.Equal(m, []string{other}) {
		t.Errorf("Missing(n1, n2, n3) in %q = %q, want [%s]", nodes, m, other)
	}
	if m := l.a.Missing("n7", nodes[0], "n7"); !slices.Equal(m, []string{"n7"}) {
		t.Errorf("Missing(n7, %s, n7) = %q, want [n7] once", nodes[0], m)
	}
	if _, err := l.a.Host(other, slurm.HostOptions{}); err == nil || !strings.Contains(err.Error(), l.job.ID) || !strings.Contains(err.Error(), nodes[0]) {
		t.Errorf("Host(%s) outside the job = %v, want an error naming the job and its nodes", other, err)
	}
	// Not whole nodes: the job holds one CPU per node, and binding to
	// another is refused, with the fix in the message.
	// That needs a node with a second CPU: the lab's nodes have the
	// machine's (a node configured with more is drained).
	ncpu, err := l.c.Nodes[nodes[0]].Output("nproc")
	if err != nil {
		t.Fatalf("nproc on %s: %v", nodes[0], err)
	}
	if strings.TrimSpace(ncpu) == "1" {
		testenv.Skip(t, "the refusal to bind outside the job's CPUs needs nodes with 2 CPUs, and this machine has 1")
	}
	h, err := l.a.Host(nodes[0], slurm.HostOptions{CPUs: "0-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	_, err = h.Run(ctxFor(t), []string{"true"})
	if err == nil || !strings.Contains(err.Error(), "CPU binding outside of job step allocation") || !strings.Contains(err.Error(), "--exclusive") {
		t.Errorf("pinning outside the job's CPUs = %v, want Slurm's refusal and the hint", err)
	}
}

// Outside an allocation FromEnv says so, whatever else is set.
func TestFromEnvOutsideAllocation(t *testing.T) {
	_, err := slurm.FromEnv(context.Background(), []string{"PATH=" + os.Getenv("PATH"), "SLURM_CONF=/nonexistent"})
	if !errors.Is(err, slurm.ErrNoAllocation) || !strings.Contains(err.Error(), "salloc") {
		t.Errorf("FromEnv without SLURM_JOB_ID = %v, want ErrNoAllocation with a hint", err)
	}
	_, err = slurm.FromEnv(context.Background(), []string{"SLURM_JOB_ID=7"})
	if !errors.Is(err, slurm.ErrNoAllocation) || !strings.Contains(err.Error(), "SLURM_JOB_NODELIST") {
		t.Errorf("FromEnv without a node list = %v", err)
	}
}

func TestCPUBind(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"0", "map_cpu:0", ""},
		{"7", "map_cpu:7", ""},
		{"2,2", "map_cpu:2", ""},
		{"0-3", "mask_cpu:0xf", ""},
		{"0-3,8", "mask_cpu:0x10f", ""},
		{"1,3", "mask_cpu:0xa", ""},
		{"64", "map_cpu:64", ""},
		{"0,64", "mask_cpu:0x10000000000000001", ""},
		{"", "", "empty"},
		{"3-1", "", `"3-1" is not a CPU`},
		{"a", "", `"a" is not a CPU`},
		{"0,,1", "", `"" is not a CPU`},
		{"-1", "", `"-1" is not a CPU`},
		{"99999", "", "ids 0 to"},
	} {
		got, err := slurm.CPUBind(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("CPUBind(%q) = %q, %v; want an error containing %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("CPUBind(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The runner listens for its nodes to attach on the address they reach it
// at, not on every interface; and a node attached to someone who answers
// in the runner's place, without the token, runs nothing and says why.
func testAttachSecurity(t *testing.T, l *lab) {
	ctx := ctxFor(t)
	node := slurmlab.LocalDir + "/bin/node"
	h, err := l.a.Host("n1", slurm.HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	p, err := h.Prestart(ctx, node).Start(ctx, []string{node, "version"})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stderr())
	io.Copy(io.Discard, p.Stdout())
	p.Wait()
	addrs := l.a.AttachAddrs()
	if len(addrs) == 0 {
		t.Fatal("no attach listener after a prestarted command")
	}
	var ip string
	for _, a := range addrs {
		ta := a.(*net.TCPAddr)
		if ta.IP.IsUnspecified() {
			t.Errorf("the runner listens for nodes to attach on %v: every interface", a)
		}
		ip = ta.IP.String()
	}

	// More idle connections than the listener keeps waiting for a hello:
	// those past the bound are closed at once, and the node's own
	// connection still gets its command.
	const extra = 8
	closed := make(chan struct{}, agent.MaxPendingHellos+extra)
	for range agent.MaxPendingHellos + extra {
		c, err := net.Dial("tcp", addrs[0].String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go func() { io.Copy(io.Discard, c); closed <- struct{}{} }()
	}
	p, err = h.Prestart(ctx, node).Start(ctx, []string{node, "version"})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stderr())
	if out, _ := io.ReadAll(p.Stdout()); p.Wait() != nil || !strings.HasPrefix(string(out), "node ") {
		t.Errorf("node version through the agent past %d idle connections: %q", agent.MaxPendingHellos+extra, out)
	}
	timeout := time.After(2 * time.Second)
	for n := 0; n < extra; n++ {
		select {
		case <-closed:
		case <-timeout:
			t.Fatalf("%d idle connections closed within 2 s, want at least %d", n, extra)
		}
	}

	// An impostor on the runner's address: it answers the hello with a
	// command line of its own, and no proof.
	fake, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	key := slurmlab.LocalDir + "/stolen"
	go func() {
		c, err := fake.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		bufio.NewReader(c).ReadBytes('\n')
		b, _ := json.Marshal(map[string]any{"argv": []string{"serve", "--transport", "tcp", "--file", key,
			"--file-size", "4KiB", "--create", "--cache", "warm", "--listen", "0.0.0.0", "--port", "0", "--accept-timeout", "30s"}})
		c.Write(append(b, '\n'))
		io.Copy(io.Discard, c)
	}()
	p, err = h.Start(ctx, []string{"env", results.AttachTokenEnv + "=t0ken", node, "attach", "--runner", fake.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	var stderr []byte
	done := make(chan struct{})
	go func() { stderr, _ = io.ReadAll(p.Stderr()); close(done) }()
	io.Copy(io.Discard, p.Stdout())
	<-done
	err = p.Wait()
	want := "node: error: attach: the runner at " + fake.Addr().String() + " did not prove it holds the token; nothing was run"
	if err == nil || !strings.Contains(string(stderr), want) {
		t.Errorf("node attach answered by an impostor: %v, stderr %q; want an error saying %q", err, stderr, want)
	}
	if out, err := h.Run(ctx, []string{"sh", "-c", "ls " + key + "* 2>&1; true"}); err != nil || !strings.Contains(string(out), "No such file") {
		t.Errorf("the impostor's serve ran: %s (%v)", out, err)
	}
}

// What a host on the cluster's network sees while the runner drives a node
// through its agent (the reproduction: a sniffer on the bridge):
// srun's launch carries the agent's token only as a MUNGE credential,
// and neither the token, the point's secret, the command line nor node's
// events appear anywhere on the wire. Then the sniffer does what the
// reproduction did: it walks the key chain from every value it saw, seals
// a command under the best key it has, and injects it into the agent's
// idle connection with the sequence numbers it saw. The agent drops the
// connection and nothing runs.
func testSniffed(t *testing.T, l *lab) {
	ctx := ctxFor(t)
	node := slurmlab.LocalDir + "/bin/node"
	tap := wiretap.Start(t, slurmlab.Bridge)
	h, err := l.a.Host("n1", slurm.HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	tag, secret := randHex(6), randHex(32)
	p, err := h.Prestart(ctx, node).Start(ctx, []string{node, "serve", "--transport", "tcp", "--file", slurmlab.LocalDir + "/sniffme-" + tag + ".dat",
		"--file-size", "1MiB", "--create", "--cache", "warm", "--listen", "127.0.0.1", "--port", "0", "--accept-timeout", "30s", "--control-stdin"})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, p.Stderr())
	io.WriteString(p.Stdin(), `{"secret":"`+secret+`"}`+"\n")
	sc := bufio.NewScanner(p.Stdout())
	for sc.Scan() && !strings.Contains(sc.Text(), `"type":"ready"`) {
	}
	p.Stdin().Close()
	for sc.Scan() {
	}
	p.Wait()

	// The agent attaches again at once, and waits for its next command.
	var attach string
	for _, a := range l.a.AttachAddrs() {
		attach = a.String()
	}
	var idle *wiretap.Flow
	for deadline := time.Now().Add(10 * time.Second); idle == nil && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		idle = idleAgent(tap.Flows(), attach)
	}
	if idle == nil {
		t.Fatalf("the tap saw no idle agent connection to %s", attach)
	}
	wire := tap.All()
	if !bytes.Contains(wire, []byte(results.AttachCredEnv+"=MUNGE:")) || !bytes.Contains(wire, []byte(`"nonce":`)) {
		t.Fatalf("the tap saw no launch with a credential, or no hello: it is not on the path (%d bytes)", len(wire))
	}
	token := decodeSniffedCred(t, l, wire)
	for what, s := range map[string]string{"token": token, "secret": secret, "command's file": "sniffme-" + tag,
		"command's flags": "--control-stdin", "events": `"type":"ready"`, "clear token": results.AttachTokenEnv} {
		raw, _ := hex.DecodeString(s)
		if bytes.Contains(wire, []byte(s)) || len(raw) >= 16 && bytes.Contains(wire, raw) {
			t.Errorf("the wire holds the %s (%q)", what, s)
		}
	}

	// The sniffer's attack on the idle connection.
	planted := slurmlab.LocalDir + "/planted-" + tag
	var injected bytes.Buffer
	nonce, key := sniffedKey(tap.Flows(), wire, attach, idle)
	key.RunnerChannel(nil, &injected, nonce).SendCommand([]string{"prepare", "--transport", "tcp", "--file", planted, "--file-size", "4KiB", "--create", "--cache", "warm"})
	tap.Inject(t, attach, idle.Src, injected.Bytes())
	var closed bool
	for deadline := time.Now().Add(5 * time.Second); !closed && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, sg := range tap.Segments() {
			from := net.JoinHostPort(sg.Src.String(), strconv.Itoa(int(sg.SrcPort)))
			closed = closed || from == idle.Src && sg.Flags&(wiretap.FIN|wiretap.RST) != 0
		}
	}
	if !closed {
		t.Errorf("the agent did not drop its connection after the injection: it did not reach it")
	}
	if out, err := h.Run(ctx, []string{"sh", "-c", "ls " + planted + " 2>&1; true"}); err != nil || !strings.Contains(string(out), "No such file") {
		t.Errorf("the injected command ran: %s (%v)", out, err)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// idleAgent is the last connection to the runner's attach address whose
// hello the tap saw, and the runner acknowledged, and to which the runner
// has sent nothing.
func idleAgent(flows map[[2]string]*wiretap.Flow, attach string) *wiretap.Flow {
	var idle *wiretap.Flow
	for k, f := range flows {
		back := flows[[2]string{k[1], k[0]}]
		if k[1] == attach && f.SawSYN && bytes.HasSuffix(f.Data, []byte("}\n")) && back != nil && back.SawSYN && len(back.Data) == 0 && back.Last.Ack == f.Next {
			idle = f
		}
	}
	return idle
}

// decodeSniffedCred decodes the credential the tap saw with the lab's
// munged, as the runner's own user: its payload, the token (a replayed
// credential still shows its payload).
func decodeSniffedCred(t *testing.T, l *lab, wire []byte) string {
	_, rest, _ := bytes.Cut(wire, []byte(results.AttachCredEnv+"="))
	end := bytes.IndexByte(rest[len("MUNGE:"):], ':')
	cred := rest[:len("MUNGE:")+end+1]
	cmd := exec.Command("unmunge", "--socket="+filepath.Join(l.c.Dir, "munge", "munge.socket"))
	cmd.Stdin = bytes.NewReader(cred)
	out, _ := cmd.Output()
	_, payload, ok := bytes.Cut(out, []byte("\n\n"))
	if !ok || len(bytes.TrimSpace(payload)) != 64 {
		t.Fatalf("unmunge of the sniffed credential %q: %q", cred, out)
	}
	return string(bytes.TrimSpace(payload))
}

// sniffedKey is the attacker's best key for the idle connection: each
// value it saw (an environment variable of ours in srun's launch, a hex
// run) walked along the hellos it saw, as the key chain moves; the one
// whose walk ends at the idle hello's ID, else the last tried.
func sniffedKey(flows map[[2]string]*wiretap.Flow, wire []byte, attach string, idle *wiretap.Flow) ([]byte, results.AttachKey) {
	var hellos []results.AttachHello
	for k, f := range flows {
		if k[1] == attach && f.SawSYN {
			if h, err := results.ReadHello(bufio.NewReader(bytes.NewReader(f.Data))); err == nil {
				hellos = append(hellos, h)
			}
		}
	}
	last, _ := results.ReadHello(bufio.NewReader(bytes.NewReader(idle.Data)))
	nonce, _ := last.HelloNonce()
	var candidates [][]byte
	for _, m := range regexp.MustCompile(`RDMASWEEP_ATTACH_[A-Z]+=([^\x00\s]+)`).FindAllSubmatch(wire, -1) {
		candidates = append(candidates, m[1])
	}
	candidates = append(candidates, regexp.MustCompile(`[0-9a-f]{32,}`).FindAll(wire, -1)...)
	var key results.AttachKey
	for _, c := range candidates {
		key = results.AttachKey(c)
		for moved := true; moved && key.ID() != last.ID; {
			moved = false
			for _, h := range hellos {
				if h.ID == key.ID() {
					n, _ := h.HelloNonce()
					key, moved = key.Next(n), true
				}
			}
		}
		if key.ID() == last.ID {
			break
		}
	}
	return nonce, key
}
