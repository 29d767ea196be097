package check

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/runner/hosts/hostfacts"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/points/preflight"
)

// sysfs is a fake /proc and /sys for the facts script (hostfacts.Query's
// Sysroot): files by path under it, and symlinks.
type sysfs struct {
	t    *testing.T
	root string
}

func (s sysfs) file(path, content string) {
	s.t.Helper()
	p := filepath.Join(s.root, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// nic adds an RDMA device with one RoCE port on interface netdev, on PCI
// function addr whose link trained at width lanes of 16, at 16 GT/s.
func (s sysfs) nic(dev, netdev, addr, width string) {
	s.t.Helper()
	fn := "sys/devices/pci0000:00/" + addr
	s.file(fn+"/current_link_speed", "16.0 GT/s PCIe")
	s.file(fn+"/current_link_width", width)
	s.file(fn+"/max_link_speed", "16.0 GT/s PCIe")
	s.file(fn+"/max_link_width", "16")
	s.file("sys/class/infiniband/"+dev+"/ports/1/link_layer", "Ethernet")
	s.file("sys/class/infiniband/"+dev+"/ports/1/gid_attrs/ndevs/0", netdev)
	s.file("sys/class/net/"+netdev+"/mtu", "4200")
	for _, d := range []string{"sys/class/infiniband/" + dev, "sys/class/net/" + netdev} {
		if err := os.Symlink(filepath.Join(s.root, fn), filepath.Join(s.root, d, "device")); err != nil {
			s.t.Fatal(err)
		}
	}
}

func (s sysfs) facts() hostfacts.Facts {
	s.t.Helper()
	f, err := hostfacts.Collect(context.Background(), remote.Local{}, hostfacts.Query{Sysroot: s.root})
	if err != nil {
		s.t.Fatal(err)
	}
	return f
}

// TestHostStateWarnings judges hosts made of faked sysfs files, read by
// the real facts script: a powersave governor, a capped frequency and a
// PCIe link trained at x8 of x16 are warned about; a host set up to
// measure, and a guest without cpufreq or a PCIe NIC, are not.
func TestHostStateWarnings(t *testing.T) {
	bench := sysfs{t, t.TempDir()}
	cf := "sys/devices/system/cpu/cpu0/cpufreq/"
	bench.file(cf+"scaling_governor", "powersave")
	bench.file(cf+"scaling_driver", "intel_pstate")
	bench.file(cf+"scaling_max_freq", "2000000")
	bench.file(cf+"cpuinfo_max_freq", "3900000")
	bench.file("sys/kernel/mm/transparent_hugepage/enabled", "always madvise [never]")
	bench.nic("mlx5_0", "ens1f0", "0000:3b:00.0", "16")
	bench.nic("mlx5_1", "ens2f0", "0000:af:00.0", "8")
	f := bench.facts()

	tuned := sysfs{t, t.TempDir()}
	tuned.file(cf+"scaling_governor", "performance")
	tuned.file(cf+"scaling_driver", "acpi-cpufreq")
	tuned.file("sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never")
	tuned.nic("mlx5_0", "ens1f0", "0000:3b:00.0", "16")

	guest := sysfs{t, t.TempDir()}
	guest.file("sys/class/net/eth0/mtu", "1500")

	for _, tc := range []struct {
		name     string
		f        hostfacts.Facts
		need     preflight.Need
		cell     string
		warnings []string // each a prefix
	}{
		{"rdma on the full link", f, preflight.Need{Transport: "rdma", Device: "mlx5_0"},
			"WARN powersave, max 2000 MHz of 3900 MHz, thp never, mlx5_0 16.0 GT/s x16",
			[]string{"the CPU frequency governor is powersave (intel_pstate)", "scaling_max_freq caps the CPU at 2000 MHz, below its 3900 MHz"}},
		{"rdma on the downtrained link", f, preflight.Need{Transport: "rdma", Device: "mlx5_1"},
			"WARN powersave, max 2000 MHz of 3900 MHz, thp never, mlx5_1 16.0 GT/s x8 of 16.0 GT/s x16",
			[]string{"the CPU frequency governor", "scaling_max_freq", "mlx5_1, ens2f0 (0000:af:00.0) trained its PCIe link at 16.0 GT/s x8, below its 16.0 GT/s x16"}},
		{"tcp judges every PCIe NIC", f, preflight.Need{Transport: "tcp"},
			"WARN powersave, max 2000 MHz of 3900 MHz, thp never, mlx5_0 16.0 GT/s x16, mlx5_1 16.0 GT/s x8 of 16.0 GT/s x16",
			[]string{"the CPU frequency governor", "scaling_max_freq", "mlx5_1, ens2f0 (0000:af:00.0) trained"}},
		{"set up to measure", tuned.facts(), preflight.Need{Transport: "rdma"}, "performance, thp madvise, mlx5_0 16.0 GT/s x16", nil},
		{"guest", guest.facts(), preflight.Need{Transport: "rdma"}, "no cpufreq, no thp, no PCIe NIC", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cell, warnings := hostState(tc.f, tc.need)
			if cell != tc.cell {
				t.Errorf("cell %q\nwant %q", cell, tc.cell)
			}
			if len(warnings) != len(tc.warnings) {
				t.Fatalf("warnings %q, want %d", warnings, len(tc.warnings))
			}
			for i, w := range tc.warnings {
				if !strings.HasPrefix(warnings[i], w) {
					t.Errorf("warning %q, want it to start %q", warnings[i], w)
				}
			}
		})
	}
}

// TestWriteShowsState: the STATE column follows CLOCK.
func TestWriteShowsState(t *testing.T) {
	c := &Table{Rows: []*Row{{Role: "server", Host: "local", SSH: "local", DataPath: "-", Probe: "-", ODPProbe: "-", Clock: "local",
		State: "WARN powersave, thp never, no PCIe NIC", Verdict: preflight.Verdict{System: "-", Node: "-", RDMA: "-", File: "-", Memory: "-"}}}}
	var b bytes.Buffer
	if err := c.Write(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if !strings.HasSuffix(lines[0], "CLOCK  STATE") || !strings.HasSuffix(lines[1], "local  WARN powersave, thp never, no PCIe NIC") {
		t.Errorf("table:\n%s", b.String())
	}
}
