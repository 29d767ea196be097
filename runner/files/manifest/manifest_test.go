package manifest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"rdmasweep/results"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
)

// TestHostJSON records a fake host (one RoCE port with a GID, a data file
// and node) and pins the JSON keys scripts read: they are a contract, so
// a key may be added but never renamed or dropped. runner/hosts/hostfacts tests
// the facts themselves.
func TestHostJSON(t *testing.T) {
	root := t.TempDir()
	ib := "sys/class/infiniband/mlx5_0/ports/1/"
	for path, content := range map[string]string{
		"proc/sys/kernel/hostname":                         "benchbox\n",
		"proc/cpuinfo":                                     "model name\t: Xeon\n",
		ib + "link_layer":                                  "Ethernet\n",
		ib + "gid_attrs/ndevs/0":                           "ens1f0\n",
		ib + "gid_attrs/types/0":                           "RoCE v2\n",
		ib + "gids/0":                                      "fe80:0000:0000:0000:0a00:27ff:fe00:0001\n",
		"sys/class/net/ens1f0/mtu":                         "9000\n",
		"sys/kernel/mm/transparent_hugepage/enabled":       "[always] madvise never\n",
		"sys/kernel/mm/transparent_hugepage/defrag":        "always defer defer+madvise [madvise] never\n",
		"proc/cmdline":                                     "root=/dev/vda ro\n",
		"sys/devices/pci0/0000:3b:00.0/current_link_speed": "16.0 GT/s PCIe\n",
		"sys/devices/pci0/0000:3b:00.0/current_link_width": "16\n",
		"sys/devices/pci0/0000:3b:00.0/max_link_speed":     "16.0 GT/s PCIe\n",
		"sys/devices/pci0/0000:3b:00.0/max_link_width":     "16\n",
		"sys/devices/pci0/0000:3b:00.0/msi_irqs/40":        "msix\n",
		"proc/irq/40/smp_affinity_list":                    "0-3\n",
		"node":                                             "#!/bin/sh\necho '{\"version\":\"v1.2.3-test\"}'\n",
	} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(path)), 0o755)
		if err := os.WriteFile(filepath.Join(root, path), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// mlx5_0 and ens1f0 are one PCI function.
	os.MkdirAll(filepath.Join(root, "sys/class/net/ens1f0"), 0o755)
	for _, d := range []string{"sys/class/infiniband/mlx5_0/device", "sys/class/net/ens1f0/device"} {
		if err := os.Symlink(filepath.Join(root, "sys/devices/pci0/0000:3b:00.0"), filepath.Join(root, d)); err != nil {
			t.Fatal(err)
		}
	}
	node := filepath.Join(root, "node")
	data := filepath.Join(root, "data.dat")

	h, err := Collect(context.Background(), remote.Local{}, Query{Role: "server", NodePath: node, File: data, CPUs: "0-3", Sysroot: root})
	if err != nil {
		t.Fatal(err)
	}
	if h.Role != "server" || h.Name != "local" || h.CPUs != "0-3" || h.Hostname != "benchbox" || h.CPUModel != "Xeon" ||
		len(h.NICs) != 1 || h.NICs[0].NetdevMTU != 9000 || len(h.NICs[0].GIDs) != 1 || h.NICs[0].GIDs[0].Type != "RoCE v2" ||
		h.Node.Path != node || h.Node.Version != "v1.2.3-test" || h.Node.SHA256 == "" || h.File == nil || h.File.Path != data {
		t.Errorf("host: %+v", h)
	}
	st := h.State
	if h.CPUGovernor != "none: no cpufreq" || st.CPUFreq.None != "no cpufreq" || st.THP != (THP{Enabled: "always", Defrag: "madvise"}) || st.Cmdline != "root=/dev/vda ro" ||
		len(st.PCIe.NICs) != 1 || st.PCIe.NICs[0].IRQAffinity != "1 IRQ, all on CPUs 0-3" || st.PCIe.NICs[0].Downtrained {
		t.Errorf("state %+v, governor %q", st, h.CPUGovernor)
	}
	// A guest or a namespace host says what it lacks.
	bare, err := Collect(context.Background(), remote.Local{}, Query{Role: "client", Sysroot: t.TempDir()})
	if err != nil || bare.State.THP.None != "no transparent huge pages" || bare.State.PCIe.None != "no PCIe NIC" || bare.State.CPUFreq.None != "no cpufreq" {
		t.Errorf("bare host state %+v, %v", bare.State, err)
	}
	// This machine's clock against itself: zero within the bound.
	if c := h.Clock; c == nil || c.UncertaintyNs <= 0 || c.OffsetNs-c.UncertaintyNs > 0 || c.OffsetNs+c.UncertaintyNs < 0 {
		t.Errorf("clock %+v, want an interval around 0", c)
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	json.Unmarshal(b, &doc)
	var keys []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				keys = append(keys, prefix+k)
				walk(prefix+k+".", x)
			}
		case []any:
			for _, x := range v[:min(1, len(v))] {
				walk(prefix, x)
			}
		}
	}
	walk("", doc)
	sort.Strings(keys)
	want := []string{
		"arch", "clock", "clock.offset_ns", "clock.uncertainty_ns", "cpu_governor", "cpu_model", "cpus",
		"file", "file.block_device", "file.exists", "file.fs_device", "file.fs_type", "file.model", "file.numa_node", "file.path",
		"hostname", "kernel", "name",
		"nics", "nics.active_mtu", "nics.device", "nics.firmware", "nics.gids", "nics.gids.gid", "nics.gids.index", "nics.gids.type",
		"nics.link_layer", "nics.netdev", "nics.netdev_mtu", "nics.numa_node", "nics.port", "nics.rate", "nics.state",
		"node", "node.path", "node.sha256", "node.version",
		"role",
		"state", "state.cmdline", "state.cpufreq", "state.cpufreq.none", "state.pcie", "state.pcie.nics",
		"state.pcie.nics.address", "state.pcie.nics.downtrained", "state.pcie.nics.irq_affinity", "state.pcie.nics.max_speed",
		"state.pcie.nics.max_width", "state.pcie.nics.names", "state.pcie.nics.numa_node", "state.pcie.nics.speed", "state.pcie.nics.width",
		"state.thp", "state.thp.defrag", "state.thp.enabled",
	}
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("JSON keys\n got %v\nwant %v", keys, want)
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
		os.WriteFile(filepath.Join(repo, "p.yaml"), src, 0o644) // untracked: not dirty
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

