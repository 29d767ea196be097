package hostfacts

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"rdmasweep/internal/cpuset"
	"rdmasweep/internal/words"
)

// State is how the host is set up, where that changes what it measures:
// CPU frequency scaling, transparent huge pages, the kernel command line,
// and the PCIe links of its network devices. A fact the host lacks is
// left zero; the None methods say so in words.
type State struct {
	CPUFreq CPUFreq
	// THPEnabled and THPDefrag are the modes sysfs selects (the word in
	// brackets of "always [madvise] never"); "" without THP.
	THPEnabled, THPDefrag string
	Cmdline               string // /proc/cmdline
	// PCIe are the network devices on PCIe, RDMA devices and interfaces
	// alike, one per PCI function, in the order sysfs lists them.
	PCIe []PCIeLink
}

// CPUFreq is cpu0's frequency scaling (cpufreq's policy for it).
type CPUFreq struct {
	Driver, Governor string // "" without cpufreq
	MinKHz, MaxKHz   int64  // the policy's bounds; 0 when unknown
	HWMaxKHz         int64  // the CPU's own maximum (cpuinfo_max_freq)
}

// None says why there is no cpufreq state, or "" when there is.
func (c CPUFreq) None() string {
	if c.Driver == "" && c.Governor == "" {
		return "no cpufreq"
	}
	return ""
}

// PCIeLink is one PCI function that carries network devices, and its link
// as sysfs reports it.
type PCIeLink struct {
	Address string   // the PCI function, 0000:3b:00.0
	Names   []string // the RDMA devices and interfaces on it: mlx5_0, ens1f0
	// Speed and MaxSpeed are as sysfs writes them: "16.0 GT/s PCIe";
	// Width and MaxWidth are lanes, 0 when unknown.
	Speed, MaxSpeed string
	Width, MaxWidth int
	NUMANode        *int     // nil when unknown; -1 means no affinity
	IRQs            []string // each MSI IRQ's smp_affinity_list; "?" unreadable
}

// Downtrained reports whether the link runs below what both ends could
// train to: fewer lanes, or a lower speed.
func (l PCIeLink) Downtrained() bool {
	if l.Width > 0 && l.MaxWidth > 0 && l.Width < l.MaxWidth {
		return true
	}
	s, ms := gts(l.Speed), gts(l.MaxSpeed)
	return s > 0 && ms > 0 && s < ms
}

// Link is the link as people say it: "16.0 GT/s x16".
func (l PCIeLink) Link() string { return linkText(l.Speed, l.Width) }

// MaxLink is the best link the device and slot allow.
func (l PCIeLink) MaxLink() string { return linkText(l.MaxSpeed, l.MaxWidth) }

func linkText(speed string, width int) string {
	s := strings.TrimSuffix(strings.TrimSpace(speed), " PCIe")
	if s == "" {
		s = "unknown speed"
	}
	if width <= 0 {
		return s + " x?"
	}
	return fmt.Sprintf("%s x%d", s, width)
}

// gts is a sysfs link speed in GT/s ("8.0 GT/s PCIe", "8 GT/s"); 0 when
// unknown ("Unknown speed").
func gts(s string) float64 {
	f, _, _ := strings.Cut(strings.TrimSpace(s), " ")
	v, err := strconv.ParseFloat(f, 64)
	if err != nil {
		return 0
	}
	return v
}

// IRQSummary summarises the affinity of the device's MSI IRQs, which
// are its queues' (and a few for control): "32 IRQs, one CPU each, over
// CPUs 0-31"; "" when it has none.
func (l PCIeLink) IRQSummary() string {
	if len(l.IRQs) == 0 {
		return ""
	}
	all := cpuset.Set{}
	single, same := true, true
	for _, list := range l.IRQs {
		cpus, err := cpuset.Parse(list)
		if err != nil {
			single = false
			continue
		}
		single = single && len(cpus) == 1
		same = same && list == l.IRQs[0]
		for c := range cpus {
			all[c] = true
		}
	}
	n := words.Count(len(l.IRQs), "IRQ")
	switch {
	case len(all) == 0:
		return n + ", affinity unreadable"
	case single && len(l.IRQs) > 1:
		return fmt.Sprintf("%s, one CPU each, over CPUs %s", n, all)
	case same:
		return fmt.Sprintf("%s, all on CPUs %s", n, all)
	}
	return fmt.Sprintf("%s over CPUs %s", n, all)
}

// PCIeOf is the PCIe link carrying the named RDMA device or interface.
func (s State) PCIeOf(names ...string) (PCIeLink, bool) {
	for _, l := range s.PCIe {
		for _, n := range names {
			if n != "" && slices.Contains(l.Names, n) {
				return l, true
			}
		}
	}
	return PCIeLink{}, false
}

// stateLine reads a line about the host's setup (fs its tab-separated
// fields, v the first value trimmed) and says whether it was one.
func (s *State) stateLine(fs []string, v string) bool {
	khz := func() int64 { n, _ := strconv.ParseInt(v, 10, 64); return n }
	switch fs[0] {
	case "cpu_governor":
		s.CPUFreq.Governor = v
	case "cpufreq_driver":
		s.CPUFreq.Driver = v
	case "cpufreq_min_khz":
		s.CPUFreq.MinKHz = khz()
	case "cpufreq_max_khz":
		s.CPUFreq.MaxKHz = khz()
	case "cpufreq_hw_max_khz":
		s.CPUFreq.HWMaxKHz = khz()
	case "thp_enabled":
		s.THPEnabled = selected(v)
	case "thp_defrag":
		s.THPDefrag = selected(v)
	case "cmdline":
		s.Cmdline = v
	case "pcie":
		s.pcieLine(fs)
	default:
		return false
	}
	return true
}

// pcieLine adds a device to the link of its PCI function.
func (s *State) pcieLine(fs []string) {
	if len(fs) < 9 {
		return
	}
	for i := range s.PCIe {
		if s.PCIe[i].Address == fs[2] {
			s.PCIe[i].Names = append(s.PCIe[i].Names, fs[1])
			return
		}
	}
	w, _ := strconv.Atoi(strings.TrimSpace(fs[4]))
	mw, _ := strconv.Atoi(strings.TrimSpace(fs[6]))
	l := PCIeLink{
		Address: fs[2], Names: []string{fs[1]}, Speed: strings.TrimSpace(fs[3]), Width: w,
		MaxSpeed: strings.TrimSpace(fs[5]), MaxWidth: mw, NUMANode: numa(fs[7]),
	}
	if irqs := strings.TrimSpace(fs[8]); irqs != "" {
		l.IRQs = strings.Fields(irqs)
	}
	s.PCIe = append(s.PCIe, l)
}

// selected is the bracketed word of a sysfs choice ("always [madvise]
// never"), or the value itself when nothing is bracketed.
func selected(v string) string {
	if _, after, ok := strings.Cut(v, "["); ok {
		if w, _, ok := strings.Cut(after, "]"); ok {
			return w
		}
	}
	return v
}
