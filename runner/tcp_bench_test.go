//go:build bench

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/testhosts"
)

// TestBenchTCPHosts runs plans/bench-tcp.yaml, node's tcp beside iperf3,
// across two namespace hosts (the server on one, the client on the
// other, a veth pair and a bridge between them) instead of on loopback,
// and prints its ratios with the load average before and after. make
// bench runs it; its CSV goes to $RDMASWEEP_BENCH_OUT/bench-tcp-hosts.csv.
//
//	go test -tags bench -run TestBenchTCPHosts -v ./runner/
func TestBenchTCPHosts(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}, EmptyRootHome: true})
	out := os.Getenv("RDMASWEEP_BENCH_OUT")
	if out == "" {
		out = t.TempDir()
	}
	dir := t.TempDir()
	a, b := n.Hosts["a"], n.Hosts["b"]
	args := []string{"exec", filepath.Join(repoRoot(t), "plans", "bench-tcp.yaml"), "--rerun",
		"--out", filepath.Join(out, "bench-tcp-hosts.csv"), "--set", "output.logs=" + filepath.Join(out, "logs"),
		"--set", "node.binary=" + filepath.Join(binDir, "node"), "--set", "node.remote_path=" + testhosts.DeployDir + "/bin/node",
		"--set", "ssh.known_hosts=" + n.KnownHosts, "--set", "ssh.host_key_policy=strict",
		"--set", "server.file=" + fileDir(t) + "/bench-tcp.dat"}
	for role, h := range map[string]*testhosts.Host{"server": a, "client": b} {
		for k, v := range map[string]string{"address": h.Addr, "user": n.User, "identity_file": n.KeyFile} {
			args = append(args, "--set", "hosts."+role+"."+k+"="+v)
		}
	}
	before := loadavg()
	r := clitest.Run(t, filepath.Join(binDir, "runner"), dir, clitest.SSHEnv(t), 20*time.Minute, args...)
	after := loadavg()
	t.Logf("bench-tcp across two namespace hosts, %s before, %s after:\n%s", before, after, r.Stdout)
	if r.Code != 0 {
		t.Fatalf("runner exec: exit %d\n%s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stdout, "median ratio") {
		t.Errorf("bench-tcp printed no ratio")
	}
}

// fileDir is a directory for the served file on this machine's own file
// system, as the plan's default /tmp is, not the hosts' private tmpfs: a
// file on a disk's file system is what node serves, and sendfile from
// tmpfs is another path (7 % slower here at 1 MiB, median of three).
// The hosts' users may write it.
func fileDir(t *testing.T) string {
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o1777); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// repoRoot is the module's root, where plans/ is: the parent of this
// package's directory.
func repoRoot(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd)
}
