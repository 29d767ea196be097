// Package slurmlab starts a real Slurm cluster for tests: Debian's munged,
// slurmctld and three slurmd, each slurmd in a Linux network namespace of
// its own, joined by a veth pair to a bridge in the root namespace, where
// slurmctld and the test (with srun, sbcast, squeue) run.
//
// Rules it keeps:
//   - Addresses come only from 198.19.0.0/24: the bridge (and slurmctld)
//     is .254, the nodes n1, n2, n3 are .1, .2, .3. Not 198.51.100.0/24
//     nor 198.18.N.0/24 (the SSH test hosts' instances), and never
//     192.0.2.0/24 (this kind of machine's uplink) or 203.0.113.0/24 (the
//     package registries' route).
//   - Nothing of the machine's own is touched: a private slurm.conf that
//     every command reads through SLURM_CONF (daemons through -f), a
//     private munged with its own key and socket, state and logs in a
//     temp dir. /etc/slurm, /etc/munge, /etc/hosts and the machine's
//     munged are left alone; slurm.conf's NodeAddr= spares name lookups.
//   - Each daemon has its own hostname (a UTS namespace): slurmctld checks
//     it is SlurmctldHost, slurmd takes its node name from it. Each slurmd
//     also has its own mount namespace with a tmpfs on /var/tmp (mode
//     1777) holding LocalDir (1777 too), so what sbcast puts there is
//     node-local, as /tmp is on a real cluster.
//   - Non-default ports (16817, 16818), so a machine's real Slurm is not
//     disturbed.
//   - One cluster at a time on the machine: Start takes an flock on
//     LockFile for the test's life. Whatever a crashed earlier run left
//     (daemons, namespaces, bridge, temp dirs) is removed at Start, found
//     by recorded process group and executable and by name prefix, never
//     by process name alone.
//   - It needs root and Debian's slurmctld, slurmd, slurm-client and munge
//     packages: without them the test skips (fails under CI=true) through
//     testbed/testenv.
package slurmlab

import (
	"bytes"
	"context"
	"crypto/rand"
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

	"golang.org/x/sys/unix"

	"rdmasweep/testbed/netns"
	"rdmasweep/testbed/testenv"
)

const (
	// VarTmp is node-local on every node (a tmpfs in the node's mount
	// namespace, mode 1777). The plan's default node.remote_path,
	// /var/tmp/rdmasweep-UID/node, lies inside it, as it does on the SSH
	// test hosts.
	VarTmp = "/var/tmp"
	// LocalDir is a sticky directory of root's in VarTmp, as /tmp is:
	// tests deploy to a directory of their own in it.
	LocalDir = VarTmp + "/rdmasweep"
	// Bridge is the bridge every node's veth is on, in the root
	// namespace: what crosses it is what a host on the cluster's network
	// sees.
	Bridge = "rswslbr"
	// LockFile serialises clusters across test processes.
	LockFile = "/run/rdmasweep-slurmlab.lock"

	netPrefix  = "198.19.0."
	subnet     = netPrefix + "0/24"
	bridgeAddr = netPrefix + "254"
	bridge     = Bridge
	nsPrefix   = "rswslurm-" // node namespaces
	vethPrefix = "rswslv"    // root-side veth names
	dirPrefix  = "rdmasweep-slurmlab-"
	pidRecord  = "/run/rdmasweep-slurmlab.pids"
	ctlName    = "ctl"
	ctlPort    = 16817
	slurmdPort = 16818

	slurmctld = "/usr/sbin/slurmctld"
	slurmd    = "/usr/sbin/slurmd"
	munged    = "/usr/sbin/munged"
)

// NodeNames are the cluster's nodes, in slurm.conf's order.
var NodeNames = []string{"n1", "n2", "n3"}

// Cluster is a running cluster. Everything is torn down by t.Cleanup.
type Cluster struct {
	// Dir holds slurm.conf, cgroup.conf, the munge key and socket, state
	// and logs (a temp dir, removed at the end).
	Dir string
	// Conf is the private slurm.conf; Env sets SLURM_CONF to it.
	Conf string
	// Env is what every Slurm client command needs on top of the test's
	// environment: SLURM_CONF.
	Env []string
	// Nodes by name.
	Nodes map[string]*Node
	// Up is how long Start took, from holding the lock to every node
	// idle.
	Up time.Duration

	daemons []*daemon // munged, slurmctld, then the slurmd
}

