package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/testhosts"
)

// Several clients per point, across four real SSH hosts: fan-in (one
// server, its clients swept 1 and 3) and pairs (two servers, two clients),
// each giving a verified row per client and then the aggregate, the time
// series beside the CSV, and no node left on any host.
func TestSeveralClientsAcrossSSHHosts(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b", "c", "d"}})
	dir, env := t.TempDir(), clitest.SSHEnv(t)
	host := func(name string) string {
		return fmt.Sprintf("{address: %s, user: root, identity_file: %s}", n.Hosts[name].Addr, n.KeyFile)
	}
	common := fmt.Sprintf(`ssh: {known_hosts: %s, host_key_policy: strict, connect_timeout: 5s}
node: {binary: %s, remote_path: %s/bin/node}
server: {file: %s/fan.dat, file_size: 8MiB, create: true, cache: warm}
client: {block_size: 64KiB, queue_depth: 4, duration: 1s, verify: true}
timeouts: {ready: 30s, accept: 30s, point: 60s}
output: {csv: out/scale.csv, logs: out/logs}
`, n.KnownHosts, filepath.Join(binDir, "node"), testhosts.DeployDir, testhosts.DeployDir)
	plans := map[string]string{
		"fan-in": fmt.Sprintf("name: fan-in\nhosts:\n  server: %s\n  client: [%s, %s, %s]\nsweep: {matrix: {clients: [1, 3]}}\n",
			host("a"), host("b"), host("c"), host("d")) + common,
		"pairs": fmt.Sprintf("name: pairs\ntopology: pairs\nhosts:\n  server: [%s, %s]\n  client: [%s, %s]\n",
			host("a"), host("b"), host("c"), host("d")) + common,
	}
	want := map[string][]int{"fan-in": {1, 3}, "pairs": {2}} // clients per point
	for _, name := range []string{"fan-in", "pairs"} {
		plan := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(plan, []byte(plans[name]), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runnerEnv(t, dir, env, "exec", plan)
		if r.Code != 0 {
			t.Fatalf("%s: exit %d\n%s", name, r.Code, r.Stderr)
		}
		rows := clitest.ReadRows(t, filepath.Join(dir, "out/scale.csv"))
		var got []string
		for _, row := range rows {
			if row.Plan != name {
				continue
			}
			if row.Status != "ok" || !*row.Verified || *row.BandwidthMBs <= 0 {
				t.Errorf("%s: row %+v", name, row)
			}
			got = append(got, row.Scope+"/"+row.Param("clients"))
			if row.Scope == "aggregate" && (row.StartSkewS == nil || *row.StartSkewS > 0.5 || *row.Seconds > 1.5 || *row.Seconds < 0.5) {
				t.Errorf("%s: aggregate skew %v over %v s", name, row.StartSkewS, *row.Seconds)
			}
		}
		var wantRows []string
		for _, k := range want[name] {
			for range k {
				wantRows = append(wantRows, fmt.Sprintf("client/%d", k))
			}
			wantRows = append(wantRows, fmt.Sprintf("aggregate/%d", k))
		}
		if strings.Join(got, " ") != strings.Join(wantRows, " ") {
			t.Errorf("%s: rows %v, want %v", name, got, wantRows)
		}
		// Again: every point is done, aggregate rows and all.
		if r := runnerEnv(t, dir, env, "exec", plan); r.Code != 0 || !strings.Contains(r.Stderr, "skipping") {
			t.Errorf("%s: second exec: exit %d\n%s", name, r.Code, r.Stderr)
		}
	}
	// Each client's intervals, beside the CSV.
	series, _ := filepath.Glob(filepath.Join(dir, "out", "*.series.jsonl"))
	roles := map[string]bool{}
	for _, f := range series {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			var l struct {
				Role        string `json:"role"`
				StartUnixNs int64  `json:"start_unix_ns"`
				Bytes       int64  `json:"bytes"`
			}
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.StartUnixNs == 0 {
				t.Fatalf("%s: %q: %v", f, sc.Text(), err)
			}
			roles[l.Role] = true
		}
		fh.Close()
	}
	for _, r := range []string{"client1", "client2", "client3"} {
		if !roles[r] {
			t.Errorf("no intervals of %s in %v", r, series)
		}
	}
	for _, h := range n.Hosts {
		if left := clitest.NodesOn(t, h); len(left) > 0 {
			t.Errorf("%s: nodes left: %v", h.Name, left)
		}
	}
}

