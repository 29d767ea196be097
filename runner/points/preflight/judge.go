// Package preflight decides, before an exec, whether a plan can run on its
// hosts: it judges each host's facts (runner/hosts/hostfacts) against what the
// plan needs of it, giving one table cell per check and a Problem, with a
// one-line hint, for everything that would make the plan fail.
//
// What the plan needs of each role's host is Needs. check judges every
// role with Judge; exec, which shows no table, refuses before any point by
// the same rules where a point cannot run: CheckPrograms (a peer's tool
// missing) and CheckDevices (a device that cannot carry the transport, by
// Unfit). The data path, RDMA and ODP probes need both roles at once and
// run node itself: they are runner/points/probe's.
package preflight

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"rdmasweep/internal/cpuset"
	"rdmasweep/results"
	"rdmasweep/runner/hosts/hostfacts"
)

// Facts are what one host says about itself.
type Facts = hostfacts.Facts

// Device, Port and GID are node's own types for `node devices --json`.
type (
	Device = results.Device
	Port   = results.Port
	GID    = results.GID
)

// Problem is one thing that would make the plan fail.
type Problem struct {
	Check string // the table column: "node", "rdma", "file", "memlock", …
	Msg   string // one line, lowercase
	Hint  string // one line: what to do
	// Whole marks a Msg that says what failed by itself ("cannot collect
	// facts: …"): it is shown as it is, without Check before it.
	Whole bool
}

// Need is what the plan asks of one role's host.
type Need struct {
	Role       string // "server" or "client"
	Transport  string // "tcp" or "rdma"
	NodeSHA256 string // of the local binary that was deployed
	// RDMA selection for this role; Device "" is the first device, IBPort
	// 0 means 1, GIDIndex nil chooses by address. When the host's facts
	// carry node's own Choice (node devices --address/--route-to), that
	// is what is judged, and these only explain it.
	Device      string
	IBPort      int
	GIDIndex    *int
	DataAddress string // the server's data_address (the GID to match on the server)
	Connect     string // rdma.connect: "tcp" or "cm"
	CPUs        string // the role's hosts.<role>.cpus; "" for none
	// The largest of any point: block_size (bytes), READs posted per QP
	// (client), and rdma.max_rd_atomic (0: auto).
	MaxBlock    int64
	MaxPerQP    int
	MaxRdAtomic int
	// Server only.
	FileSize int64 // the largest file_size of any point
	Create   bool
	Pinned   bool // some point registers with registration: pinned
	// PinnedMax is the most bytes any pinned point registers at once: its
	// file_size, or a pipelined window's regions (results.PinnedAtOnce).
	PinnedMax int64
	ODP       bool // some point registers with registration: odp
	Cold      bool // some point reads the file with cache: cold
	// NVMeOFCold: some nvmeof point reads the file cold, through nvmet's
	// file backend with buffered_io 0, which opens it with O_DIRECT.
	NVMeOFCold bool
}

// Verdict is one role's cells and problems, and warnings that do not
// make the plan fail.
type Verdict struct {
	System, Node, RDMA, File, Memory string
	Problems                         []Problem
	Warnings                         []string
}

// Judge compares a host's facts with what the plan needs of it.
func Judge(f Facts, n Need) Verdict {
	var v Verdict
	add := func(check, hint, format string, args ...any) {
		v.Problems = append(v.Problems, Problem{Check: check, Msg: fmt.Sprintf(format, args...), Hint: hint})
	}
	v.System = strings.TrimSpace(f.Arch + " " + f.Kernel)

	// node
	switch {
	case !f.Node.Present:
		v.Node = "missing"
		add("node", "check deploys node; see the deploy error above, or node.remote_path", "node is not on the host")
	case n.NodeSHA256 != "" && f.Node.SHA256 != n.NodeSHA256:
		v.Node = "stale " + f.Node.Version
		add("node", "run the check again to redeploy, or remove it with runner clean", "node on the host differs from the local binary")
	default:
		v.Node = "up to date " + f.Node.Version
	}
	// A node without rdma still proves the tcp data path; only the RDMA
	// side fails, so the problem is filed under rdma.
	noRDMA := f.Node.Present && len(f.Node.Transports) > 0 && !contains(f.Node.Transports, results.TransportRDMA)
	if n.Transport == results.TransportRDMA && noRDMA {
		add(results.TransportRDMA, "build the RDMA node with: make node-rdma", "node was built without rdma (transports: %s)", strings.Join(f.Node.Transports, ", "))
	}

	v.RDMA = judgeRDMA(f, n, noRDMA, add)
	if n.Role == "server" {
		v.File = judgeFile(f.File, n, add)
		if why := noDirectIO(f.File, f.Kernel); n.NVMeOFCold && why != "" {
			add("file", "put server.file on a disk for the nvmeof points, or run them warm (cache: warm, buffered_io 1)",
				"nvmeof: nvmet's file backend opens %s with O_DIRECT for a cold point, and %s", f.File.Path, why)
		}
		if w := coldWarning(f.File, n); w != "" {
			v.Warnings = append(v.Warnings, w)
		}
	} else {
		v.File = "-"
	}
	v.Memory = judgeMemory(f, n, add)
	if n.Transport == results.TransportRDMA {
		if w := numaWarning(f, n); w != "" {
			v.Warnings = append(v.Warnings, w)
		}
	}
	return v
}