// Node is one slurmd in its namespace.
type Node struct {
	Name string
	Addr string
	// NS is the network namespace (for `ip netns exec`).
	NS string
	// Log is slurmd's log file.
	Log string
	// SlurmdPid is slurmd's pid (also its process group).
	SlurmdPid int
}

type daemon struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start builds the cluster and returns when every node is idle.
func Start(t testing.TB) *Cluster {
	t.Helper()
	needTools(t)
	netns.Lock(t, "slurmlab", LockFile)
	start := time.Now()
	cleanStale(t)
	netns.CheckSubnetFree(t, "slurmlab", subnet)

	c := newCluster(t)
	socket := c.startMunge(t)
	c.writeConf(t, socket)

	mustRun(t, "ip", "link", "add", bridge, "type", "bridge")
	mustRun(t, "ip", "addr", "add", bridgeAddr+"/24", "dev", bridge)
	mustRun(t, "ip", "link", "set", bridge, "up")

	ctl := exec.Command("sh", "-c", "hostname "+ctlName+" && exec "+slurmctld+" -D -c -f "+c.Conf)
	ctl.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUTS}
	c.startDaemon(t, "slurmctld", ctl)
	for i, name := range NodeNames {
		c.startNode(t, i, name)
	}
	c.waitIdle(t)
	c.Up = time.Since(start)
	t.Logf("slurmlab: cluster up in %v", c.Up.Round(time.Millisecond))
	return c
}

// needTools skips the test (fails it under CI) without root, Slurm or
// munge.
func needTools(t testing.TB) {
	t.Helper()
	testenv.NeedRoot(t)
	testenv.NeedTool(t, "ip", "iproute2")
	testenv.NeedTool(t, "unshare", "util-linux")
	testenv.NeedTool(t, "nsenter", "util-linux")
	for _, tool := range []string{"srun", "salloc", "sbcast", "squeue", "scancel", "scontrol", "sinfo"} {
		testenv.NeedTool(t, tool, "slurm-client")
	}
	for bin, pkg := range map[string]string{slurmctld: "slurmctld", slurmd: "slurmd", munged: "munge"} {
		if _, err := os.Stat(bin); err != nil {
			testenv.Skip(t, bin+" not found (apt-get install "+pkg+")")
		}
	}
}

// newCluster makes the cluster's directory, torn down with the test.
func newCluster(t testing.TB) *Cluster {
	t.Helper()
	// Not t.TempDir: munged refuses a socket below a directory others
	// cannot search, and t.TempDir's parent is 0700.
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir, Conf: filepath.Join(dir, "slurm.conf"), Nodes: map[string]*Node{}}
	c.Env = []string{"SLURM_CONF=" + c.Conf}
	t.Cleanup(func() {
		down := time.Now()
		c.teardown()
		os.RemoveAll(dir)
		t.Logf("slurmlab: cluster down in %v", time.Since(down).Round(time.Millisecond))
	})
	for _, d := range []string{"munge", "ctld", "spool"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(VarTmp, 0o1777); err != nil {
		t.Fatal(err)
	}
	return c
}

// startMunge starts munged with a key of its own and returns its socket.
func (c *Cluster) startMunge(t testing.TB) string {
	t.Helper()
	dir := c.Dir
	// munged run as root wants a key that root owns and only root reads;
	// Debian's /etc/munge/munge.key is the munge user's.
	key := make([]byte, 1024)
	rand.Read(key)
	keyFile := filepath.Join(dir, "munge.key")
	if err := os.WriteFile(keyFile, key, 0o400); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "munge", "munge.socket")
	c.startDaemon(t, "munged", exec.Command(munged, "--foreground",
		"--socket="+socket, "--key-file="+keyFile,
		"--pid-file="+filepath.Join(dir, "munged.pid"),
		"--log-file="+filepath.Join(dir, "munged.log"),
		"--seed-file="+filepath.Join(dir, "munged.seed")))
	waitFor(t, "munged's socket", 10*time.Second, func() error {
		_, err := os.Stat(socket)
		return err
	}, filepath.Join(dir, "munged.log"))
	return socket
}

