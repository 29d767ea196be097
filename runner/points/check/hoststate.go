package check

import (
	"fmt"
	"strings"

	"rdmasweep/results"
	"rdmasweep/runner/hosts/hostfacts"
	"rdmasweep/runner/points/preflight"
)

// hostState is a row's STATE cell and its warnings: how the host is set
// up where that changes a result. The CPU's frequency governor, THP's
// mode, and the PCIe link of the NIC the role uses (an rdma plan's
// device; for tcp, which interface carries the data is not known here,
// so every PCIe NIC) are shown; a powersave governor, a frequency capped
// below the CPU's maximum and a link trained below its best are warned
// about. "WARN" leads the cell when there is a warning, as in CLOCK.
func hostState(f hostfacts.Facts, need preflight.Need) (cell string, warnings []string) {
	s := f.State
	var parts []string
	switch c := s.CPUFreq; {
	case c.None() != "":
		parts = append(parts, c.None())
	case c.Governor == "":
		parts = append(parts, "no governor")
	default:
		parts = append(parts, c.Governor)
		if c.Governor == "powersave" {
			warnings = append(warnings, fmt.Sprintf("the CPU frequency governor is powersave (%s): the cores clock down while they wait for reads, and the figures with them; set performance (cpupower frequency-set -g performance)", c.Driver))
		}
		if c.MaxKHz > 0 && c.HWMaxKHz > 0 && c.MaxKHz < c.HWMaxKHz {
			parts = append(parts, fmt.Sprintf("max %s of %s", mhz(c.MaxKHz), mhz(c.HWMaxKHz)))
			warnings = append(warnings, fmt.Sprintf("scaling_max_freq caps the CPU at %s, below its %s; raise it (cpupower frequency-set -u %dMHz)", mhz(c.MaxKHz), mhz(c.HWMaxKHz), c.HWMaxKHz/1000))
		}
	}
	if s.THPEnabled == "" {
		parts = append(parts, "no thp")
	} else {
		parts = append(parts, "thp "+s.THPEnabled)
	}
	links := usedLinks(f, need)
	if len(links) == 0 {
		parts = append(parts, "no PCIe NIC")
	}
	for _, l := range links {
		p := l.Names[0] + " " + l.Link()
		if l.Downtrained() {
			p += " of " + l.MaxLink()
			warnings = append(warnings, fmt.Sprintf("%s (%s) trained its PCIe link at %s, below its %s: the slot, not the NIC, may cap the bandwidth; reseat the card or move it to a slot that gives the full link", strings.Join(l.Names, ", "), l.Address, l.Link(), l.MaxLink()))
		}
		parts = append(parts, p)
	}
	cell = strings.Join(parts, ", ")
	if len(warnings) > 0 {
		cell = "WARN " + cell
	}
	return cell, warnings
}

// usedLinks are the PCIe links the role's data may cross: for rdma the
// device node chose (or the plan's, or the first) and its interface; for
// tcp every PCIe NIC.
func usedLinks(f hostfacts.Facts, need preflight.Need) []hostfacts.PCIeLink {
	if need.Transport != results.TransportRDMA {
		return f.State.PCIe
	}
	name := need.Device
	if f.Choice != nil {
		name = f.Choice.Device
	}
	for _, n := range f.NICs {
		if name == "" || n.Device == name {
			if l, ok := f.State.PCIeOf(n.Device, n.Netdev); ok {
				return []hostfacts.PCIeLink{l}
			}
			return nil
		}
	}
	return nil
}

func mhz(khz int64) string { return fmt.Sprintf("%d MHz", khz/1000) }
