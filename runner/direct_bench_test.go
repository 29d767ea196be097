//go:build bench

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"rdmasweep/internal/stat"
	"rdmasweep/results"
	"rdmasweep/runner/files/csvfile"
	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/testhosts"
)

// TestBenchDirectTCPHosts is io direct at this machine's disk speed:
// across two namespace hosts, a 1 GiB file on the machine's own disk
// read cold once over tcp, taking turns, 3 times: io direct (O_DIRECT
// into its ring, the socket fed from it) beside the buffered path
// (sendfile from the page cache the cold file is read into), with node's
// warm tcp bandwidth and the disk's O_DIRECT ceiling (exec measures it
// before the first cold point). It logs each median and io direct's
// end_to_end_mb_s against min(ceiling, warm), with the load.
//
//	go test -tags bench -run TestBenchDirectTCPHosts -v ./runner/
func TestBenchDirectTCPHosts(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}, EmptyRootHome: true})
	dir := t.TempDir()
	a, b := n.Hosts["a"], n.Hosts["b"]
	plan := filepath.Join(dir, "direct-tcp.yaml")
	body := fmt.Sprintf(`name: direct-tcp
hosts:
  server: {address: %s, user: %s, identity_file: %s}
  client: {address: %s, user: %s, identity_file: %s}
ssh: {known_hosts: %s, host_key_policy: strict}
node: {binary: %s, remote_path: %s/bin/node}
transport: tcp
server: {file: %s/direct-tcp.dat, file_size: 1GiB, create: true}
client: {block_size: 1MiB, queue_depth: 16, pattern: sequential}
repeat: 3
sweep:
  zip:
    cache: [cold, cold, warm]
    io: [direct, mmap, mmap]
    duration: [0s, 0s, 3s]
    warmup: [0s, 0s, 1s]
output: {csv: %s/direct-tcp.csv, logs: %s/logs}
`, a.Addr, n.User, n.KeyFile, b.Addr, n.User, n.KeyFile, n.KnownHosts, filepath.Join(binDir, "node"), testhosts.DeployDir, fileDir(t), dir, dir)
	if err := os.WriteFile(plan, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	before := loadavg()
	r := clitest.Run(t, filepath.Join(binDir, "runner"), dir, clitest.SSHEnv(t), 20*time.Minute, "exec", plan)
	after := loadavg()
	if r.Code != 0 {
		t.Fatalf("runner exec: exit %d\n%s", r.Code, r.Stderr)
	}
	rows, err := csvfile.Read(filepath.Join(dir, "direct-tcp.csv"))
	if err != nil {
		t.Fatal(err)
	}
	med := func(cache, io string, col func(results.Row) *float64) float64 {
		var v []float64
		for _, r := range rows {
			if r.Status == results.StatusOK && r.Param("cache") == cache && r.Param("io") == io && col(r) != nil {
				v = append(v, *col(r))
			}
		}
		return stat.Median(v)
	}
	e2e := func(r results.Row) *float64 { return r.EndToEndMBs }
	direct, buffered := med("cold", results.IODirect, e2e), med("cold", results.IOMmap, e2e)
	warm := med("warm", results.IOMmap, func(r results.Row) *float64 { return r.BandwidthMBs })
	ceiling := med("cold", results.IODirect, func(r results.Row) *float64 { return r.DiskCeilingMBs })
	t.Logf("BENCH tcp across two namespace hosts, 1 GiB cold once, %s before, %s after: io direct %.0f MB/s end to end, buffered (sendfile) %.0f; warm %.0f, O_DIRECT ceiling %.0f: direct %.2f of min(ceiling, warm), buffered %.2f",
		before, after, direct, buffered, warm, ceiling, direct/min(ceiling, warm), buffered/min(ceiling, warm))
}