// startNode makes node i, name, a namespace on the bridge with its own
// node-local tmpfs and hostname, and starts its slurmd.
func (c *Cluster) startNode(t testing.TB, i int, name string) {
	t.Helper()
	n := &Node{Name: name, Addr: netPrefix + strconv.Itoa(i+1), NS: nsPrefix + name,
		Log: filepath.Join(c.Dir, "slurmd-"+name+".log")}
	c.Nodes[name] = n
	veth := vethPrefix + strconv.Itoa(i+1)
	mustRun(t, "ip", "netns", "add", n.NS)
	mustRun(t, "ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", n.NS)
	mustRun(t, "ip", "link", "set", veth, "master", bridge)
	mustRun(t, "ip", "link", "set", veth, "up")
	mustRun(t, "ip", "-n", n.NS, "addr", "add", n.Addr+"/24", "dev", "eth0")
	mustRun(t, "ip", "-n", n.NS, "link", "set", "eth0", "up")
	mustRun(t, "ip", "-n", n.NS, "link", "set", "lo", "up")
	// ip netns exec, unshare and sh all exec: the pid is slurmd's.
	// unshare -m makes mounts private, so the tmpfs stays on this node.
	script := "mount -t tmpfs -o mode=1777 tmpfs " + VarTmp + " && install -d -m 1777 " + LocalDir +
		" && hostname " + name + " && exec " + slurmd + " -D -f " + c.Conf
	cmd := exec.Command("ip", "netns", "exec", n.NS, "unshare", "-u", "-m", "--propagation", "private", "sh", "-c", script)
	d := c.startDaemon(t, "slurmd "+name, cmd)
	n.SlurmdPid = d.cmd.Process.Pid
}

// waitIdle waits until sinfo says every node is idle.
func (c *Cluster) waitIdle(t testing.TB) {
	t.Helper()
	waitFor(t, "every node idle", 30*time.Second, func() error {
		out, err := c.Command(context.Background(), "sinfo", "-h", "-N", "-o", "%N %t").CombinedOutput()
		if err != nil {
			return fmt.Errorf("sinfo: %v: %s", err, out)
		}
		idle := 0
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[1] == "idle" {
				idle++
			}
		}
		if idle != len(NodeNames) {
			return fmt.Errorf("sinfo says:\n%s", out)
		}
		return nil
	}, filepath.Join(c.Dir, "slurmctld.log"))
}

// writeConf writes slurm.conf and cgroup.conf. The lines that matter on
// this kind of machine (no systemd, cgroup v1 hierarchies): linuxproc
// process tracking, cgroup/v1, %n in the per-node paths (three slurmd
// share the file system), and task/affinity, so --cpu-bind works.
func (c *Cluster) writeConf(t testing.TB, mungeSocket string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `ClusterName=rswlab
SlurmctldHost=%s(%s)
SlurmctldPort=%d
SlurmdPort=%d
AuthType=auth/munge
AuthInfo=socket=%s
CredType=cred/munge
SlurmUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
KillWait=5
StateSaveLocation=%[6]s/ctld
SlurmctldPidFile=%[6]s/slurmctld.pid
SlurmctldLogFile=%[6]s/slurmctld.log
SlurmdSpoolDir=%[6]s/spool/%%n
SlurmdPidFile=%[6]s/slurmd-%%n.pid
SlurmdLogFile=%[6]s/slurmd-%%n.log
`, ctlName, bridgeAddr, ctlPort, slurmdPort, mungeSocket, c.Dir)
	cpus := cpuCount()
	for i, name := range NodeNames {
		fmt.Fprintf(&b, "NodeName=%s NodeAddr=%s%d CPUs=%d State=UNKNOWN\n", name, netPrefix, i+1, cpus)
	}
	fmt.Fprintf(&b, "PartitionName=lab Nodes=%s Default=YES MaxTime=INFINITE State=UP\n", strings.Join(NodeNames, ","))
	if err := os.WriteFile(c.Conf, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// slurmd reads cgroup.conf beside slurm.conf.
	if err := os.WriteFile(filepath.Join(c.Dir, "cgroup.conf"), []byte("CgroupPlugin=cgroup/v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// cpuCount is what slurmd will find: a node configured with more CPUs
// than the machine has is drained ("Low socket*core*thread count").
func cpuCount() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err == nil && set.Count() > 0 {
		return set.Count()
	}
	return 1
}

// startDaemon starts cmd in its own process group, records the group for
// a later run's cleanup, and reaps it when it exits. The daemon dies with
// the test process (Pdeathsig), whatever happens to the test.
func (c *Cluster) startDaemon(t testing.TB, name string, cmd *exec.Cmd) *daemon {
	t.Helper()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("slurmlab: start %s: %v", name, err)
	}
	recordPgid(cmd.Process.Pid)
	d := &daemon{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(d.done)
	}()
	c.daemons = append(c.daemons, d)
	// A daemon that fails on its configuration exits at once.
	select {
	case <-d.done:
		t.Fatalf("slurmlab: %s exited at start: %s", name, out.String())
	case <-time.After(50 * time.Millisecond):
	}
	return d
}

// teardown kills every node's processes (slurmd, slurmstepd, tasks),
// then slurmctld and munged with their process groups, and removes the
// network. A test fixture keeps no state, so nothing is shut down
// gracefully: slurmd alone takes seconds to exit on SIGTERM.
func (c *Cluster) teardown() {
	for _, n := range c.Nodes {
		netns.Kill(n.NS)
	}
	for i := len(c.daemons) - 1; i >= 0; i-- {
		d := c.daemons[i]
		syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
		}
	}
	for _, n := range c.Nodes {
		exec.Command("ip", "netns", "delete", n.NS).Run()
	}
	exec.Command("ip", "link", "delete", bridge).Run()
	os.Remove(pidRecord)
}

