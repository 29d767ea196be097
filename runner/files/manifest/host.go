package manifest

import (
	"context"

	"rdmasweep/runner/hosts/hostfacts"
	"rdmasweep/runner/hosts/remote"
)

// Query says what to collect on one host.
type Query struct {
	Role     string // "server" or "client"
	NodePath string // absolute path of node on the host
	File     string // the server's data file; "" for the client
	CPUs     string // the role's pinning, recorded as given
	// Sysroot prefixes /proc and /sys, so tests can point the script at
	// a fake tree; "" on real hosts.
	Sysroot string
	// Binary and BinaryArch are the local file node came from and the
	// architecture it was built for.
	Binary, BinaryArch string
}

// Collect gathers one host's facts with a single command on h (see
// runner/hosts/hostfacts) and records them as the manifest's Host.
func Collect(ctx context.Context, h remote.Host, q Query) (Host, error) {
	f, err := hostfacts.Collect(ctx, h, hostfacts.Query{NodePath: q.NodePath, File: q.File, Sysroot: q.Sysroot})
	if err != nil {
		return Host{}, err
	}
	host := Host{
		Role: q.Role, Name: h.Name(), CPUs: q.CPUs,
		Hostname: f.Hostname, Kernel: f.Kernel, Arch: f.Arch, CPUModel: f.CPUModel, CPUGovernor: f.CPUGovernor,
		NICs:  []NIC{},
		Node:  Node{Path: q.NodePath, Version: f.Node.Version, SHA256: f.Node.SHA256, Binary: q.Binary, Arch: q.BinaryArch},
		State: stateOf(f.State),
	}
	if host.CPUGovernor == "" {
		none := f.State.CPUFreq.None()
		if none == "" {
			none = "no cpufreq governor"
		}
		host.CPUGovernor = "none: " + none
	}
	for _, n := range f.NICs {
		nic := NIC{
			Device: n.Device, Port: n.Port, Firmware: n.Firmware, Rate: n.Rate, LinkLayer: n.LinkLayer, State: n.State,
			Netdev: n.Netdev, ActiveMTU: n.ActiveMTU, NetdevMTU: n.NetdevMTU, NUMANode: n.NUMANode, GIDs: []GID{},
		}
		for _, g := range n.GIDs {
			nic.GIDs = append(nic.GIDs, GID{Index: g.Index, Type: g.Type, GID: g.GID})
		}
		host.NICs = append(host.NICs, nic)
	}
	if ff := f.File; ff != nil {
		host.File = &File{
			Path: ff.Path, Exists: ff.Exists, FSType: ff.FSType, FSDevice: ff.FSDevice,
			BlockDevice: ff.BlockDevice, Model: ff.BlockModel, NUMANode: ff.BlockNUMA,
		}
	}
	// A clock that cannot be read is recorded as unknown, not a failure.
	if c, err := hostfacts.ReadClock(ctx, h); err == nil {
		host.Clock = &Clock{OffsetNs: int64(c.Offset), UncertaintyNs: int64(c.Uncertainty)}
	}
	return host, nil
}
