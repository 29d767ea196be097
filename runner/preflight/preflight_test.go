package preflight

import (
	"strings"
	"testing"

	"rdmasweep/runner/hostfacts"
)

// roce is a host with one active RoCE port holding a link-local GID and
// the IPv4-mapped GID of 198.51.100.10, in both RoCE versions.
func roce() Facts {
	return Facts{
		Arch: "x86_64", Kernel: "6.1.0", UID: 1000, Memlock: "65536",
		Node: hostfacts.Node{Present: true, Version: "v1", SHA256: "abc", Transports: []string{"rdma", "tcp"}},
		Devices: []Device{{Name: "rxe0", MaxQPRdAtom: 128, MaxQPInitRdAtom: 128, ODP: false, Ports: []Port{{
			Port: 1, State: "ACTIVE", LinkLayer: "Ethernet", ActiveMTU: 1024, RateGbps: 10,
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
		{"rdma server picks the GID of its data address, RoCE v2", nil, nil, "memlock",
			func(v Verdict) string { return v.RDMA }, "gid 3 ::ffff:198.51.100.10 (RoCE v2, auto)"},
		{"root ignores memlock", func(f *Facts) { f.UID = 0 }, nil, "", func(v Verdict) string { return v.Memlock }, "64MiB"},
		{"configured gid_index", func(f *Facts) { f.Memlock = "unlimited" }, func(n *Need) { n.GIDIndex = idx(1) }, "",
			func(v Verdict) string { return v.RDMA }, "gid 1 fe80::1 (RoCE v2)"},
		{"unpopulated gid_index", func(f *Facts) { f.Memlock = "unlimited" }, func(n *Need) { n.GIDIndex = idx(7) }, "rdma",
			func(v Verdict) string { return v.RDMA }, "gid 7 not populated"},
		{"port down", func(f *Facts) { f.Memlock = "unlimited"; f.Devices[0].Ports[0].State = "DOWN" }, nil, "rdma",
			func(v Verdict) string { return v.RDMA }, "DOWN"},
		{"odp without support", func(f *Facts) { f.Memlock = "unlimited" }, func(n *Need) { n.ODP, n.Pinned = true, false }, "rdma",
			func(v Verdict) string { return v.RDMA }, "odp no"},
		{"no device on an rdma plan", func(f *Facts) { f.UID = 0; f.Devices = nil; f.DevicesError = "rdma transport not built in" }, nil, "rdma",
			func(v Verdict) string { return v.RDMA }, "none"},
		{"no device on a tcp plan is fine", func(f *Facts) { f.Devices = nil }, func(n *Need) { *n = server("tcp") }, "",
			func(v Verdict) string { return v.RDMA }, "not needed for tcp"},
		{"node without rdma", func(f *Facts) { f.UID = 0; f.Node.Transports = []string{"tcp"}; f.Devices = nil }, nil, "rdma",
			func(v Verdict) string { return v.RDMA }, "unknown (node without rdma)"},
		{"stale node", func(f *Facts) { f.UID = 0; f.Node.SHA256 = "old" }, nil, "node", func(v Verdict) string { return v.Node }, "stale"},
		{"not enough space", func(f *Facts) { f.UID = 0; f.File.AvailBytes = 1 << 20 }, nil, "file", func(v Verdict) string { return v.File }, "1MiB free on ext4"},
		{"our file, big enough", func(f *Facts) { f.UID = 0; f.File.Exists, f.File.Sidecar, f.File.Size = true, true, 1<<30 }, nil, "",
			func(v Verdict) string { return v.File }, "exists 1GiB"},
		{"our file grows", func(f *Facts) { f.UID = 0; f.File.Exists, f.File.Sidecar, f.File.Size = true, true, 1<<20 }, nil, "",
			func(v Verdict) string { return v.File }, "will grow to 1GiB"},
		{"the user's file with create", func(f *Facts) { f.UID = 0; f.File.Exists, f.File.Size = true, 1<<30 }, nil, "file",
			func(v Verdict) string { return v.File }, "not ours"},
		{"the user's file, served as it is", func(f *Facts) { f.UID = 0; f.File.Exists, f.File.Size = true, 1<<30 }, func(n *Need) { n.Create = false }, "",
			func(v Verdict) string { return v.File }, "exists 1GiB"},
		{"missing without create", func(f *Facts) { f.UID = 0 }, func(n *Need) { n.Create = false }, "file", func(v Verdict) string { return v.File }, "missing"},
		{"unwritable directory", func(f *Facts) { f.UID = 0; f.File.DirWritable = false }, nil, "file", func(v Verdict) string { return v.File }, "not writable"},
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