// poolPlan writes a pairwise plan over every host of n (in name order)
// into dir: tcp, verified, points that read a small file once, so a round
// costs the runner's overhead more than its reads. It returns the plan's
// path and the hosts' addresses in pool order.
func poolPlan(t testing.TB, n *testhosts.Net, dir, name, extra string) (string, []string) {
	t.Helper()
	var names []string
	for h := range n.Hosts {
		names = append(names, h)
	}
	sort.Strings(names)
	var pool, addrs []string
	for _, h := range names {
		addrs = append(addrs, n.Hosts[h].Addr)
		pool = append(pool, fmt.Sprintf("    - {address: %s, user: root, identity_file: %s}\n", n.Hosts[h].Addr, n.KeyFile))
	}
	plan := fmt.Sprintf(`name: %s
topology: pairwise
hosts:
  pool:
%stransport: tcp
ssh: {known_hosts: %s, host_key_policy: strict, connect_timeout: 20s}
node: {binary: %s, remote_path: %s/bin/node}
server: {file: %s/pool.dat, file_size: 1MiB, create: true, cache: warm}
client: {block_size: 64KiB, queue_depth: 4, total: 1MiB, verify: true}
timeouts: {ready: 30s, accept: 30s, point: 24h}
output: {csv: out/%s.csv, logs: out/logs}
%s`, name, strings.Join(pool, ""), n.KnownHosts, filepath.Join(binDir, "node"), testhosts.DeployDir, testhosts.DeployDir, name, extra)
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, addrs
}

// hostAddr is the address in a row's host cell, which names an SSH host
// as the runner reached it (root@ADDR:22).
func hostAddr(cell string) string {
	if _, a, ok := strings.Cut(cell, "@"); ok {
		cell = a
	}
	return strings.TrimSuffix(cell, ":22")
}

// hostNames are n hosts' names, h01 … hNN.
func hostNames(n int) []string {
	var s []string
	for i := range n {
		s = append(s, fmt.Sprintf("h%02d", i+1))
	}
	return s
}

// Sixteen namespace hosts, pairwise over tcp, as CI runs it: 240 verified
// rows, one per ordered pair, in 30 rounds of 8 pairs, no host twice in a
// round, and no node left on any host. Each pair reads 1 MiB once, so the
// sweep's time is the runner's own per round: the test takes about 29 s
// on 2 cores at load average 13–20 (2 s to start the hosts, 26.6 s of
// exec).
func TestPairwiseSixteenHosts(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: hostNames(16), EmptyRootHome: true})
	dir, env := t.TempDir(), clitest.SSHEnv(t)
	plan, addrs := poolPlan(t, n, dir, "pool16", "")
	start := time.Now()
	r := runnerEnv(t, dir, env, "exec", plan)
	t.Logf("exec of 16 hosts, 240 pairs: %v", time.Since(start).Round(time.Millisecond))
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	rows := clitest.ReadRows(t, filepath.Join(dir, "out/pool16.csv"))
	if len(rows) != 240 {
		t.Fatalf("%d rows, want 240 (16 × 15 ordered pairs)", len(rows))
	}
	pairs := map[string]bool{}
	rounds := map[int64]map[string]bool{} // round → its hosts
	for _, row := range rows {
		if row.Status != "ok" || row.Verified == nil || !*row.Verified || row.BandwidthMBs == nil || *row.BandwidthMBs <= 0 {
			t.Errorf("row %s → %s: status %s, verified %v: %s", row.ServerHost, row.ClientHost, row.Status, row.Verified, row.Error)
		}
		p := hostAddr(row.ServerHost) + ">" + hostAddr(row.ClientHost)
		if pairs[p] || row.ServerHost == row.ClientHost {
			t.Errorf("pair %s twice, or a host with itself", p)
		}
		pairs[p] = true
		if row.Round == nil {
			t.Fatalf("row %s has no round", p)
		}
		hosts := rounds[*row.Round]
		if hosts == nil {
			hosts = map[string]bool{}
			rounds[*row.Round] = hosts
		}
		for _, h := range []string{row.ServerHost, row.ClientHost} {
			if hosts[h] {
				t.Errorf("round %d: %s in two pairs", *row.Round, h)
			}
			hosts[h] = true
		}
	}
	if len(rounds) != 30 {
		t.Errorf("%d rounds, want 30", len(rounds))
	}
	for k, hosts := range rounds {
		if len(hosts) != 16 {
			t.Errorf("round %d has %d hosts, want all 16 (8 pairs)", k, len(hosts))
		}
	}
	for _, a := range addrs {
		for _, b := range addrs {
			if a != b && !pairs[a+">"+b] {
				t.Errorf("pair %s → %s has no row", a, b)
			}
		}
	}
	for _, h := range n.Hosts {
		if left := clitest.NodesOn(t, h); len(left) > 0 {
			t.Errorf("%s: nodes left: %v", h.Name, left)
		}
	}
}
