//go:build bench

package point_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/hosts/deploy"
	"rdmasweep/runner/hosts/hostfacts"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/remote/slurm"
	"rdmasweep/runner/hosts/role"
	"rdmasweep/runner/points/point"
	"rdmasweep/testbed/slurmlab"
	"rdmasweep/testbed/testhosts"
)

// TestBenchOverheadClients measures the runner's overhead per point (wall
// time minus the slowest client's measured seconds) at 1, 2, 4 and 8
// clients, fan-in, over SSH to namespace hosts and as Slurm steps on a
// real cluster: the median of several points at each count, printed side
// by side with the goal of 50 ms + 5 ms per client. It asserts nothing
// about speed.
//
//	go test -tags bench -run TestBenchOverheadClients -v ./runner/points/point/
func TestBenchOverheadClients(t *testing.T) {
	dir := t.TempDir()
	node := filepath.Join(dir, "node")
	build := exec.Command("go", "build", "-o", node, "rdmasweep/node")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build node: %v\n%s", err, out)
	}
	counts := []int{1, 2, 4, 8}
	before := load()
	ssh := map[int]time.Duration{}
	// RDMASWEEP_BENCH_ONLY=slurm (or ssh) measures one launcher, for an
	// A/B of two commits alternated at the same load.
	only := os.Getenv("RDMASWEEP_BENCH_ONLY")
	if only != "slurm" {
		n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b", "c", "d", "e"}})
		t.Setenv("HOME", t.TempDir())
		t.Setenv("SSH_AUTH_SOCK", "")
		hosts := map[string]remote.Host{}
		dial := func(addr string) remote.Host {
			if h := hosts[addr]; h != nil {
				return h
			}
			// Not root: on this machine root's ~/.bashrc (pyenv init), which
			// bash reads for every ssh command, costs ~120 ms per start and
			// would be measured instead of the runner.
			h, err := remote.DialSSH(context.Background(), remote.SSHConfig{Address: addr, User: n.User, IdentityFile: n.KeyFile,
				KnownHosts: n.KnownHosts, HostKeyPolicy: remote.PolicyStrict, ConnectTimeout: 10 * time.Second, KeepaliveInterval: 15 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Close() })
			hosts[addr] = h
			return h
		}
		var clients []string
		for i := range 8 {
			clients = append(clients, n.Hosts[string(rune('b'+i%4))].Addr)
		}
		ssh = overheads(t, dir, node, testhosts.DeployDir, n.Hosts["a"].Addr, clients, counts,
			fmt.Sprintf("ssh: {known_hosts: %s, host_key_policy: strict}\n", n.KnownHosts), dial)
	}
	slurmed := map[int]time.Duration{}
	if only != "ssh" {
		c := slurmlab.Start(t)
		// Whole nodes, as docs/slurm.md's sbatch script asks. The lab's
		// three nodes are one machine: a job of one CPU a node pins every
		// step to CPU 0 of all three (task/affinity), and there a client
		// woken by its go waited up to 0.35 s to run (perf sched) while the
		// server and the other clients kept that CPU busy and CPU 1 idled.
		job := c.Allocate(t, slurmlab.AllocOptions{Nodes: 3, Exclusive: true})
		a, err := slurm.FromEnv(context.Background(), append(os.Environ(), job.Env...))
		if err != nil {
			t.Fatal(err)
		}
		hosts := map[string]remote.Host{}
		dial := func(node string) remote.Host {
			if h := hosts[node]; h != nil {
				return h
			}
			h, err := a.Host(node, slurm.HostOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Close() })
			hosts[node] = h
			return h
		}
		var clients []string
		for i := range 8 {
			clients = append(clients, []string{"n2", "n3"}[i%2])
		}
		addr := func(n string) string { return a.NodeAddr(context.Background(), n) }
		slurmed = overheads(t, dir, node, slurmlab.LocalDir, "n1", clients, counts,
			fmt.Sprintf("hosts_data: %s\n", addr("n1")), dial)
	}
	fmt.Printf("BENCH runner overhead per point (wall − slowest client's measured time), median, fan-in over tcp; load %s → %s:\n", before, load())
	fmt.Printf("BENCH %8s %12s %12s %12s\n", "clients", "ssh", "slurm", "goal")
	for _, k := range counts {
		fmt.Printf("BENCH %8d %9.1f ms %9.1f ms %9.1f ms\n", k, ms(ssh[k]), ms(slurmed[k]), float64(50+5*k))
	}
}

