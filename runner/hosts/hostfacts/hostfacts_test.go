package hostfacts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/runner/hosts/remote"
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
devices)
  choice=
  [ "$3" = --route-to ] && [ "$4" = 198.51.100.9 ] && choice=',"address":"198.51.100.10","choice":{"device":"mlx5_0","ib_port":1,"gid_index":3,"gid":"::ffff:198.51.100.10","gid_type":"RoCE v2"}'
  echo '{"type":"devices","devices":[{"name":"mlx5_0","max_qp_rd_atom":16,"max_qp_init_rd_atom":16,"odp":true,"ports":[{"port":1,"state":"ACTIVE","link_layer":"Ethernet","active_mtu":4096,"rate_gbps":100,"width":"4x","lid":0,"gids":[]}]}]'"$choice"'}';;
host) echo '{"type":"host","kernel":"6.1.0-test","mem_total_bytes":68719476736,"mem_available_bytes":34359738368,"memlock_bytes":-1,"cap_ipc_lock":true,"numa_nodes":2,"page_size":4096}';;
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
	write(t, root+"/proc/self/status", "Name:\tsh\nUid:\t1000\t1001\t1001\t1001\n")
	write(t, root+"/proc/self/limits", "Limit                     Soft Limit           Hard Limit           Units     \n"+
		"Max locked memory         8388608              16777216             bytes     \n")
	write(t, root+"/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "performance\n")
	write(t, root+"/sys/devices/system/node/node0/cpulist", "0-15,32-47\n")
	write(t, root+"/sys/devices/system/node/node1/cpulist", "16-31,48-63\n")
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

	f, err := Collect(context.Background(), remote.Local{}, Query{NodePath: node, File: data, Sysroot: root, Devices: []string{"--route-to", "198.51.100.9"}})
	if err != nil {
		t.Fatal(err)
	}
	if f.Hostname != "benchbox" || f.Kernel != "6.1.0-test" || f.UID != 1001 || f.Memlock != "8192" {
		t.Errorf("identity: hostname %q kernel %q uid %d memlock %q", f.Hostname, f.Kernel, f.UID, f.Memlock)
	}
	if f.CPUModel != "Intel(R) Xeon(R) Gold 6330 CPU @ 2.00GHz" || f.CPUGovernor != "performance" {
		t.Errorf("cpu: model %q governor %q", f.CPUModel, f.CPUGovernor)
	}
	if len(f.NICs) != 1 {
		t.Fatalf("NICs: %+v", f.NICs)
	}
	n := f.NICs[0]
	if n.Device != "mlx5_0" || n.Port != 1 || n.Firmware != "22.31.1014" || n.Rate != "100 Gb/sec (4X EDR)" || n.LinkLayer != "Ethernet" ||
		n.State != "4: ACTIVE" || n.Netdev != "ens1f0" || n.NetdevMTU != 9000 || n.ActiveMTU != 4096 || n.NUMANode == nil || *n.NUMANode != 1 {
		t.Errorf("NIC: %+v", n)
	}
	want := []GID{{0, "IB/RoCE v1", "fe80:0000:0000:0000:0a00:27ff:fe00:0001"}, {3, "RoCE v2", "0000:0000:0000:0000:0000:ffff:c633:640a"}}
	if len(n.GIDs) != len(want) || n.GIDs[0] != want[0] || n.GIDs[1] != want[1] {
		t.Errorf("GIDs %+v, want %+v (the zero GID left out)", n.GIDs, want)
	}
	if !f.Node.Present || f.Node.Version != "v1.2.3-test" || strings.Join(f.Node.Transports, ",") != "rdma,tcp" ||
		len(f.Devices) != 1 || f.Devices[0].Name != "mlx5_0" || f.DevicesError != "" {
		t.Errorf("node: %+v devices %+v %q", f.Node, f.Devices, f.DevicesError)
	}
	if c := f.Choice; c == nil || c.Device != "mlx5_0" || c.GIDIndex != 3 || f.ChoiceError != "" {
		t.Errorf("choice %+v %q: want mlx5_0 gid 3, asked with --route-to", f.Choice, f.ChoiceError)
	}
	if h := f.Host; h == nil || h.MemAvailableBytes != 32<<30 || h.NUMANodes != 2 {
		t.Errorf("node host: %+v", f.Host)
	}
	if f.NUMACPUs[0] != "0-15,32-47" || f.NUMACPUs[1] != "16-31,48-63" || len(f.NUMACPUs) != 2 {
		t.Errorf("NUMA CPUs %v", f.NUMACPUs)
	}
	b, _ := os.ReadFile(node)
	if sum := sha256.Sum256(b); f.Node.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("node sha256 %q", f.Node.SHA256)
	}
	if ff := f.File; ff == nil || ff.Exists || ff.Path != data || ff.DirExists || ff.MeasuredAt != root || ff.FSType == "" || ff.AvailBytes <= 0 {
		t.Errorf("file: %+v", f.File)
	}
}