// TestAddPathComparesByValue: the same path reported twice, its optional
// fields pointing at equal values in different places (as two roles'
// reports do), is recorded once; a different value is a second path.
func TestAddPathComparesByValue(t *testing.T) {
	rec := &Record{Path: filepath.Join(t.TempDir(), "run.json"), M: &Manifest{Hosts: make([]Host, 1)}, roles: map[string]int{"client": 0}}
	tgt := role.Target{Role: "client", Label: "client"}
	path := func(granted bool, tos int) *results.RDMAPath {
		return &results.RDMAPath{Device: "rxe1", GID: "::ffff:10.0.3.15", RelaxedOrderingGranted: &granted, DefaultRoCETOS: &tos}
	}
	fail := func(msg string) { t.Error(msg) }
	rec.AddPath(tgt, path(false, 96), fail)
	rec.AddPath(tgt, path(false, 96), fail)
	if n := len(rec.M.Hosts[0].RDMA); n != 1 {
		t.Fatalf("the same path twice recorded %d paths, want 1", n)
	}
	rec.AddPath(tgt, path(false, 32), fail)
	if n := len(rec.M.Hosts[0].RDMA); n != 2 {
		t.Fatalf("a path with another default ToS recorded %d paths in all, want 2", n)
	}
}

// TestDiskCeilingsJSON pins the keys of the disk ceilings (a contract
// for scripts, as the hosts' keys are), left out when there are none, and
// Ceilings gives each host's for the rows.
func TestDiskCeilingsJSON(t *testing.T) {
	m := &Manifest{RunID: "r1"}
	b, _ := json.Marshal(m)
	if strings.Contains(string(b), "disk_ceilings") {
		t.Errorf("no ceilings measured, yet the manifest has the key: %s", b)
	}
	m.DiskCeilings = []DiskCeiling{{Host: "server (a)", File: "/srv/f", MBs: 1450, Runs: []CeilingRun{{Argv: []string{"fio", "--direct=1"}, MBs: 1450}}}}
	b, _ = json.Marshal(m)
	for _, key := range []string{`"disk_ceilings":[{"host":"server (a)","file":"/srv/f","mb_s":1450,"runs":[{"argv":["fio","--direct=1"],"mb_s":1450}]}]`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("manifest JSON lacks %s:\n%s", key, b)
		}
	}
	if got := m.Ceilings(); len(got) != 1 || got["server (a)"] != 1450 {
		t.Errorf("Ceilings() = %v", got)
	}
}
