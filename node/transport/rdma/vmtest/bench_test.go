//go:build bench

package vmtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rdmasweep/testbed/guest"
)

// TestBenchPlans boots the soft-RoCE guest and has the runner exec the
// checked-in benchmark plans there, both roles in the guest through
// qemu's SSH port forward, as on real hosts: plans/bench-rdma.yaml (node
// rdma beside ib_read_bw) and plans/bench-ssd.yaml (fio beside node's
// pinned registration and populate, the file on the guest's NVMe drive).
// The hosts are set with --set; nothing else of the
// plans changes. Each exec prints its ratio table; the CSVs go to
// $RDMASWEEP_BENCH_OUT (make bench: out/bench), where make bench prints
// their summaries again. Under TCG the figures say what each program's
// loop costs, nothing about RDMA hardware.
//
//	go test -tags bench -run TestBenchPlans -v ./node/transport/rdma/vmtest
//
// By hand, $RDMASWEEP_BENCH_PLANS (comma-separated) runs only the named
// plans, and $RDMASWEEP_BENCH_SET adds --set assignments (space-separated)
// to each exec: a short run of bench-rdma made runner's notebook testdata
// (runner/testdata/notebook/README.md).
func TestBenchPlans(t *testing.T) {
	needHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	root, err := guest.ModuleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := os.Getenv("RDMASWEEP_BENCH_OUT")
	if out == "" {
		out = t.TempDir()
	}
	dir := t.TempDir()
	runner, node := filepath.Join(dir, "runner"), os.Getenv("RDMASWEEP_NODE")
	if err := buildRunner(ctx, runner); err != nil {
		t.Fatal(err)
	}
	if node == "" {
		node = filepath.Join(dir, "node")
		if err := guest.BuildNode(ctx, node); err != nil {
			t.Fatal(err)
		}
	}
	// bench-ssd's file lives on the guest's NVMe drive (ext4), so a cold
	// point reads a disk, as on a real host.
	disk := filepath.Join(dir, "nvme.img")
	if err := guest.NewExt4Image(ctx, disk, 768<<20); err != nil {
		t.Fatal(err)
	}
	g, err := guest.Boot(ctx, guest.Options{Log: testLog{t}, NVMe: disk})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	if out, err := guestSh(g, mountNVMe(filepath.Dir(benchSSDFile))); err != nil {
		t.Fatalf("mount the NVMe drive: %v\n%s", err, out)
	}
	knownHosts := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(knownHosts, []byte(g.KnownHostsLine()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "HOME="+t.TempDir())
	plans := []string{"bench-rdma", "bench-ssd"}
	if p := os.Getenv("RDMASWEEP_BENCH_PLANS"); p != "" {
		plans = strings.Split(p, ",")
	}
	for _, name := range plans {
		args := []string{"exec", filepath.Join(root, "plans", name+".yaml"), "--rerun",
			"--out", filepath.Join(out, name+".csv"),
			"--set", "output.logs=" + filepath.Join(out, "logs"),
			"--set", "node.binary=" + node, "--set", "node.remote_path=" + remoteNode,
			"--set", "ssh.known_hosts=" + knownHosts, "--set", "ssh.host_key_policy=strict"}
		for _, role := range []string{"server", "client"} {
			for k, v := range map[string]string{"address": "127.0.0.1", "port": fmt.Sprint(g.SSHPort), "user": g.User, "identity_file": g.KeyPath} {
				args = append(args, "--set", "hosts."+role+"."+k+"="+v)
			}
		}
		args = append(args, "--set", "hosts.server.data_address="+guest.GuestIP)
		if name == "bench-ssd" {
			args = append(args, "--set", "server.file="+benchSSDFile)
		}
		for _, a := range strings.Fields(os.Getenv("RDMASWEEP_BENCH_SET")) {
			args = append(args, "--set", a)
		}
		cmd := exec.CommandContext(ctx, runner, args...)
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		t.Logf("%s (%s):\n%s", name, time.Since(start).Round(time.Second), stdout.String())
		os.Stdout.WriteString(name + ":\n" + stdout.String())
		if err != nil {
			t.Errorf("runner exec %s: %v\n%s", name, err, lastLines(stderr.String(), 20))
		}
		if !strings.Contains(stdout.String(), "median ratio") {
			t.Errorf("%s printed no ratio", name)
		}
	}
}

// benchSSDFile is bench-ssd's file in the guest, on its NVMe drive.
const benchSSDFile = "/mnt/nvme/rdmasweep-bench-ssd.dat"

// guestSh runs a shell script in g as its SSH user and returns its
// combined output.
func guestSh(g *guest.Guest, script string) ([]byte, error) {
	c, err := g.Dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	return sess.CombinedOutput(script)
}