// TestCollectOnThisMachine checks the facts against what the machine says
// by other means, and that a host without RDMA has no NICs but no error.
func TestCollectOnThisMachine(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data.dat")
	write(t, data, "12345")
	f, err := Collect(context.Background(), remote.Local{}, Query{NodePath: filepath.Join(dir, "no-node"), File: data})
	if err != nil {
		t.Fatal(err)
	}
	name, _ := os.Hostname()
	uname, _ := exec.Command("uname", "-r").Output()
	arch, _ := exec.Command("uname", "-m").Output()
	if f.Hostname != name || f.Kernel != strings.TrimSpace(string(uname)) || f.Arch != strings.TrimSpace(string(arch)) {
		t.Errorf("hostname %q kernel %q arch %q; want %q %q %q", f.Hostname, f.Kernel, f.Arch, name, uname, arch)
	}
	// uid and memlock come from /proc/self; the shell's own answers agree.
	memlock, _ := exec.Command("/bin/sh", "-c", "ulimit -l").Output()
	if f.UID != os.Geteuid() || f.Memlock != strings.TrimSpace(string(memlock)) {
		t.Errorf("uid %d memlock %q; want %d %q", f.UID, f.Memlock, os.Geteuid(), memlock)
	}
	df, _ := exec.Command("df", "-PTk", data).Output()
	lines := strings.Split(strings.TrimSpace(string(df)), "\n")
	fields := strings.Fields(lines[len(lines)-1])
	if ff := f.File; ff == nil || !ff.Exists || ff.Size != 5 || ff.Sidecar || !ff.DirExists || !ff.DirWritable || ff.MeasuredAt != data ||
		ff.FSType != fields[1] || ff.FSDevice != fields[0] || ff.AvailBytes < 0 {
		t.Errorf("file %+v, df says %q", f.File, lines)
	}
	if _, err := os.Stat("/sys/class/infiniband"); os.IsNotExist(err) && len(f.NICs) != 0 {
		t.Errorf("NICs without /sys/class/infiniband: %+v", f.NICs)
	}
	if f.Node.Present || f.Node.Version != "" || f.Node.SHA256 != "" {
		t.Errorf("facts of a node that does not exist: %+v", f.Node)
	}

	// The sidecar marks node's file; a client's query names no file.
	write(t, data+".rdmasweep", `{"seed":1,"size":5}`)
	if f, err := Collect(context.Background(), remote.Local{}, Query{File: data}); err != nil || !f.File.Sidecar {
		t.Errorf("file with a sidecar: %+v, %v", f.File, err)
	}
	if f, err := Collect(context.Background(), remote.Local{}, Query{}); err != nil || f.File != nil || f.Arch == "" {
		t.Errorf("no file: %+v, %v", f, err)
	}
}

