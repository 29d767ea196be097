package hostfacts

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"rdmasweep/runner/hosts/remote"
)

// fakePCIeNIC writes, under root, an RDMA device and its interface on one
// PCI function whose link trained at speed/width of maxSpeed/maxWidth,
// with MSI IRQs whose affinity lists are irqs (IRQ 40 up).
func fakePCIeNIC(t *testing.T, root, speed, width, maxSpeed, maxWidth string, irqs ...string) {
	t.Helper()
	fn := root + "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0"
	write(t, fn+"/current_link_speed", speed+"\n")
	write(t, fn+"/current_link_width", width+"\n")
	write(t, fn+"/max_link_speed", maxSpeed+"\n")
	write(t, fn+"/max_link_width", maxWidth+"\n")
	write(t, fn+"/numa_node", "1\n")
	for i, list := range irqs {
		n := 40 + i
		write(t, fn+"/msi_irqs/"+itoa(n), "msix\n")
		write(t, root+"/proc/irq/"+itoa(n)+"/smp_affinity_list", list+"\n")
	}
	for _, dev := range []string{"/sys/class/infiniband/mlx5_0", "/sys/class/net/ens1f0"} {
		if err := os.MkdirAll(root+dev, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(fn, root+dev+"/device"); err != nil {
			t.Fatal(err)
		}
	}
	// A virtual interface beside it has no PCIe link.
	write(t, root+"/sys/class/net/veth0/mtu", "1500\n")
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestCollectHostState runs the real script against a fake /proc and
// /sys: cpufreq, THP, the command line and a PCIe NIC trained at x8 of
// x16.
func TestCollectHostState(t *testing.T) {
	root := t.TempDir()
	cf := root + "/sys/devices/system/cpu/cpu0/cpufreq/"
	write(t, cf+"scaling_governor", "powersave\n")
	write(t, cf+"scaling_driver", "intel_pstate\n")
	write(t, cf+"scaling_min_freq", "800000\n")
	write(t, cf+"scaling_max_freq", "3900000\n")
	write(t, cf+"cpuinfo_max_freq", "3900000\n")
	write(t, root+"/sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n")
	write(t, root+"/sys/kernel/mm/transparent_hugepage/defrag", "always defer defer+madvise [madvise] never\n")
	write(t, root+"/proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 intel_iommu=on\n")
	fakePCIeNIC(t, root, "8.0 GT/s PCIe", "8", "16.0 GT/s PCIe", "16", "0", "1", "2", "3")

	f, err := Collect(context.Background(), remote.Local{}, Query{Sysroot: root})
	if err != nil {
		t.Fatal(err)
	}
	s := f.State
	if c := s.CPUFreq; c != (CPUFreq{Driver: "intel_pstate", Governor: "powersave", MinKHz: 800000, MaxKHz: 3900000, HWMaxKHz: 3900000}) || c.None() != "" || f.CPUGovernor != "powersave" {
		t.Errorf("cpufreq %+v, governor %q", c, f.CPUGovernor)
	}
	if s.THPEnabled != "madvise" || s.THPDefrag != "madvise" || s.Cmdline != "BOOT_IMAGE=/vmlinuz root=/dev/sda1 intel_iommu=on" {
		t.Errorf("thp %q/%q cmdline %q", s.THPEnabled, s.THPDefrag, s.Cmdline)
	}
	if len(s.PCIe) != 1 {
		t.Fatalf("PCIe %+v, want one function for mlx5_0 and ens1f0", s.PCIe)
	}
	l := s.PCIe[0]
	if l.Address != "0000:3b:00.0" || strings.Join(l.Names, ",") != "mlx5_0,ens1f0" || l.NUMANode == nil || *l.NUMANode != 1 {
		t.Errorf("link %+v", l)
	}
	if l.Link() != "8.0 GT/s x8" || l.MaxLink() != "16.0 GT/s x16" || !l.Downtrained() {
		t.Errorf("link %s of %s, downtrained %v", l.Link(), l.MaxLink(), l.Downtrained())
	}
	if got := l.IRQSummary(); got != "4 IRQs, one CPU each, over CPUs 0-3" {
		t.Errorf("IRQs %q", got)
	}
	if got, ok := s.PCIeOf("", "ens1f0"); !ok || got.Address != l.Address {
		t.Errorf("PCIeOf(ens1f0) %+v %v", got, ok)
	}
	if _, ok := s.PCIeOf("veth0"); ok {
		t.Error("veth0 has a PCIe link")
	}

	// A guest or namespace host: no cpufreq, no PCIe NIC.
	empty := t.TempDir()
	write(t, empty+"/sys/class/net/eth0/mtu", "1500\n")
	f, err = Collect(context.Background(), remote.Local{}, Query{Sysroot: empty})
	if err != nil {
		t.Fatal(err)
	}
	if f.State.CPUFreq.None() != "no cpufreq" || len(f.State.PCIe) != 0 || f.State.THPEnabled != "" {
		t.Errorf("empty host state %+v", f.State)
	}
}

func TestLinkAndIRQs(t *testing.T) {
	for _, tc := range []struct {
		l    PCIeLink
		down bool
		irqs string
	}{
		{PCIeLink{Speed: "16.0 GT/s PCIe", Width: 16, MaxSpeed: "16.0 GT/s PCIe", MaxWidth: 16, IRQs: []string{"0-31", "0-31"}}, false, "2 IRQs, all on CPUs 0-31"},
		{PCIeLink{Speed: "8 GT/s", Width: 16, MaxSpeed: "16 GT/s", MaxWidth: 16, IRQs: []string{"0-3", "4", "?"}}, true, "3 IRQs over CPUs 0-4"},
		{PCIeLink{Speed: "Unknown speed", Width: 16, MaxSpeed: "16.0 GT/s PCIe", MaxWidth: 16}, false, ""},
		{PCIeLink{Speed: "2.5 GT/s PCIe", Width: 1, MaxSpeed: "2.5 GT/s PCIe", MaxWidth: 1, IRQs: []string{"5"}}, false, "1 IRQ, all on CPUs 5"},
	} {
		if tc.l.Downtrained() != tc.down || tc.l.IRQSummary() != tc.irqs {
			t.Errorf("%s of %s: downtrained %v, IRQs %q; want %v, %q", tc.l.Link(), tc.l.MaxLink(), tc.l.Downtrained(), tc.l.IRQSummary(), tc.down, tc.irqs)
		}
	}
}
