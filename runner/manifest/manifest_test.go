package manifest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/runner/remote"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakeNode is a node that answers version and devices as the real one does.
func fakeNode(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "bin", "node")
	write(t, path, `#!/bin/sh
case $1 in
version) echo '{"version":"v1.2.3-test","go":"go1.26","transports":["rdma","tcp"],"arch":"amd64"}';;
devices) echo '{"type":"devices","devices":[{"name":"mlx5_0","max_qp_rd_atom":16,"max_qp_init_rd_atom":16,"odp":true,"ports":[{"port":1,"state":"ACTIVE","link_layer":"Ethernet","active_mtu":4096,"rate_gbps":100,"width":"4x","lid":0,"gids":[]}]}]}';;
esac
`)
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCollectReadsSysfs runs the real script against a fake /proc and /sys
// holding one RoCE port with two populated GIDs and an empty one.
func TestCollectReadsSysfs(t *testing.T) {
	root := t.TempDir()
	write(t, root+"/proc/sys/kernel/hostname", "benchbox\n")
	write(t, root+"/proc/sys/kernel/osrelease", "6.1.0-test\n")
	write(t, root+"/proc/cpuinfo", "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6330 CPU @ 2.00GHz\n")
	write(t, root+"/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "performance\n")
	ib := root + "/sys/class/infiniband/mlx5_0"
	write(t, ib+"/fw_ver", "22.31.1014\n")
	write(t, ib+"/device/numa_node", "1\n")
	write(t, ib+"/ports/1/rate", "100 Gb/sec (4X EDR)\n")
	write(t, ib+"/ports/1/link_layer", "Ethernet\n")
	write(t, ib+"/ports/1/state", "4: ACTIVE\n")
	write(t, ib+"/ports/1/gid_attrs/ndevs/0", "ens1f0\n")
	write(t, ib+"/ports/1/gid_attrs/types/0", "IB/RoCE v1\n")
	write(t, ib+"/ports/1/gids/0", "fe80:0000:0000:0000:0a00:27ff:fe00:0001\n")
	write(t, ib+"/ports/1/gid_attrs/types/3", "RoCE v2\n")
	write(t, ib+"/ports/1/gids/3", "0000:0000:0000:0000:0000:ffff:c633:640a\n")
	write(t, ib+"/ports/1/gid_attrs/types/4", "RoCE v2\n")
	write(t, ib+"/ports/1/gids/4", "0000:0000:0000:0000:0000:0000:0000:0000\n")
	write(t, root+"/sys/class/net/ens1f0/mtu", "9000\n")
	node := fakeNode(t, root)
	data := filepath.Join(root, "data", "file.dat") // not there yet: facts come from its directory

	h, err := Collect(context.Background(), remote.Local{}, Query{Role: "server", NodePath: node, File: data, CPUs: "0-3", Sysroot: root})
	if err != nil {
		t.Fatal(err)
	}
	if h.Role != "server" || h.Name != "local" || h.CPUs != "0-3" || h.Hostname != "benchbox" || h.Kernel != "6.1.0-test" {
		t.Errorf("identity: %+v", h)
	}
	if h.CPUModel != "Intel(R) Xeon(R) Gold 6330 CPU @ 2.00GHz" || h.CPUGovernor != "performance" {
		t.Errorf("cpu: model %q governor %q", h.CPUModel, h.CPUGovernor)
	}
	if len(h.NICs) != 1 {
		t.Fatalf("NICs: %+v", h.NICs)
	}
	n := h.NICs[0]
	if n.Device != "mlx5_0" || n.Port != 1 || n.Firmware != "22.31.1014" || n.Rate != "100 Gb/sec (4X EDR)" || n.LinkLayer != "Ethernet" ||
		n.State != "4: ACTIVE" || n.Netdev != "ens1f0" || n.NetdevMTU != 9000 || n.ActiveMTU != 4096 || n.NUMANode == nil || *n.NUMANode != 1 {
		t.Errorf("NIC: %+v", n)
	}
	want := []GID{{0, "IB/RoCE v1", "fe80:0000:0000:0000:0a00:27ff:fe00:0001"}, {3, "RoCE v2", "0000:0000:0000:0000:0000:ffff:c633:640a"}}
	if len(n.GIDs) != len(want) || n.GIDs[0] != want[0] || n.GIDs[1] != want[1] {
		t.Errorf("GIDs %+v, want %+v (the zero GID left out)", n.GIDs, want)
	}
	if h.Node.Version != "v1.2.3-test" || h.Node.Path != node {
		t.Errorf("node: %+v", h.Node)
	}
	b, _ := os.ReadFile(node)
	if sum := sha256.Sum256(b); h.Node.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("node sha256 %q", h.Node.SHA256)
	}
	if h.File == nil || h.File.Exists || h.File.Path != data || h.File.FSType == "" {
		t.Errorf("file: %+v", h.File)
	}
}