// dataRate is a port's line rate in Gb/s of data, as node devices gives
// it (4X QDR is 32Gb/s, rxe the speed of its netdev), or "rate unknown".
func dataRate(p *Port) string {
	if p.LineRateMBs == nil {
		return "rate unknown"
	}
	return strconv.FormatFloat(*p.LineRateMBs*8/1000, 'g', -1, 64) + "Gb/s"
}

func judgeRDMA(f Facts, n Need, noRDMA bool, add func(check, hint, format string, args ...any)) string {
	rdma := n.Transport == results.TransportRDMA
	if len(f.Devices) == 0 {
		switch {
		case noRDMA && !rdma:
			return "unknown (node without rdma; not needed for tcp)"
		case noRDMA:
			return "unknown (node without rdma)"
		case !rdma:
			return "none (not needed for tcp)"
		}
		if f.DevicesError != "" {
			add(results.TransportRDMA, "install rdma-core and load the NIC's driver, or use transport: tcp", "no RDMA device: %s", f.DevicesError)
		} else {
			add(results.TransportRDMA, "load the NIC's driver (or soft-RoCE: rdma link add rxe0 type rxe netdev IFACE), or use transport: tcp", "no RDMA device")
		}
		return "none"
	}
	d, p, gid, gidNote, cell := chosen(f, n, rdma, add)
	if p == nil {
		return cell
	}
	odp := "no"
	if d.ODP {
		odp = "yes"
	}
	cell = fmt.Sprintf("%s/%d %s %s %s mtu %d gid %s rd_atom %d/%d odp %s",
		d.Name, p.Port, p.State, p.LinkLayer, dataRate(p), p.ActiveMTU, gidNote, d.MaxQPRdAtom, d.MaxQPInitRdAtom, odp)
	if !rdma {
		return cell
	}
	if d.Unsupported != "" {
		add(results.TransportRDMA, "use another device (rdma.device), or transport: tcp", "%s cannot carry node's RDMA READs: %s", d.Name, d.Unsupported)
	}
	if !strings.EqualFold(p.State, "ACTIVE") {
		add(results.TransportRDMA, "bring the link up (cable, switch port, ip link set IFACE up)", "%s port %d is %s, not ACTIVE", d.Name, p.Port, p.State)
	}
	if gid == nil && n.Connect != "cm" && needsGID(p, n) {
		add(results.TransportRDMA, "set rdma.gid_index to a populated entry (node devices lists them), or give the host an address on the RDMA interface", "no usable GID on %s port %d: %s", d.Name, p.Port, gidNote)
	}
	if pr := Unfit(*d, n.Connect); pr != nil {
		add(pr.Check, pr.Hint, "%s", pr.Msg)
	}
	if p.MaxMsgSz > 0 && n.MaxBlock > p.MaxMsgSz {
		add(results.TransportRDMA, "lower block_size to at most the port's max_msg_sz", "block_size %s is over %s port %d's max_msg_sz %s: one READ cannot carry it", results.SizeText(n.MaxBlock), d.Name, p.Port, results.SizeText(p.MaxMsgSz))
	}
	if n.Role == "client" && d.MaxQPWR > 0 && n.MaxPerQP > d.MaxQPWR {
		add(results.TransportRDMA, "raise qps, so each QP holds fewer, or lower queue_depth", "queue_depth puts %d READs on one QP, over %s's max_qp_wr %d", n.MaxPerQP, d.Name, d.MaxQPWR)
	}
	if lim, what := d.MaxQPInitRdAtom, "max_qp_init_rd_atom"; n.MaxRdAtomic > 0 {
		if n.Role == "server" {
			lim, what = d.MaxQPRdAtom, "max_qp_rd_atom"
		}
		if lim = results.RdAtomicLimit(lim); n.MaxRdAtomic > lim {
			add(results.TransportRDMA, fmt.Sprintf("lower rdma.max_rd_atomic to %d, or leave it to auto", lim), "rdma.max_rd_atomic %d is over %s's %s %d", n.MaxRdAtomic, d.Name, what, lim)
		}
	}
	if n.Role == "server" && n.ODP && !d.ODP {
		add("odp", "use registration: pinned, or a NIC with on-demand paging", "%s has no on-demand paging for RC READ, and the plan registers with odp", d.Name)
	}
	return cell
}

