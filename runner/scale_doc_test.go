//go:build bench

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/testhosts"
)

// TestScaleDoc makes the fan-in knee of docs/performance.md (which
// docs/scale.md links) from a real run: a fan-in sweep of 1, 2, 4 and 8
// clients over tcp, the server on one namespace host and the clients two
// to a host on four others, three repetitions, then its aggregate
// bandwidth and p99 against clients. With RDMASWEEP_DOCS set it writes
// docs/scale.png and docs/scale-excerpt.csv; otherwise it only prints
// them.
//
//	RDMASWEEP_DOCS=1 go test -tags bench -run TestScaleDoc -v ./runner/
func TestScaleDoc(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b", "c", "d", "e"}})
	dir, env := t.TempDir(), clitest.SSHEnv(t)
	host := func(name string) string {
		return fmt.Sprintf("{address: %s, user: root, identity_file: %s}", n.Hosts[name].Addr, n.KeyFile)
	}
	var clients []string
	for i := range 8 {
		clients = append(clients, host(string(rune('b'+i%4))))
	}
	plan := filepath.Join(dir, "fan-in.yaml")
	text := fmt.Sprintf(`name: fan-in
hosts:
  server: %s
  client: [%s]
ssh: {known_hosts: %s, host_key_policy: strict}
node: {binary: %s, remote_path: %s/bin/node}
transport: tcp
server: {file: %s/fan-in.dat, file_size: 64MiB, create: true, cache: warm}
client: {block_size: 64KiB, queue_depth: 8, warmup: 1s, duration: 3s, verify: true}
sweep:
  matrix:
    clients: [1, 2, 4, 8]
repeat: 3
output: {csv: out/fan-in.csv, logs: out/logs}
`, host("a"), strings.Join(clients, ", "), n.KnownHosts, filepath.Join(binDir, "node"), testhosts.DeployDir, testhosts.DeployDir)
	if err := os.WriteFile(plan, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runnerEnv(t, dir, env, "exec", plan)
	if r.Code != 0 {
		t.Fatalf("exec: exit %d\n%s", r.Code, r.Stderr)
	}
	fmt.Print(r.Stdout)
	csv := filepath.Join(dir, "out/fan-in.csv")
	png := filepath.Join(dir, "scale.png")
	if r := runnerEnv(t, dir, env, "plot", "-x", "clients", "--scope", "aggregate", "-o", png, csv); r.Code != 0 {
		t.Fatalf("plot: %s", r.Stderr)
	}
	data, _ := os.ReadFile(csv)
	// The excerpt: the 4-client point's first repetition, its four client
	// rows and the aggregate, with the columns that tell them apart.
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	head := strings.Split(lines[0], ",")
	keep := []string{"point_key", "repetition", "status", "client_host", "clients", "scope", "block_size_bytes", "bytes", "seconds", "bandwidth_mb_s", "lat_p50_us", "lat_p99_us", "start_skew_s"}
	var idx []int
	for _, k := range keep {
		for i, h := range head {
			if h == k {
				idx = append(idx, i)
			}
		}
	}
	excerpt := []string{strings.Join(keep, ",")}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if f[idx[4]] != "4" || f[idx[1]] != "1" {
			continue
		}
		var cells []string
		for _, i := range idx {
			cells = append(cells, f[i])
		}
		excerpt = append(excerpt, strings.Join(cells, ","))
	}
	fmt.Println(strings.Join(excerpt, "\n"))
	if os.Getenv("RDMASWEEP_DOCS") != "" {
		docs := filepath.Join("..", "docs")
		b, _ := os.ReadFile(png)
		if err := os.WriteFile(filepath.Join(docs, "scale.png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(docs, "scale-excerpt.csv"), []byte(strings.Join(excerpt, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
