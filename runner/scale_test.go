package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
node: {binary: %s, remote_path: %s/node}
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