// chosen finds the device, port and GID the role's connection will use:
// node's own choice when the facts carry it, else the plan's device (or
// the first) and port, and the GID by node's rule. p is nil when there
// is none; cell then says why.
func chosen(f Facts, n Need, rdma bool, add func(check, hint, format string, args ...any)) (d *Device, p *Port, gid *GID, gidNote, cell string) {
	if f.ChoiceError != "" {
		if rdma {
			add(results.TransportRDMA, "set rdma.device (and ib_port, gid_index) to the NIC that carries the address; node devices lists them", "%s", f.ChoiceError)
		}
		return nil, nil, nil, "", "no device for the address"
	}
	name, port := n.Device, n.IBPort
	if c := f.Choice; c != nil {
		name, port = c.Device, c.IBPort
	}
	for i := range f.Devices {
		if name == "" || f.Devices[i].Name == name {
			d = &f.Devices[i]
			break
		}
	}
	if d == nil {
		var names []string
		for _, x := range f.Devices {
			names = append(names, x.Name)
		}
		if rdma {
			add(results.TransportRDMA, "set rdma.device to one of "+strings.Join(names, ", "), "no RDMA device %s", name)
		}
		return nil, nil, nil, "", "no " + name + " (has " + strings.Join(names, ", ") + ")"
	}
	if d.Error != "" && rdma {
		add(results.TransportRDMA, "check the device's driver and permissions (/dev/infiniband)", "%s cannot be opened: %s", d.Name, d.Error)
	}
	if port == 0 {
		port = 1
	}
	for i := range d.Ports {
		if d.Ports[i].Port == port {
			p = &d.Ports[i]
		}
	}
	if p == nil {
		if rdma {
			add(results.TransportRDMA, "set rdma.ib_port to one the device has (node devices lists them)", "%s has no port %d", d.Name, port)
		}
		return d, nil, nil, "", fmt.Sprintf("%s: no port %d", d.Name, port)
	}
	if c := f.Choice; c != nil {
		for i := range p.GIDs {
			if p.GIDs[i].Index == c.GIDIndex {
				gid = &p.GIDs[i]
			}
		}
		how := ", auto"
		if n.GIDIndex != nil && *n.GIDIndex >= 0 {
			how = ""
		}
		if gid == nil && !needsGID(p, n) {
			return d, p, nil, noGRH(p), ""
		}
		return d, p, gid, fmt.Sprintf("%d %s (%s%s)", c.GIDIndex, c.GID, c.GIDType, how), ""
	}
	gid, gidNote = pickGID(p, n)
	return d, p, gid, gidNote, ""
}

// needsGID reports whether the role's QPs route by GID: on RoCE always,
// on InfiniBand only when the plan sets gid_index (GRH on); otherwise
// they route by LID, as perftest does by default, and need none.
func needsGID(p *Port, n Need) bool {
	return !strings.EqualFold(p.LinkLayer, "InfiniBand") || n.GIDIndex != nil && *n.GIDIndex >= 0
}

// noGRH is the GID cell of an InfiniBand port routed by LID.
func noGRH(p *Port) string { return fmt.Sprintf("none (LID %d, no GRH)", p.LID) }

// pickGID says which GID node would use: the configured index, else
// node's own rule (results.ChooseGID), with the server's data_address.
func pickGID(p *Port, n Need) (*GID, string) {
	if n.GIDIndex != nil && *n.GIDIndex >= 0 {
		for i := range p.GIDs {
			if p.GIDs[i].Index == *n.GIDIndex {
				g := &p.GIDs[i]
				return g, fmt.Sprintf("%d %s (%s)", g.Index, g.GID, g.Type)
			}
		}
		return nil, fmt.Sprintf("%d not populated", *n.GIDIndex)
	}
	if !needsGID(p, n) {
		return nil, noGRH(p)
	}
	if len(p.GIDs) == 0 {
		return nil, "none populated"
	}
	// The client chooses by its socket's local address, unknown here, so
	// it is judged as node judges no address.
	var addr net.IP
	if n.Role == "server" {
		addr = net.ParseIP(n.DataAddress)
	}
	best, err := results.ChooseGID(p.GIDs, addr)
	if err != nil {
		return nil, "none matches " + n.DataAddress
	}
	g := &p.GIDs[best]
	return g, fmt.Sprintf("%d %s (%s, auto)", g.Index, g.GID, g.Type)
}