func TestParse(t *testing.T) {
	out := "hostfacts\t1\narch\tx86_64\nkernel\t6.1.0\nuid\t0\nmemlock_bytes\tunlimited\nnode_present\tyes\n" +
		"node_version\t{\"version\":\"v2\",\"transports\":[\"tcp\"]}\n" +
		"node_devices\t{\"type\":\"error\",\"message\":\"rdma transport not built in\"}\n" +
		"node_sha256\tdeadbeef\nfile_exists\tyes\nfile_size\t4096\nsidecar\tyes\ndir_exists\tyes\nfs_type\ttmpfs\navail_kib\t2048\n" +
		"future_fact\twhatever\n"
	f := parse([]byte(out))
	if f.Arch != "x86_64" || f.UID != 0 || f.Memlock != "unlimited" || f.Node.Version != "v2" || f.Node.SHA256 != "deadbeef" ||
		f.DevicesError != "rdma transport not built in" || len(f.Devices) != 0 {
		t.Errorf("facts: %+v", f)
	}
	if ff := f.File; ff == nil || !ff.Exists || ff.Size != 4096 || !ff.Sidecar || !ff.DirExists || ff.DirWritable || ff.FSType != "tmpfs" || ff.AvailBytes != 2<<20 {
		t.Errorf("file: %+v", f.File)
	}
	if f := parse([]byte("file_exists\tno\n")); f.File == nil || f.File.Exists {
		t.Errorf("file_exists no: %+v", f.File)
	}
}

// shellless is a host whose every command fails as run gives.
type shellless struct {
	remote.Local
	run func() ([]byte, error)
}

func (h shellless) Run(context.Context, []string) ([]byte, error) { return h.run() }

// TestNoShellIsTyped checks how each way of not running the script is
// told apart from a failure that says nothing about the shell. The real
// hosts' answers are checked in TestNoShellOnSSHHosts.
func TestNoShellIsTyped(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func() ([]byte, error)
		want string // the whole error; "" when it must not be a NoShellError
	}{
		{"not found", func() ([]byte, error) {
			return nil, &remote.ExitError{Status: 127, Stderr: []byte("sh: 1: exec: /bin/sh: not found\n")}
		}, "cannot collect facts: no working /bin/sh on the host (exit 127) — the node needs a POSIX shell to be started"},
		{"exits 0 without running it", func() ([]byte, error) { return nil, nil },
			"cannot collect facts: no working /bin/sh on the host (exit 0) — the node needs a POSIX shell to be started"},
		{"local sh missing", func() ([]byte, error) {
			return nil, &os.PathError{Op: "fork/exec", Path: "/bin/sh", Err: os.ErrNotExist}
		}, "cannot collect facts: no working /bin/sh on the host (fork/exec /bin/sh: file does not exist) — the node needs a POSIX shell to be started"},
		{"connection lost", func() ([]byte, error) { return nil, remote.ErrConnectionLost }, ""},
		{"killed", func() ([]byte, error) { return nil, &remote.ExitError{Status: -1, Signal: "KILL"} }, ""},
		{"the script ran, then failed", func() ([]byte, error) {
			return []byte("hostfacts\t1\n"), &remote.ExitError{Status: 2}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Collect(context.Background(), shellless{run: tc.run}, Query{})
			var nosh *NoShellError
			if tc.want == "" {
				if err == nil || errors.Is(err, ErrNoShell) || !strings.HasPrefix(err.Error(), "cannot collect facts: ") {
					t.Fatalf("err = %v; want a plain failure to collect facts", err)
				}
				return
			}
			if !errors.Is(err, ErrNoShell) || !errors.As(err, &nosh) || err.Error() != tc.want {
				t.Fatalf("err = %v\nwant  %s", err, tc.want)
			}
		})
	}
	// The hint quotes what the host said.
	_, err := Collect(context.Background(), shellless{run: func() ([]byte, error) {
		return nil, &remote.ExitError{Status: 126, Stderr: []byte("bash: line 1: /bin/sh: Permission denied\nmore\n")}
	}}, Query{})
	var nosh *NoShellError
	if !errors.As(err, &nosh) || nosh.Status != 126 || !strings.HasPrefix(nosh.Hint(), `the host said "bash: line 1: /bin/sh: Permission denied"; `) {
		t.Fatalf("err %v, hint %q", err, nosh.Hint())
	}
}