// Command is name run with the cluster's environment (SLURM_CONF), e.g.
// sinfo or salloc.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), c.Env...)
	return cmd
}

// Job is an allocation held for a test: no shell runs in it, and steps
// are started in it by its environment (SLURM_JOB_ID and
// SLURM_JOB_NODELIST), as inside salloc or an sbatch script.
type Job struct {
	ID string
	// NodeList is Slurm's compact form, e.g. "n[1-3]".
	NodeList string
	// Env is the cluster's Env plus SLURM_JOB_ID, SLURM_JOBID and
	// SLURM_JOB_NODELIST: with os.Environ() before it, it is the
	// environment of a program run inside the allocation.
	Env []string
	c   *Cluster
}

// AllocOptions shape an allocation.
type AllocOptions struct {
	// Nodes is how many nodes (salloc -N); 0 means all of them.
	Nodes int
	// Exclusive allocates whole nodes (salloc --exclusive), so steps may
	// use and bind to every CPU.
	Exclusive bool
}

var grantedRE = regexp.MustCompile(`Granted job allocation (\d+)`)

// Allocate holds an allocation (salloc --no-shell) until the test ends,
// then cancels it and waits until it is gone.
func (c *Cluster) Allocate(t testing.TB, opts AllocOptions) *Job {
	t.Helper()
	n := opts.Nodes
	if n == 0 {
		n = len(NodeNames)
	}
	args := []string{"--no-shell", "-N", strconv.Itoa(n), "-J", "rdmasweep-test", "--immediate=30"}
	if opts.Exclusive {
		args = append(args, "--exclusive")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := c.Command(ctx, "salloc", args...).CombinedOutput()
	m := grantedRE.FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("slurmlab: salloc %s: %v: %s", strings.Join(args, " "), err, out)
	}
	j := &Job{ID: string(m[1]), c: c}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.Command(ctx, "scancel", j.ID).Run()
		for ctx.Err() == nil {
			out, err := c.Command(ctx, "squeue", "-h", "-j", j.ID, "-o", "%T").Output()
			if err != nil || len(bytes.TrimSpace(out)) == 0 {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	list, err := c.Command(ctx, "squeue", "-h", "-j", j.ID, "-o", "%N").Output()
	if err != nil {
		t.Fatalf("slurmlab: squeue -j %s: %v", j.ID, err)
	}
	j.NodeList = strings.TrimSpace(string(list))
	j.Env = append(append([]string(nil), c.Env...),
		"SLURM_JOB_ID="+j.ID, "SLURM_JOBID="+j.ID, "SLURM_JOB_NODELIST="+j.NodeList, "SLURM_NODELIST="+j.NodeList)
	return j
}

// Command is name run inside the allocation, e.g. srun.
func (j *Job) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), j.Env...)
	return cmd
}