// coldWarning says when the plan's cold points cannot be made cold: the
// server's file is on a filesystem that keeps every page in memory, so
// their rows would get the cold verdict (results.Row.NotCold).
func coldWarning(ff *hostfacts.File, n Need) string {
	if !n.Cold || ff == nil || ff.FSType != "tmpfs" && ff.FSType != "ramfs" {
		return ""
	}
	return fmt.Sprintf("cold: %s is on %s, which keeps every page in memory, so a cold point cannot be made cold and its rows get the cold verdict; put server.file on a disk", ff.Path, ff.FSType)
}

// noDirectIO says why the file's filesystem refuses O_DIRECT opens, or
// "": ramfs always does, tmpfs before Linux 6.6 (kernel is uname -r).
func noDirectIO(ff *hostfacts.File, kernel string) string {
	switch {
	case ff == nil:
		return ""
	case ff.FSType == "ramfs":
		return "ramfs refuses O_DIRECT (the target's enable fails: invalid argument)"
	case ff.FSType == "tmpfs" && kernelBefore(kernel, 6, 6):
		return fmt.Sprintf("tmpfs refuses O_DIRECT before Linux 6.6, and this host runs %s (the target's enable fails: invalid argument)", kernel)
	}
	return ""
}

// kernelBefore reports whether uname -r's release is older than
// major.minor; an unreadable one is not.
func kernelBefore(release string, major, minor int) bool {
	var ma, mi int
	if n, _ := fmt.Sscanf(release, "%d.%d", &ma, &mi); n < 2 {
		return false
	}
	return ma < major || ma == major && mi < minor
}

func judgeFile(ff *hostfacts.File, n Need, add func(check, hint, format string, args ...any)) string {
	if ff == nil {
		add("file", "check that sh, stat and df work on the server", "nothing known about the server's file")
		return "unknown"
	}
	where := ""
	if ff.FSType != "" {
		where = " on " + ff.FSType
	}
	free := ""
	if ff.AvailBytes >= 0 {
		free = ", " + results.SizeText(ff.AvailBytes) + " free" + where
	}
	need := n.FileSize
	switch {
	case ff.Exists && !ff.Sidecar && n.Create:
		add("file", "point server.file at a new path, or set server.create: false to serve it as it is", "%s exists and was not made by rdmasweep (no %s sidecar); node will not overwrite it", ff.Path, results.SidecarSuffix)
		return fmt.Sprintf("exists %s, not ours%s", results.SizeText(ff.Size), free)
	case ff.Exists && ff.Size >= need:
		return fmt.Sprintf("exists %s%s", results.SizeText(ff.Size), free)
	case ff.Exists && !n.Create:
		add("file", "set server.create: true, or use a file of at least file_size", "%s holds %s, less than file_size %s", ff.Path, results.SizeText(ff.Size), results.SizeText(need))
		return fmt.Sprintf("exists %s, too small%s", results.SizeText(ff.Size), free)
	case !ff.Exists && !n.Create:
		add("file", "set server.create: true to let node make it, or fix server.file", "%s does not exist", ff.Path)
		return "missing" + free
	case !ff.DirExists:
		add("file", "create the directory on the server, or fix server.file", "the directory of %s does not exist", ff.Path)
		return "missing, no directory"
	case !ff.DirWritable:
		add("file", "make the directory writable for the plan's user, or put the file elsewhere", "the directory of %s is not writable", ff.Path)
		return "missing, directory not writable"
	}
	grow := need
	if ff.Exists {
		grow -= ff.Size
	}
	if ff.AvailBytes >= 0 && grow > ff.AvailBytes {
		add("file", "free space there, or lower file_size", "%s needs %s more, and only %s is free%s", ff.Path, results.SizeText(grow), results.SizeText(ff.AvailBytes), where)
	}
	if ff.Exists {
		return fmt.Sprintf("exists %s, will grow to %s%s", results.SizeText(ff.Size), results.SizeText(need), free)
	}
	return fmt.Sprintf("will create %s%s", results.SizeText(need), free)
}