// overheads runs a fan-in plan whose clients are the first k of clients,
// for each count, several points each, and returns the median overhead.
// Each reads for 1 s: the clients' phases must overlap for the
// aggregate row, and a point of a few ms would not (their start skew
// is a few ms over SSH and as Slurm steps, up to 40 ms on this 2-core
// machine when loaded).
func overheads(t *testing.T, dir, node, deployDir, server string, clients []string, counts []int, extra string, dial func(string) remote.Host) map[int]time.Duration {
	var list []string
	for _, c := range clients {
		list = append(list, "{address: "+c+"}")
	}
	dataAddr := ""
	if v, ok := strings.CutPrefix(extra, "hosts_data: "); ok {
		dataAddr, extra = ", data_address: "+strings.TrimSpace(v), ""
	}
	var sweep []string
	for _, k := range counts {
		sweep = append(sweep, fmt.Sprint(k))
	}
	p, err := plan.Parse("bench.yaml", []byte(fmt.Sprintf(`name: overhead-clients
hosts:
  server: {address: %s%s}
  client: [%s]
%snode: {binary: %s, remote_path: %s/bin/node}
transport: tcp
server: {file: %s/bench.dat, file_size: 1MiB, create: true, cache: warm}
client: {block_size: 4KiB, queue_depth: 4, duration: 1s}
sweep: {matrix: {clients: [%s]}}
repeat: 7
`, server, dataAddr, strings.Join(list, ", "), extra, node, deployDir, deployDir, strings.Join(sweep, ", "))), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pts, err := plan.Expand(p, plan.ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := &point.Runner{Plan: p, RunID: "bench", LogDir: dir}
	deployed := map[remote.Host]bool{}
	for _, rl := range p.Hosts.Roles() {
		h := dial(rl.Host.Address)
		if !deployed[h] {
			facts, err := hostfacts.Collect(ctx, h, hostfacts.Query{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := deploy.Deploy(ctx, h, node, p.Node.RemotePath, facts.Arch); err != nil {
				t.Fatal(err)
			}
			deployed[h] = true
		}
		r.Targets = append(r.Targets, role.Target{Role: rl.Name, Host: h, Label: rl.Name, NodePath: p.Node.RemotePath})
	}
	out := map[int]time.Duration{}
	for _, pt := range pts {
		var o, ready, client, stop, skew []time.Duration
		for rep := 1; rep <= p.Repeat; rep++ {
			start := time.Now()
			rows, tm, err := r.Run(ctx, pt, rep)
			wall := time.Since(start)
			if err != nil || rows[len(rows)-1].Status != results.StatusOK {
				t.Fatalf("%d clients: %v %+v", pt.Clients(), err, rows[len(rows)-1])
			}
			if rep > 1 { // the first made the file
				o = append(o, wall-tm.Measured)
				ready, client, stop = append(ready, tm.ToReady), append(client, tm.ToClient), append(stop, tm.ResultToRow)
				if sk := rows[len(rows)-1].StartSkewS; sk != nil {
					skew = append(skew, time.Duration(*sk*float64(time.Second)))
				}
			}
		}
		out[pt.Clients()] = median(o)
		// Where it went: the server to ready, the clients started, the
		// last result to every role gone; the rest is the clients'
		// connect and registration, the barrier, and reading the events.
		fmt.Printf("BENCH %s, %d clients: overhead %.1f ms: server ready %.1f, clients started %.1f, result to all gone %.1f, other %.1f; start skew %.1f ms\n",
			dial(p.Hosts.Server().Address).Name(), pt.Clients(), ms(out[pt.Clients()]), ms(median(ready)), ms(median(client)), ms(median(stop)),
			ms(out[pt.Clients()]-median(ready)-median(client)-median(stop)), ms(median(skew)))
	}
	return out
}

// load is the 1-, 5- and 15-minute load averages: an overhead on this
// 2-core machine moves with them.
func load() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
