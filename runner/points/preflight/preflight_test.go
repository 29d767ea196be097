package preflight

import (
	"slices"
	"strings"
	"testing"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/hosts/hostfacts"
)

// expandPlan loads and expands the plan text, failing the test on an
// error of either.
func expandPlan(t *testing.T, text string) (*plan.Plan, []plan.Point) {
	t.Helper()
	p, err := plan.Parse("t.yaml", []byte(text), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pts, err := plan.Expand(p, plan.ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p, pts
}

// roce is a host with one active RoCE port holding a link-local GID and
// the IPv4-mapped GID of 198.51.100.10, in both RoCE versions.
func roce() Facts {
	return Facts{
		Arch: "x86_64", Kernel: "6.1.0", UID: 1000, Memlock: "65536",
		Node: hostfacts.Node{Present: true, Version: "v1", SHA256: "abc", Transports: []string{"rdma", "tcp"}},
		Devices: []Device{{Name: "rxe0", MaxQPRdAtom: 128, MaxQPInitRdAtom: 128, ODP: false, Ports: []Port{{
			Port: 1, State: "ACTIVE", LinkLayer: "Ethernet", ActiveMTU: 1024, RateGbps: 10.3125, Width: "1x", Speed: "FDR10", LineRateMBs: ptr(1250.0),
			GIDs: []GID{
				{Index: 0, GID: "fe80::1", Type: "RoCE v1"},
				{Index: 1, GID: "fe80::1", Type: "RoCE v2"},
				{Index: 2, GID: "::ffff:198.51.100.10", Type: "RoCE v1"},
				{Index: 3, GID: "::ffff:198.51.100.10", Type: "RoCE v2"},
			},
		}}}},
		File: &hostfacts.File{Path: "/data/f", DirExists: true, DirWritable: true, FSType: "ext4", AvailBytes: 10 << 30},
	}
}

func server(transport string) Need {
	return Need{Role: "server", Transport: transport, NodeSHA256: "abc", DataAddress: "198.51.100.10", FileSize: 1 << 30, Create: true, Pinned: true}
}

func client() Need {
	return Need{Role: "client", Transport: "rdma", NodeSHA256: "abc", DataAddress: "198.51.100.10"}
}

func checks(v Verdict) string {
	var c []string
	for _, p := range v.Problems {
		if p.Hint == "" {
			c = append(c, p.Check+"(no hint)")
		}
		c = append(c, p.Check)
	}
	return strings.Join(c, ",")
}

func TestJudge(t *testing.T) {
	idx := func(i int) *int { return &i }
	cases := []struct {
		name     string
		facts    func(f *Facts)
		need     func(n *Need)
		problems string // the failing checks, in order
		cell     func(v Verdict) string
		want     string // a substring of cell
	}{
		{"rdma server picks the GID of its data address, RoCE v2", nil, nil, "memory",
			func(v Verdict) string { return v.RDMA }, "gid 3 ::ffff:198.51.100.10 (RoCE v2, auto)"},
		// Memlock is judged by capabilities and limits, never by uid: root
		// in a container with Docker's defaults holds neither capability.
		{"root without CAP_IPC_LOCK is held to memlock", func(f *Facts) {
			f.UID = 0
			f.Host = &results.Host{MemlockBytes: 64 << 20, MemlockHardBytes: ptr(int64(64 << 20))}
		}, nil, "memory", func(v Verdict) string { return v.Problems[0].Msg + " " + v.Problems[0].Hint }, "neither CAP_IPC_LOCK nor CAP_SYS_RESOURCE, so pinned registration fails give the process CAP_IPC_LOCK"},
		{"the hint names the container case", func(f *Facts) { f.Host = &results.Host{MemlockBytes: 64 << 20} }, nil, "memory",
			func(v Verdict) string { return v.Problems[0].Hint }, "--cap-add IPC_LOCK"},
		{"the hint names the window", func(f *Facts) { f.Host = &results.Host{MemlockBytes: 64 << 20} }, nil, "memory",
			func(v Verdict) string { return v.Problems[0].Hint }, "server.window"},
		// A window of 4 regions of 16 MiB pins 64 MiB at once, whatever
		// the file's size: within the limit.
		{"a window within memlock", func(f *Facts) {
			f.UID = 0
			f.Host = &results.Host{MemlockBytes: 64 << 20, MemlockHardBytes: ptr(int64(64 << 20))}
		},
			func(n *Need) { n.PinnedMax = results.PinnedBytes(n.FileSize, 16<<20, true, 4, results.IOMmap) }, "",
			func(v Verdict) string { return v.Memory }, "memlock 64MiB"},
		{"CAP_IPC_LOCK lifts memlock", func(f *Facts) { f.UID = 1000; f.Host = &results.Host{MemlockBytes: 64 << 20, CapIPCLock: true} }, nil, "",
			func(v Verdict) string { return v.Memory }, "memlock 64MiB (CAP_IPC_LOCK)"},
		{"CAP_SYS_RESOURCE raises memlock", func(f *Facts) {
			f.Host = &results.Host{MemlockBytes: 64 << 20, MemlockHardBytes: ptr(int64(64 << 20)), CapSysResource: true}
		}, nil, "", func(v Verdict) string { return v.Memory }, "memlock 64MiB (CAP_SYS_RESOURCE)"},
		{"a hard limit the soft one can rise to", func(f *Facts) { f.Host = &results.Host{MemlockBytes: 64 << 20, MemlockHardBytes: ptr(int64(-1))} }, nil, "",
			func(v Verdict) string { return v.Memory }, "memlock 64MiB"},
		{"InfiniBand routes by LID: no GID needed", func(f *Facts) {
			f.Memlock = "unlimited"
			f.Devices[0].Ports[0] = Port{Port: 1, State: "ACTIVE", LinkLayer: "InfiniBand", LID: 7, RateGbps: 100, ActiveMTU: 4096}
			f.Choice = &results.DeviceChoice{Device: "rxe0", IBPort: 1, GIDIndex: -1}
		}, nil, "", func(v Verdict) string { return v.RDMA }, "gid none (LID 7, no GRH)"},
		{"InfiniBand by the plan's device, no GID table", func(f *Facts) {
			f.Memlock = "unlimited"
			f.Devices[0].Ports[0] = Port{Port: 1, State: "ACTIVE", LinkLayer: "InfiniBand", LID: 7}
		}, nil, "", func(v Verdict) string { return v.RDMA }, "gid none (LID 7, no GRH)"},
		{"InfiniBand with gid_index needs that GID (GRH)", func(f *Facts) {
			f.Memlock = "unlimited"
			f.Devices[0].Ports[0] = Port{Port: 1, State: "ACTIVE", LinkLayer: "InfiniBand", LID: 7}
		}, func(n *Need) { n.GIDIndex = idx(0) }, "rdma", func(v Verdict) string { return v.RDMA }, "gid 0 not populated"},
		{"configured gid_index", func(f *Facts) { f.Memlock = "unlimited" }, func(n *Need) { n.GIDIndex = idx(1) }, "",
			func(v Verdict) string { return v.RDMA }, "gid 1 fe80::1 (RoCE v2)"},
		{"unpopulated gid_index", func(f *Facts) { f.Memlock = "unlimited" }, func(n *Need) { n.GIDIndex = idx(7) }, "rdma",
			func(v Verdict) string { return v.RDMA }, "gid 7 not populated"},
		{"port down", func(f *Facts) { f.Memlock = "unlimited"; f.Devices[0].Ports[0].State = "DOWN" }, nil, "rdma",
			func(v Verdict) string { return v.RDMA }, "DOWN"},
		{"odp without support", func(f *Facts) { f.Memlock = "unlimited" }, func(n *Need) { n.ODP, n.Pinned = true, false }, "odp",
			func(v Verdict) string { return v.RDMA }, "odp no"},
		{"node's choice by address wins over the first device", func(f *Facts) {
			f.Memlock = "unlimited"
			f.Devices = append([]Device{{Name: "mlx5_0", Ports: []Port{{Port: 1, State: "ACTIVE", LinkLayer: "Ethernet"}}}}, f.Devices...)
			f.Choice = &results.DeviceChoice{Device: "rxe0", IBPort: 1, GIDIndex: 3, GID: "::ffff:198.51.100.10", GIDType: "RoCE v2"}
		}, nil, "", func(v Verdict) string { return v.RDMA }, "rxe0/1 ACTIVE Ethernet 10Gb/s mtu 1024 gid 3 ::ffff:198.51.100.10 (RoCE v2, auto)"},
		{"InfiniBand's cell gives the data rate, not the signalling", func(f *Facts) {
			f.Memlock = "unlimited"
			f.Devices[0].Ports[0] = Port{Port: 1, State: "ACTIVE", LinkLayer: "InfiniBand", LID: 7, RateGbps: 40, Width: "4x", Speed: "QDR", LineRateMBs: ptr(4000.0), ActiveMTU: 4096}
		}, nil, "", func(v Verdict) string { return v.RDMA }, "rxe0/1 ACTIVE InfiniBand 32Gb/s mtu 4096"},
		{"a port whose line rate is unknown says so", func(f *Facts) {
			f.Memlock = "unlimited"
			f.Devices[0].Ports[0].LineRateMBs, f.Devices[0].Ports[0].LineRateUnknown = nil, "rxe0 port 1: eth0: speed is -1"
		}, nil, "", func(v Verdict) string { return v.RDMA }, "rxe0/1 ACTIVE Ethernet rate unknown mtu 1024"},
		{"no device holds the address", func(f *Facts) {
			f.Memlock = "unlimited"
			f.ChoiceError = "no RDMA device's network interface holds 198.51.100.99 (devices: rxe0); hint: name one with rdma.device"
		}, nil, "rdma", func(v Verdict) string { return v.RDMA }, "no device for the address"},
		{"block over max_msg_sz", func(f *Facts) { f.Memlock = "unlimited"; f.Devices[0].Ports[0].MaxMsgSz = 1 << 30 }, func(n *Need) { n.MaxBlock = 2 << 30 }, "rdma",
			func(v Verdict) string { return v.RDMA }, "rxe0/1"},
		{"block within max_msg_sz", func(f *Facts) { f.Memlock = "unlimited"; f.Devices[0].Ports[0].MaxMsgSz = 1 << 30 }, func(n *Need) { n.MaxBlock = 1 << 30 }, "",
			func(v Verdict) string { return v.RDMA }, "rxe0/1"},
		{"client queue over max_qp_wr", func(f *Facts) { f.Memlock = "unlimited"; f.Devices[0].MaxQPWR = 64 }, func(n *Need) { *n = client(); n.MaxPerQP = 128 }, "rdma",
			func(v Verdict) string { return v.RDMA }, "rxe0/1"},
		{"server ignores max_qp_wr", func(f *Facts) { f.Memlock = "unlimited"; f.Devices[0].MaxQPWR = 64 }, func(n *Need) { n.MaxPerQP = 128 }, "",
			func(v Verdict) string { return v.RDMA }, "rxe0/1"},
		{"max_rd_atomic over the requester's", func(f *Facts) { f.Memlock = "unlimited"; f.Devices[0].MaxQPInitRdAtom = 16 }, func(n *Need) { *n = client(); n.MaxRdAtomic = 32 }, "rdma",
			func(v Verdict) string { return v.RDMA }, "rd_atom 128/16"},
		{"max_rd_atomic over the responder's", func(f *Facts) { f.Memlock = "unlimited"; f.Devices[0].MaxQPRdAtom = 16 }, func(n *Need) { n.MaxRdAtomic = 32 }, "rdma",
			func(v Verdict) string { return v.RDMA }, "rd_atom 16/128"},
		{"iWARP needs cm", func(f *Facts) { f.Memlock = "unlimited"; f.Devices[0].Transport = "iWARP" }, nil, "rdma",
			func(v Verdict) string { return v.RDMA }, "rxe0/1"},
		{"iWARP with cm", func(f *Facts) { f.Memlock = "unlimited"; f.Devices[0].Transport = "iWARP" }, func(n *Need) { n.Connect = "cm" }, "",
			func(v Verdict) string { return v.RDMA }, "rxe0/1"},
		{"EFA is refused", func(f *Facts) { f.Memlock = "unlimited"; f.Devices[0].Unsupported = "EFA has no RC QPs (it uses SRD)" }, nil, "rdma",
			func(v Verdict) string { return v.RDMA }, "rxe0/1"},
		{"pinning beyond MemAvailable", func(f *Facts) {
			f.Host = &results.Host{MemAvailableBytes: 512 << 20, MemTotalBytes: 1 << 30, CapIPCLock: true}
		}, nil, "memory",
			func(v Verdict) string { return v.Memory }, "memlock 64MiB (CAP_IPC_LOCK), 512MiB available"},
		{"odp does not pin", func(f *Facts) {
			f.Devices[0].ODP = true
			f.Host = &results.Host{MemAvailableBytes: 512 << 20}
		}, func(n *Need) { n.ODP, n.Pinned = true, false }, "",
			func(v Verdict) string { return v.Memory }, "512MiB available"},
		{"no device on an rdma plan", func(f *Facts) {
			f.Memlock = "unlimited"
			f.Devices = nil
			f.DevicesError = "rdma transport not built in"
		}, nil, "rdma",
			func(v Verdict) string { return v.RDMA }, "none"},
		{"no device on a tcp plan is fine", func(f *Facts) { f.Devices = nil }, func(n *Need) { *n = server("tcp") }, "",
			func(v Verdict) string { return v.RDMA }, "not needed for tcp"},
		{"node without rdma", func(f *Facts) { f.Memlock = "unlimited"; f.Node.Transports = []string{"tcp"}; f.Devices = nil }, nil, "rdma",
			func(v Verdict) string { return v.RDMA }, "unknown (node without rdma)"},
		{"stale node", func(f *Facts) { f.Memlock = "unlimited"; f.Node.SHA256 = "old" }, nil, "node", func(v Verdict) string { return v.Node }, "stale"},
		{"not enough space", func(f *Facts) { f.Memlock = "unlimited"; f.File.AvailBytes = 1 << 20 }, nil, "file", func(v Verdict) string { return v.File }, "1MiB free on ext4"},
		{"our file, big enough", func(f *Facts) {
			f.Memlock = "unlimited"
			f.File.Exists, f.File.Sidecar, f.File.Size = true, true, 1<<30
		}, nil, "",
			func(v Verdict) string { return v.File }, "exists 1GiB"},
		{"our file grows", func(f *Facts) {
			f.Memlock = "unlimited"
			f.File.Exists, f.File.Sidecar, f.File.Size = true, true, 1<<20
		}, nil, "",
			func(v Verdict) string { return v.File }, "will grow to 1GiB"},
		{"the user's file with create", func(f *Facts) { f.Memlock = "unlimited"; f.File.Exists, f.File.Size = true, 1<<30 }, nil, "file",
			func(v Verdict) string { return v.File }, "not ours"},
		{"the user's file, served as it is", func(f *Facts) { f.Memlock = "unlimited"; f.File.Exists, f.File.Size = true, 1<<30 }, func(n *Need) { n.Create = false }, "",
			func(v Verdict) string { return v.File }, "exists 1GiB"},
		{"missing without create", func(f *Facts) { f.Memlock = "unlimited" }, func(n *Need) { n.Create = false }, "file", func(v Verdict) string { return v.File }, "missing"},
		{"unwritable directory", func(f *Facts) { f.Memlock = "unlimited"; f.File.DirWritable = false }, nil, "file", func(v Verdict) string { return v.File }, "not writable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, n := roce(), server("rdma")
			if c.facts != nil {
				c.facts(&f)
			}
			if c.need != nil {
				c.need(&n)
			}
			v := Judge(f, n)
			if got := checks(v); got != c.problems {
				t.Errorf("problems %q, want %q: %+v", got, c.problems, v.Problems)
			}
			if cell := c.cell(v); !strings.Contains(cell, c.want) {
				t.Errorf("cell %q lacks %q", cell, c.want)
			}
		})
	}
}

func TestClientPrefersIPv4MappedGIDWithoutAddress(t *testing.T) {
	f := roce()
	v := Judge(f, Need{Role: "client", Transport: "rdma", NodeSHA256: "abc"})
	if !strings.Contains(v.RDMA, "gid 3 ") || v.File != "-" || len(v.Problems) != 0 {
		t.Errorf("client: %+v", v)
	}
}

func TestNUMAWarning(t *testing.T) {
	one, zero := 1, 0
	f := roce()
	f.Memlock = "unlimited"
	f.Devices[0].NUMANode = &one
	f.File.BlockDevice, f.File.BlockNUMA = "nvme0n1", &zero
	f.NUMACPUs = map[int]string{0: "0-15", 1: "16-31"}
	n := server("rdma")
	n.CPUs = "16-19"
	v := Judge(f, n)
	want := "NUMA: cpus 16-19 on node 1, the RDMA device rxe0 on node 1, the file's disk nvme0n1 on node 0;"
	if len(v.Warnings) != 1 || !strings.HasPrefix(v.Warnings[0], want) || len(v.Problems) != 0 {
		t.Errorf("warnings %q problems %+v, want one starting %q and no problem", v.Warnings, v.Problems, want)
	}
	f.File.BlockNUMA = &one
	if v := Judge(f, n); len(v.Warnings) != 0 {
		t.Errorf("all on node 1: warnings %q", v.Warnings)
	}
	n.CPUs = "0-3"
	if v := Judge(f, n); len(v.Warnings) != 1 || !strings.Contains(v.Warnings[0], "cpus 0-3 on node 0") {
		t.Errorf("cpus on node 0: warnings %q", v.Warnings)
	}
	if v := Judge(f, server("tcp")); len(v.Warnings) != 0 {
		t.Errorf("tcp plan: warnings %q", v.Warnings)
	}
}

func ptr[T any](v T) *T { return &v }

// TestColdWarning: a plan with cold points whose server file is on tmpfs
// (or ramfs) is warned that they cannot be made cold; a file on a disk,
// or a plan without cold points, is not.
func TestColdWarning(t *testing.T) {
	f := roce()
	f.Memlock = "unlimited"
	n := server("rdma")
	n.Cold = true
	for _, c := range []struct {
		fs   string
		cold bool
		want bool
	}{{"tmpfs", true, true}, {"ramfs", true, true}, {"ext4", true, false}, {"tmpfs", false, false}} {
		f.File.FSType, n.Cold = c.fs, c.cold
		v := Judge(f, n)
		got := slices.ContainsFunc(v.Warnings, func(w string) bool {
			return strings.HasPrefix(w, "cold: ") && strings.Contains(w, "on "+c.fs+", which keeps every page in memory")
		})
		if got != c.want || len(v.Problems) != 0 {
			t.Errorf("file on %s, cold points %v: warnings %q problems %+v, want a cold warning %v", c.fs, c.cold, v.Warnings, v.Problems, c.want)
		}
	}
}

// TestNeedsColdFromThePoints: the server needs a file that can be made
// cold when some point reads it cold, and only then.
func TestNeedsColdFromThePoints(t *testing.T) {
	for _, cache := range []string{"cold", "warm"} {
		p, pts := expandPlan(t, `name: t
hosts: {server: {address: local}, client: {address: local}}
transport: tcp
server: {file: /tmp/t.dat, file_size: 1MiB, cache: `+cache+`}
`)
		for _, n := range Needs(p, pts, nil) {
			if want := cache == "cold" && n.Role == "server"; n.Cold != want {
				t.Errorf("cache %s, %s: Need.Cold %v, want %v", cache, n.Role, n.Cold, want)
			}
		}
	}
}

// TestNVMeOFColdNeedsDirectIO: a cold nvmeof point's file on a filesystem
// that refuses O_DIRECT (ramfs; tmpfs before Linux 6.6) is a problem at
// check, naming O_DIRECT and what to do; a disk, tmpfs on 6.6 and later,
// or no cold nvmeof point, are not.
func TestNVMeOFColdNeedsDirectIO(t *testing.T) {
	f := roce()
	f.Memlock = "unlimited"
	for _, c := range []struct {
		fs, kernel string
		nvmeofCold bool
		want       bool
	}{
		{"tmpfs", "6.1.0-28-amd64", true, true},
		{"ramfs", "7.3.4+deb13-amd64", true, true},
		{"tmpfs", "6.6.0", true, false},
		{"tmpfs", "7.3.4+deb13-amd64", true, false},
		{"ext4", "6.1.0-28-amd64", true, false},
		{"tmpfs", "6.1.0-28-amd64", false, false},
	} {
		n := server("rdma")
		n.NVMeOFCold = c.nvmeofCold
		f.File.FSType, f.Kernel = c.fs, c.kernel
		v := Judge(f, n)
		got := slices.ContainsFunc(v.Problems, func(p Problem) bool {
			return strings.Contains(p.Msg, "O_DIRECT") && strings.Contains(p.Hint, "put server.file on a disk")
		})
		if got != c.want {
			t.Errorf("%s on %s, cold nvmeof %v: problems %+v; want an O_DIRECT problem %v", c.fs, c.kernel, c.nvmeofCold, v.Problems, c.want)
		}
	}
}

// TestNeedsNVMeOFCold: the server needs O_DIRECT when some nvmeof point
// reads cold, and only then.
func TestNeedsNVMeOFCold(t *testing.T) {
	for _, c := range []struct {
		sweep string
		want  bool
	}{
		{"matrix: {workload: [node, nvmeof], cache: [cold, warm]}", true},
		{"matrix: {workload: [nvmeof], cache: [warm]}", false},
		{"matrix: {workload: [node], cache: [cold]}", false},
	} {
		p, pts := expandPlan(t, `name: t
hosts: {server: {address: local}, client: {address: local}}
transport: rdma
server: {file: /tmp/t.dat, file_size: 1MiB}
sweep:
  `+c.sweep+`
`)
		for _, n := range Needs(p, pts, nil) {
			if want := c.want && n.Role == "server"; n.NVMeOFCold != want {
				t.Errorf("%s, %s: NVMeOFCold %v, want %v", c.sweep, n.Role, n.NVMeOFCold, want)
			}
		}
	}
}

// TestProgramsOnlyWhereTheyRun: each host must have only the tools its
// role runs for the plan's peers, each with its packages: fio on the
// server's host alone, ib_read_bw on both with ss beside its server, and
// nothing for node's points.
func TestProgramsOnlyWhereTheyRun(t *testing.T) {
	_, pts := expandPlan(t, `name: t
hosts: {server: {address: a}, client: {address: b}}
transport: rdma
server: {file: /tmp/t.dat, file_size: 1MiB, cache: warm}
sweep: {matrix: {workload: [node, fio, ib_read_bw]}}
`)
	names := func(role string) []string {
		var out []string
		for _, pr := range ProgramsFor(pts, role) {
			if pr.Debian == "" || !strings.Contains(pr.Install(), pr.Debian) {
				t.Errorf("%s: %s without its package in the hint %q", role, pr.Binary, pr.Install())
			}
			out = append(out, pr.Binary)
		}
		return out
	}
	if got := names("server"); !slices.Equal(got, []string{"fio", "ib_read_bw", "ss"}) {
		t.Errorf("server host needs %v, want fio, ib_read_bw, ss", got)
	}
	if got := names("client"); !slices.Equal(got, []string{"ib_read_bw"}) {
		t.Errorf("client host needs %v, want ib_read_bw alone (fio reads on the server's host)", got)
	}
	if got := ProgramsFor(pts[:1], "server"); len(got) != 0 {
		t.Errorf("node's point needs %v, want nothing", got)
	}
	// Over rdma_cm, ib_read_bw's server is ready when its cm_id listens,
	// which rdma (iproute2) shows, not ss.
	_, cm := expandPlan(t, `name: t
hosts: {server: {address: a}, client: {address: b}}
transport: rdma
rdma: {connect: cm}
server: {file: /tmp/t.dat, file_size: 1MiB}
sweep: {matrix: {workload: [ib_read_bw]}}
`)
	if got := names("server"); !slices.Equal(got, []string{"fio", "ib_read_bw", "ss"}) {
		t.Errorf("over perftest's exchange the server host needs %v, want no rdma", got)
	}
	pts = cm
	if got := names("server"); !slices.Equal(got, []string{"ib_read_bw", "ss", "rdma"}) {
		t.Errorf("over rdma_cm the server host needs %v, want ib_read_bw, ss, rdma", got)
	}
}
