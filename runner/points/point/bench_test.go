//go:build bench

package point_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/files/csvfile"
	"rdmasweep/runner/hosts/deploy"
	"rdmasweep/runner/hosts/hostfacts"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
	"rdmasweep/runner/points/point"
	"rdmasweep/testbed/testhosts"
)

// TestBenchOverhead measures what the runner adds to each point across two
// real SSH hosts: a sweep of small points, each phase's median printed
// beside node's own measured time. It asserts nothing about speed.
//
//	go test -tags bench -run TestBenchOverhead -v ./runner/points/point/
func TestBenchOverhead(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}})
	t.Setenv("HOME", t.TempDir())
	t.Setenv("SSH_AUTH_SOCK", "")
	dir := t.TempDir()
	node := filepath.Join(dir, "node")
	build := exec.Command("go", "build", "-o", node, "rdmasweep/node")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build node: %v\n%s", err, out)
	}
	a, b := n.Hosts["a"], n.Hosts["b"]
	const points = 12
	p, err := plan.Parse("bench.yaml", []byte(fmt.Sprintf(`name: overhead
hosts:
  server: {address: %s, user: %s, identity_file: %s}
  client: {address: %s, user: %s, identity_file: %s}
ssh: {known_hosts: %s, host_key_policy: strict}
node: {binary: %s, remote_path: %s/bin/node}
transport: tcp
server: {file: %s/bench.dat, file_size: 1MiB, create: true, cache: warm}
client: {block_size: 4KiB, queue_depth: 16}
sweep:
  matrix:
    queue_depth: {from: 1, to: 2048, factor: 2}
`, a.Addr, n.User, n.KeyFile, b.Addr, n.User, n.KeyFile, n.KnownHosts, node, testhosts.DeployDir, testhosts.DeployDir)), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pts, err := plan.Expand(p, plan.ExpandOptions{})
	if err != nil || len(pts) != points {
		t.Fatalf("%d points: %v", len(pts), err)
	}
	ctx := context.Background()
	dial := func(h *testhosts.Host) remote.Host {
		host, err := remote.DialSSH(ctx, remote.SSHConfig{Address: h.Addr, User: n.User, IdentityFile: n.KeyFile,
			KnownHosts: n.KnownHosts, HostKeyPolicy: remote.PolicyStrict, ConnectTimeout: 10 * time.Second, KeepaliveInterval: 15 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { host.Close() })
		facts, err := hostfacts.Collect(ctx, host, hostfacts.Query{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := deploy.Deploy(ctx, host, node, p.Node.RemotePath, facts.Arch); err != nil {
			t.Fatal(err)
		}
		return host
	}
	csv, err := csvfile.Open(filepath.Join(dir, "bench.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer csv.Close()
	r := &point.Runner{Plan: p, RunID: "bench", LogDir: dir, Targets: []role.Target{
		{Role: "server", Host: dial(a), Label: "server", NodePath: p.Node.RemotePath},
		{Role: "client", Host: dial(b), Label: "client", NodePath: p.Node.RemotePath}}}

	var ready, toClient, measured, toRow, overhead []time.Duration
	for i, pt := range pts {
		start := time.Now()
		rows, tm, err := r.Run(ctx, pt, 1)
		if err != nil || rows[0].Status != results.StatusOK {
			t.Fatalf("point %d: %v %+v", i, err, rows)
		}
		row := rows[0]
		returned := time.Now()
		if err := csv.Append(row); err != nil {
			t.Fatal(err)
		}
		wall := time.Since(start)
		if i == 0 {
			continue // it created the file
		}
		ready = append(ready, tm.ToReady)
		toClient = append(toClient, tm.ToClient)
		measured = append(measured, tm.Measured)
		toRow = append(toRow, tm.ResultToRow+time.Since(returned))
		overhead = append(overhead, wall-tm.Measured)
	}
	fmt.Printf("BENCH runner overhead per point, median of %d points (tcp, server on %s, client on %s, over SSH):\n", len(ready), a.Addr, b.Addr)
	fmt.Printf("BENCH   start → ready           %8.1f ms\n", ms(median(ready)))
	fmt.Printf("BENCH   ready → client started  %8.1f ms\n", ms(median(toClient)))
	fmt.Printf("BENCH   node's measured time    %8.1f ms\n", ms(median(measured)))
	fmt.Printf("BENCH   result → row written    %8.1f ms\n", ms(median(toRow)))
	fmt.Printf("BENCH   wall − measured         %8.1f ms   (goal ≤ 150 ms; the scripts it replaces slept 22 s)\n", ms(median(overhead)))
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