// Steps lists the allocation's live steps as JOBID.STEPID.
func (j *Job) Steps(t testing.TB) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := j.Command(ctx, "squeue", "-h", "-s", "-j", j.ID, "-o", "%i").CombinedOutput()
	if err != nil {
		t.Fatalf("slurmlab: squeue -s -j %s: %v: %s", j.ID, err, out)
	}
	return strings.Fields(string(out))
}

// Salloc is `salloc -N nodes argv...`: argv runs inside a new allocation
// that ends when it exits.
func (c *Cluster) Salloc(ctx context.Context, nodes int, argv ...string) *exec.Cmd {
	return c.Command(ctx, "salloc", append([]string{"-N", strconv.Itoa(nodes), "-J", "rdmasweep-test", "--immediate=30"}, argv...)...)
}

// Pids lists every process in the node's network namespace, slurmd
// included.
func (n *Node) Pids(t testing.TB) []int {
	t.Helper()
	pids, err := netns.Pids(n.NS)
	if err != nil {
		t.Fatalf("slurmlab: pids of %s: %v", n.Name, err)
	}
	return pids
}

// Leftovers describes each process on any node other than slurmd: a
// step's slurmstepd or its tasks. Empty when no step runs.
func (c *Cluster) Leftovers(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, name := range NodeNames {
		n := c.Nodes[name]
		for _, p := range n.Pids(t) {
			if p == n.SlurmdPid {
				continue
			}
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p))
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
			if len(comm) == 0 {
				continue // gone meanwhile
			}
			out = append(out, fmt.Sprintf("%s: pid %d %s (%s)", name, p,
				strings.TrimSpace(string(comm)), strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " ")))
		}
	}
	return out
}

// Output runs argv on the node as a process of the node would see the
// world (its network and mount namespaces, so its LocalDir), outside
// Slurm, and returns stdout.
func (n *Node) Output(argv ...string) (string, error) {
	args := append([]string{"-t", strconv.Itoa(n.SlurmdPid), "-m", "-n", "-u", "--"}, argv...)
	cmd := exec.Command("nsenter", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("on %s: %s: %w: %s", n.Name, strings.Join(argv, " "), err, stderr.String())
	}
	return string(out), nil
}

var recordMu sync.Mutex

// recordPgid notes a daemon's process group in pidRecord, so a later run
// can kill it if this one crashed before teardown.
func recordPgid(pgid int) {
	recordMu.Lock()
	defer recordMu.Unlock()
	f, err := os.OpenFile(pidRecord, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	fmt.Fprintln(f, pgid)
	f.Close()
}

// cleanStale removes what an earlier, crashed cluster left. It runs with
// the lock held, so nothing it finds belongs to a live cluster.
func cleanStale(t testing.TB) {
	if b, err := os.ReadFile(pidRecord); err == nil {
		groups := map[int]bool{}
		for _, f := range strings.Fields(string(b)) {
			if pgid, err := strconv.Atoi(f); err == nil && pgid > 1 {
				groups[pgid] = true
			}
		}
		// Pids are reused: only a process in a recorded group that still
		// runs one of our daemons' executables is ours.
		procs, _ := filepath.Glob("/proc/[0-9]*")
		for _, p := range procs {
			pid, _ := strconv.Atoi(filepath.Base(p))
			if groups[pgidOf(pid)] && isDaemon(pid) {
				t.Logf("slurmlab: killing stale daemon %d", pid)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		os.Remove(pidRecord)
	}
	if dirs, err := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*")); err == nil {
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	}
	netns.RemoveStale(t, "slurmlab", nsPrefix, bridge, vethPrefix)
}

func pgidOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command, which may hold spaces and ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return 0
	}
	pgid, _ := strconv.Atoi(f[2])
	return pgid
}

func isDaemon(pid int) bool {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return err == nil && (exe == slurmctld || exe == munged || exe == slurmd)
}

// waitFor polls cond until it returns nil, or fails the test with its
// last error and the log's tail.
func waitFor(t testing.TB, what string, limit time.Duration, cond func() error, log string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tail, _ := os.ReadFile(log)
			if len(tail) > 4000 {
				tail = tail[len(tail)-4000:]
			}
			t.Fatalf("slurmlab: waiting for %s: %v\n%s:\n%s", what, err, log, tail)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func mustRun(t testing.TB, name string, args ...string) {
	t.Helper()
	netns.MustRun(t, "slurmlab", name, args...)
}