// judgeMemory fails only where registration would: a pinned rdma server
// region that the role's process may not lock (judged by its
// capabilities and RLIMIT_MEMLOCK, as node reports them, never by uid), or
// larger than the memory the host has available, which node refuses
// rather than bring in the OOM killer.
func judgeMemory(f Facts, n Need, add func(check, hint, format string, args ...any)) string {
	cell := "memlock unknown"
	pinned := n.Transport == results.TransportRDMA && n.Role == "server" && n.Pinned
	need := n.PinnedMax
	if need == 0 {
		need = n.FileSize
	}
	if m, ok := memlockOf(f); ok {
		cell = "memlock " + memlockText(m.Soft) + capsText(m)
		if pinned && !m.Pinnable(need) {
			add("memory", results.MemlockHint(need)+"; or use registration: odp, or stream the file through server.window (pipelined), window × mr_size within the limit",
				"the memlock limit %s (hard %s) is below the %s a point pins at once, and the login holds neither CAP_IPC_LOCK nor CAP_SYS_RESOURCE, so pinned registration fails", memlockText(m.Soft), memlockText(m.Hard), results.SizeText(need))
		}
	} else if f.Memlock != "" {
		cell = "memlock " + f.Memlock
	}
	if h := f.Host; h != nil && h.MemAvailableBytes > 0 {
		cell += ", " + results.SizeText(h.MemAvailableBytes) + " available"
		if pinned && need > h.MemAvailableBytes {
			add("memory", "lower file_size, free memory on the host, use server.window (pipelined), or use registration: odp", "pinning %s at once needs more than the host's %s MemAvailable (of %s); node refuses rather than bring in the OOM killer", results.SizeText(need), results.SizeText(h.MemAvailableBytes), results.SizeText(h.MemTotalBytes))
		}
	}
	return cell
}

// memlockOf is the login's memlock state: the soft limit its shell
// reports (ulimit -l), and the hard limit and capabilities node host
// reads. Without node's view, the limit is all that is known, and it is
// taken as binding.
func memlockOf(f Facts) (results.Memlock, bool) {
	var m results.Memlock
	if h := f.Host; h != nil {
		m = h.Memlock()
	}
	switch kib, err := strconv.ParseInt(f.Memlock, 10, 64); {
	case err == nil:
		m.Soft = kib * 1024
	case f.Memlock == "unlimited":
		m.Soft = -1
	case f.Host == nil:
		return m, false
	}
	if f.Host == nil || f.Host.MemlockHardBytes == nil {
		m.Hard = m.Soft
	}
	return m, true
}

// memlockText is a memlock limit in bytes (-1 unlimited) as the cell says it.
func memlockText(b int64) string {
	if b < 0 {
		return "unlimited"
	}
	return results.SizeText(b)
}

// capsText names the capabilities that lift or raise the limit, if held.
func capsText(m results.Memlock) string {
	switch {
	case m.CapIPCLock:
		return " (CAP_IPC_LOCK)"
	case m.CapSysResource:
		return " (CAP_SYS_RESOURCE)"
	}
	return ""
}

// numaWarning says when the RDMA device, the server's disk and the role's
// CPUs sit on different NUMA nodes: every byte then crosses the
// interconnect, which the figures would silently include.
func numaWarning(f Facts, n Need) string {
	var parts []string
	nodes := map[int]bool{}
	note := func(what string, node int) {
		parts = append(parts, fmt.Sprintf("%s on node %d", what, node))
		nodes[node] = true
	}
	name := n.Device
	if f.Choice != nil {
		name = f.Choice.Device
	}
	for _, d := range f.Devices {
		if (name == "" || d.Name == name) && d.NUMANode != nil && *d.NUMANode >= 0 {
			note("the RDMA device "+d.Name, *d.NUMANode)
			break
		}
	}
	if ff := f.File; n.Role == "server" && ff != nil && ff.BlockNUMA != nil && *ff.BlockNUMA >= 0 {
		note("the file's disk "+ff.BlockDevice, *ff.BlockNUMA)
	}
	if n.CPUs != "" && len(f.NUMACPUs) > 1 {
		want, err := cpuset.Parse(n.CPUs)
		if err == nil {
			for node, list := range f.NUMACPUs {
				have, err := cpuset.Parse(list)
				if err != nil {
					continue
				}
				for c := range want {
					if have[c] {
						note("cpus "+n.CPUs, node)
						break
					}
				}
			}
		}
	}
	if len(nodes) < 2 {
		return ""
	}
	slices.Sort(parts)
	return fmt.Sprintf("NUMA: %s; reads cross between nodes (pin the role's cpus to the device's node, and put the file on a disk there)", strings.Join(parts, ", "))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
