package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/slurmlab"
)

// The runner under Slurm, on a real cluster: exec with launcher slurm and
// no hosts (the server on the allocation's first node, a client on each of
// the others), resume, check, and an interrupt that leaves no step and no
// process on any node.
func TestExecUnderSlurm(t *testing.T) {
	c := slurmlab.Start(t)
	job := c.Allocate(t, slurmlab.AllocOptions{Nodes: 3})
	dir := t.TempDir()
	env := append(append(os.Environ(), job.Env...), "HOME="+dir)
	plan := filepath.Join(dir, "slurm.yaml")
	text := fmt.Sprintf(`name: slurm
launcher: slurm
node: {binary: %s}
server: {file: %s/slurm.dat, file_size: 8MiB, create: true, cache: warm}
client: {block_size: 64KiB, queue_depth: 4, duration: 1s, verify: true}
sweep: {matrix: {clients: [1, 2]}}
timeouts: {ready: 30s, accept: 30s, point: 60s}
output: {csv: out/slurm.csv, logs: out/logs}
`, filepath.Join(binDir, "node"), slurmlab.LocalDir)
	if err := os.WriteFile(plan, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}

	r := runnerEnv(t, dir, env, "check", plan)
	if r.Code != 0 || !strings.Contains(r.Stdout, "client2") {
		t.Fatalf("check: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	r = runnerEnv(t, dir, env, "exec", plan)
	if r.Code != 0 {
		t.Fatalf("exec: exit %d\n%s", r.Code, r.Stderr)
	}
	rows := clitest.ReadRows(t, filepath.Join(dir, "out/slurm.csv"))
	var got []string
	for _, row := range rows {
		if row.Status != "ok" || !*row.Verified {
			t.Errorf("row %+v", row)
		}
		got = append(got, row.Scope+"/"+row.Param("clients")+"/"+row.ServerHost+">"+row.ClientHost)
	}
	if want := "client/1/n1>n2 aggregate/1/n1>n2 client/2/n1>n2 client/2/n1>n3 aggregate/2/n1>n2 n3"; strings.Join(got, " ") != want {
		t.Errorf("rows:\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
	if r := runnerEnv(t, dir, env, "exec", plan); r.Code != 0 || !strings.Contains(r.Stderr, "skipping 2 runs") {
		t.Errorf("resume: exit %d\n%s", r.Code, r.Stderr)
	}
	if steps := job.Steps(t); len(steps) > 0 {
		t.Errorf("steps left after exec: %v", steps)
	}

	// Interrupted mid-point: every step cancelled, nothing left on a node.
	long := strings.Replace(text, "duration: 1s", "duration: 60s", 1)
	long = strings.Replace(long, "sweep: {matrix: {clients: [1, 2]}}", "", 1)
	if err := os.WriteFile(plan, []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startRunner(t, dir, env, "exec", plan)
	// The server and both clients running: the record of started nodes
	// beside the CSV lists three (the facts and deploy steps, which come
	// and go before, are not nodes, so counting steps alone is not
	// enough). Then time for the barrier and its 0.5 s lead.
	p.Until(t, "server and both clients started", 60*time.Second, func() bool {
		var nodes []json.RawMessage
		b, err := os.ReadFile(filepath.Join(dir, "out/slurm.csv.state"))
		return err == nil && json.Unmarshal(b, &nodes) == nil && len(nodes) == 3
	})
	time.Sleep(2 * time.Second)
	p.Signal(syscall.SIGINT)
	if code := p.Wait(t, 30*time.Second); code != 130 {
		t.Errorf("interrupted exec: exit %d, want 130\n%s", code, p.Stderr())
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && (len(job.Steps(t)) > 0 || len(c.Leftovers(t)) > 0) {
		time.Sleep(100 * time.Millisecond)
	}
	if steps, left := job.Steps(t), c.Leftovers(t); len(steps) > 0 || len(left) > 0 {
		t.Errorf("after the interrupt: steps %v, processes %v", steps, left)
	}
}

// A ring over the allocation's nodes: launcher slurm and a pool topology
// with no hosts section, so the pool is the allocation. With three nodes
// the ring is three links, each alone in a round (odd N), each row
// verified and naming the nodes as Slurm does.
func TestExecRingUnderSlurm(t *testing.T) {
	c := slurmlab.Start(t)
	job := c.Allocate(t, slurmlab.AllocOptions{Nodes: 3})
	dir := t.TempDir()
	env := append(append(os.Environ(), job.Env...), "HOME="+dir)
	plan := filepath.Join(dir, "ring.yaml")
	text := fmt.Sprintf(`name: slurm-ring
launcher: slurm
topology: ring
node: {binary: %s}
server: {file: %s/ring.dat, file_size: 8MiB, create: true, cache: warm}
client: {block_size: 64KiB, queue_depth: 4, duration: 1s, verify: true}
timeouts: {ready: 30s, accept: 30s, point: 60s}
output: {csv: out/ring.csv, logs: out/logs}
`, filepath.Join(binDir, "node"), slurmlab.LocalDir)
	if err := os.WriteFile(plan, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runnerEnv(t, dir, env, "exec", plan)
	if r.Code != 0 {
		t.Fatalf("exec: exit %d\n%s", r.Code, r.Stderr)
	}
	rows := clitest.ReadRows(t, filepath.Join(dir, "out/ring.csv"))
	var got []string
	rounds := map[int64]int{}
	for _, row := range rows {
		if row.Status != "ok" || row.Verified == nil || !*row.Verified || row.BandwidthMBs == nil || *row.BandwidthMBs <= 0 {
			t.Errorf("row not ok and verified: %+v", row)
		}
		if row.Round == nil {
			t.Errorf("row %s>%s has no round", row.ServerHost, row.ClientHost)
		} else {
			rounds[*row.Round]++
		}
		got = append(got, row.ServerHost+">"+row.ClientHost)
	}
	// Host i reads from host i+1: the server is the next node.
	slices.Sort(got)
	if want := "n1>n3 n2>n1 n3>n2"; strings.Join(got, " ") != want {
		t.Errorf("links (server>client): %s, want %s", strings.Join(got, " "), want)
	}
	if len(rounds) != 3 {
		t.Errorf("rounds %v: want 3 rounds of one link each", rounds)
	}
	if r := runnerEnv(t, dir, env, "summary", filepath.Join(dir, "out/ring.csv")); r.Code != 0 || !strings.Contains(r.Stdout, "n1") {
		t.Errorf("summary: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if steps, left := job.Steps(t), c.Leftovers(t); len(steps) > 0 || len(left) > 0 {
		t.Errorf("after the ring: steps %v, processes %v", steps, left)
	}
}