// TestCollectOnThisMachine checks the facts against what the machine says
// by other means, and that a host without RDMA has no NICs but no error.
func TestCollectOnThisMachine(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data.dat")
	write(t, data, "x")
	h, err := Collect(context.Background(), remote.Local{}, Query{Role: "client", NodePath: filepath.Join(dir, "no-node"), File: data})
	if err != nil {
		t.Fatal(err)
	}
	name, _ := os.Hostname()
	uname, _ := exec.Command("uname", "-r").Output()
	if h.Hostname != name || h.Kernel != strings.TrimSpace(string(uname)) || h.Arch == "" {
		t.Errorf("hostname %q kernel %q arch %q; want %q %q", h.Hostname, h.Kernel, h.Arch, name, uname)
	}
	df, _ := exec.Command("df", "-PT", data).Output()
	lines := strings.Split(strings.TrimSpace(string(df)), "\n")
	if fields := strings.Fields(lines[len(lines)-1]); h.File == nil || !h.File.Exists || h.File.FSType != fields[1] || h.File.FSDevice != fields[0] {
		t.Errorf("file %+v, df says %q", h.File, lines)
	}
	if _, err := os.Stat("/sys/class/infiniband"); os.IsNotExist(err) && len(h.NICs) != 0 {
		t.Errorf("NICs without /sys/class/infiniband: %+v", h.NICs)
	}
	if h.Node.Version != "" || h.Node.SHA256 != "" {
		t.Errorf("facts of a node that does not exist: %+v", h.Node)
	}
}

func TestForPlanAndWrite(t *testing.T) {
	dir := t.TempDir()
	src := []byte("name: x\n")
	pl := ForPlan(context.Background(), filepath.Join(dir, "x.yaml"), "x", src, nil)
	sum := sha256.Sum256(src)
	if pl.SHA256 != hex.EncodeToString(sum[:]) || pl.Text != string(src) || pl.GitDescribe != "" {
		t.Errorf("plan outside a repository: %+v", pl)
	}
	if _, err := exec.LookPath("git"); err == nil {
		repo := filepath.Join(dir, "repo")
		for _, args := range [][]string{
			{"init", "-q", repo},
			{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "--allow-empty", "-m", "x"},
		} {
			if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		write(t, filepath.Join(repo, "p.yaml"), string(src)) // untracked: not dirty
		head, _ := exec.Command("git", "-C", repo, "rev-parse", "--short", "HEAD").Output()
		pl := ForPlan(context.Background(), filepath.Join(repo, "p.yaml"), "x", src, nil)
		if pl.GitDescribe != strings.TrimSpace(string(head)) {
			t.Errorf("git describe %q, want %q", pl.GitDescribe, head)
		}
	}
	m := &Manifest{RunID: "r1", Plan: pl, Hosts: []Host{{Role: "server"}}}
	path := PathFor(filepath.Join(dir, "out", "x.csv"), "r1")
	if path != filepath.Join(dir, "out", "r1.json") {
		t.Fatalf("PathFor: %s", path)
	}
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := Write(path, m); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil || got.RunID != "r1" || got.Plan.SHA256 != pl.SHA256 || len(got.Hosts) != 1 {
		t.Fatalf("read back %+v, %v", got, err)
	}
}
