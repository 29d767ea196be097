package manifest

import "rdmasweep/runner/hosts/hostfacts"

// HostState is how a host was set up, where that changes what it
// measures. A fact the host does not have (no cpufreq in a guest, no
// PCIe NIC in a network namespace) is recorded as a "none" that says so,
// never as an empty field.
type HostState struct {
	CPUFreq CPUFreq `json:"cpufreq"`
	THP     THP     `json:"thp"`
	Cmdline string  `json:"cmdline"` // /proc/cmdline
	PCIe    PCIe    `json:"pcie"`
}

// CPUFreq is cpu0's frequency scaling, or None.
type CPUFreq struct {
	None     string `json:"none,omitempty"` // "no cpufreq"
	Driver   string `json:"driver,omitempty"`
	Governor string `json:"governor,omitempty"`
	MinKHz   int64  `json:"min_khz,omitempty"`    // the policy's bounds
	MaxKHz   int64  `json:"max_khz,omitempty"`    //
	HWMaxKHz int64  `json:"hw_max_khz,omitempty"` // the CPU's own maximum
}

// THP is transparent huge pages' mode, or None.
type THP struct {
	None    string `json:"none,omitempty"` // "no transparent huge pages"
	Enabled string `json:"enabled,omitempty"`
	Defrag  string `json:"defrag,omitempty"`
}

// PCIe are the host's network devices on PCIe, or None.
type PCIe struct {
	None string    `json:"none,omitempty"` // "no PCIe NIC"
	NICs []PCIeNIC `json:"nics,omitempty"`
}

// PCIeNIC is one PCI function carrying RDMA devices or interfaces, its
// link as trained and at best, and its MSI IRQs' affinity.
type PCIeNIC struct {
	Address     string   `json:"address"` // 0000:3b:00.0
	Names       []string `json:"names"`   // mlx5_0, ens1f0
	Speed       string   `json:"speed"`   // as sysfs says it, "16.0 GT/s PCIe"
	Width       int      `json:"width"`
	MaxSpeed    string   `json:"max_speed"`
	MaxWidth    int      `json:"max_width"`
	Downtrained bool     `json:"downtrained"` // below its max speed or width
	NUMANode    *int     `json:"numa_node"`   // nil when unknown; -1 means no affinity
	// IRQAffinity summarises its MSI IRQs' smp_affinity_list: "32 IRQs,
	// one CPU each, over CPUs 0-31", or "none: no MSI IRQs".
	IRQAffinity string `json:"irq_affinity"`
}

// stateOf records the facts' host state.
func stateOf(s hostfacts.State) HostState {
	st := HostState{Cmdline: s.Cmdline}
	if none := s.CPUFreq.None(); none != "" {
		st.CPUFreq.None = none
	} else {
		c := s.CPUFreq
		st.CPUFreq = CPUFreq{Driver: c.Driver, Governor: c.Governor, MinKHz: c.MinKHz, MaxKHz: c.MaxKHz, HWMaxKHz: c.HWMaxKHz}
	}
	if s.THPEnabled == "" {
		st.THP.None = "no transparent huge pages"
	} else {
		st.THP = THP{Enabled: s.THPEnabled, Defrag: s.THPDefrag}
	}
	if len(s.PCIe) == 0 {
		st.PCIe.None = "no PCIe NIC"
	}
	for _, l := range s.PCIe {
		irqs := l.IRQSummary()
		if irqs == "" {
			irqs = "none: no MSI IRQs"
		}
		st.PCIe.NICs = append(st.PCIe.NICs, PCIeNIC{
			Address: l.Address, Names: l.Names, Speed: l.Speed, Width: l.Width, MaxSpeed: l.MaxSpeed, MaxWidth: l.MaxWidth,
			Downtrained: l.Downtrained(), NUMANode: l.NUMANode, IRQAffinity: irqs,
		})
	}
	return st
}
