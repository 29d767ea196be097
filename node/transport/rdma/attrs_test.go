package rdma

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"rdmasweep/results/linerate"
	"rdmasweep/testbed/testenv"
)

func TestClientAccess(t *testing.T) {
	for _, c := range []struct {
		name, transport, driver string
		relaxed                 bool
		want                    int
		err                     string
	}{
		// RoCE devices report the InfiniBand verbs transport; their link
		// layer says Ethernet, which the access does not depend on.
		{"InfiniBand", "InfiniBand", "mlx5_core", true, accessLocalWrite | accessRelaxedOrdering, ""},
		{"RoCE", "InfiniBand", "mlx5_core", false, accessLocalWrite, ""},
		{"soft-RoCE", "InfiniBand", "", true, accessLocalWrite | accessRelaxedOrdering, ""},
		{"iWARP", "iWARP", "cxgb4", true, accessLocalWrite | accessRemoteWrite | accessRelaxedOrdering, ""},
		{"iWARP without relaxed ordering", "iWARP", "irdma", false, accessLocalWrite | accessRemoteWrite, ""},
		{"EFA", "unspecified", "efa", true, 0, "SRD"},
		{"usNIC", "usNIC", "usnic_verbs", true, 0, "no reliable-connected"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := clientAccess(c.transport, c.driver, c.relaxed)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("clientAccess = %#x, %v; want an error with %q", got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("clientAccess = %#x, %v; want %#x", got, err, c.want)
			}
			if got&accessRemoteRead != 0 {
				t.Errorf("the client's buffer is readable remotely: %#x", got)
			}
		})
	}
}

func TestAddressInfiniBandWithoutGIDs(t *testing.T) {
	// An IB port with LID 7 and an empty GID table, as a subnet without
	// GIDs in use shows it: perftest's default, LID only, no GRH.
	g, grh, err := address(false, -1, nil, net.ParseIP("192.0.2.1"))
	if err != nil || grh || g != (GID{}) {
		t.Fatalf("address = %+v, grh %v, %v; want the empty GID, no GRH", g, grh, err)
	}
	// gid_index given on IB turns the GRH on, and needs that entry.
	if _, grh, err := address(false, 0, nil, nil); !grh || err == nil {
		t.Fatalf("gid_index 0 on an empty table: grh %v, err %v; want GRH and an error", grh, err)
	}
	gids := []GID{{Index: 0, GID: "fe80::1", Type: "IB"}}
	if g, grh, err := address(false, 0, gids, nil); !grh || err != nil || g.Index != 0 {
		t.Fatalf("gid_index 0: %+v, grh %v, %v", g, grh, err)
	}
}

func TestAddressRoCE(t *testing.T) {
	gids := []GID{
		{Index: 0, GID: "fe80::1", Type: "RoCE v2"},
		{Index: 1, GID: "::ffff:10.0.2.15", Type: "RoCE v2"},
	}
	g, grh, err := address(true, -1, gids, net.ParseIP("10.0.2.15"))
	if err != nil || !grh || g.Index != 1 {
		t.Fatalf("address = %+v, grh %v, %v; want index 1 with GRH", g, grh, err)
	}
	if _, _, err := address(true, -1, nil, net.ParseIP("10.0.2.15")); err == nil {
		t.Fatal("RoCE with no GIDs: want an error")
	}
}

// TestPortLink: a port's speed is the kernel's, from its rate file, so
// an XDR port, which verbs' 8-bit active_speed gives as NDR (128), reads
// as XDR; the verbs' figures serve only where the file cannot be read.
func TestPortLink(t *testing.T) {
	root := t.TempDir()
	for dev, rate := range map[string]string{"mlx5_0": "200 Gb/sec (1X XDR)\n", "mlx5_1": "40 Gb/sec (4X QDR)\n", "mlx5_2": "garbled\n", "mlx5_3": "400 Gb/sec (8X HDR)\n"} {
		dir := filepath.Join(root, "sys/class/infiniband", dev, "ports/1")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "rate"), []byte(rate), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		dev          string
		speed, width int // the verbs' active_speed, active_width
		want         string
		mbs, gbps    float64
	}{
		{"mlx5_0", 128, 1, "1x XDR", 25000, 212.5},
		{"mlx5_1", 4, 2, "4x QDR", 4000, 40},
		{"mlx5_2", 32, 2, "4x EDR", 12500, 103.125}, // the file unreadable as a rate
		{"mlx5_9", 128, 1, "1x NDR", 12500, 106.25}, // no file
		{"mlx5_3", 64, 4, "8x HDR", 50000, 425},     // 8X is active_width 4
		{"mlx5_8", 64, 4, "8x HDR", 50000, 425},     // no file: from the verbs
	} {
		l, err := portLink(root, c.dev, 1, c.speed, c.width)
		if got := l.Width() + " " + l.Speed.Name; err != nil || got != c.want || l.DataMBs() != c.mbs || l.SignalGbps() != c.gbps {
			t.Errorf("portLink(%s) = %s (%v MB/s of data, %v Gb/s signalling), %v; want %s (%v, %v)", c.dev, got, l.DataMBs(), l.SignalGbps(), err, c.want, c.mbs, c.gbps)
		}
	}
	if l, err := portLink(root, "mlx5_9", 1, 3, 2); err == nil || !strings.Contains(err.Error(), "mlx5_9 port 1") || !strings.Contains(err.Error(), "active_speed 3") {
		t.Errorf("portLink with neither a rate file nor a known speed = %+v, %v; want an error naming both", l, err)
	}
}

// TestLinkSpeedsCoverVerbsH fails when the installed verbs.h names a
// link speed (IBV_PORT_LINK_SPEED_<name>_SUP) the table lacks.
func TestLinkSpeedsCoverVerbsH(t *testing.T) {
	b, err := os.ReadFile("/usr/include/infiniband/verbs.h")
	if err != nil {
		testenv.Skip(t, "no verbs.h (install libibverbs-dev): "+err.Error())
	}
	names := regexp.MustCompile(`IBV_PORT_LINK_SPEED_([A-Z0-9]+)_SUP`).FindAllStringSubmatch(string(b), -1)
	if len(names) == 0 {
		t.Fatal("verbs.h names no IBV_PORT_LINK_SPEED_*_SUP: has the header changed how it names speeds?")
	}
	for _, m := range names {
		found := false
		for _, l := range linerate.Speeds {
			found = found || l.Name == m[1]
		}
		if !found {
			t.Errorf("verbs.h names link speed %s, which linerate.Speeds lacks", m[1])
		}
	}
}

func TestPrefetchSegments(t *testing.T) {
	const gib = uint64(1) << 30
	for _, n := range []uint64{6 * gib, 6*gib + 4096, 4*gib - 1, 1, 2 * gib} {
		segs := prefetchSegments(n)
		next := uint64(0)
		for _, s := range segs {
			if s.off != next {
				t.Fatalf("n %d: segment at %d, want %d (segments %v)", n, s.off, next, segs)
			}
			if s.len == 0 || s.len > 2*gib {
				t.Fatalf("n %d: segment of %d bytes, want 1..2GiB", n, s.len)
			}
			next += s.len
		}
		if next != n {
			t.Fatalf("n %d: segments cover %d bytes", n, next)
		}
	}
	if got := len(prefetchSegments(6 * gib)); got != 3 {
		t.Errorf("6GiB in %d segments, want 3", got)
	}
}

func TestMRSpans(t *testing.T) {
	const mib = uint64(1) << 20
	for _, c := range []struct {
		size, mr uint64
		n        int
		last     uint64
	}{
		{512 * mib, 32 * mib, 16, 32 * mib}, // the guest's 512 MiB in 32 MiB regions
		{512 * mib, 0, 1, 512 * mib},        // no mr_size: one region
		{512 * mib, 1 << 40, 1, 512 * mib},  // mr_size over the file: one region
		{100 * mib, 32 * mib, 4, 4 * mib},   // the last region is what is left
	} {
		spans := mrSpans(c.size, c.mr)
		next := uint64(0)
		for _, s := range spans {
			if s.off != next || s.len == 0 || (c.mr > 0 && s.len > c.mr) {
				t.Fatalf("%d in %d: span %+v after %d (spans %v)", c.size, c.mr, s, next, spans)
			}
			next += s.len
		}
		if next != c.size || len(spans) != c.n || spans[len(spans)-1].len != c.last {
			t.Errorf("%d in %d: %d spans covering %d, last %d; want %d, last %d", c.size, c.mr, len(spans), next, spans[len(spans)-1].len, c.n, c.last)
		}
	}
}

func TestCheckMRSize(t *testing.T) {
	if err := checkMRSize(1<<30, 1<<30, "mlx5_0", "the region", "lower file_size"); err != nil {
		t.Fatal(err)
	}
	if err := checkMRSize(1<<40, 0, "rxe0", "the region", "x"); err != nil {
		t.Fatalf("unknown max_mr_size refused: %v", err)
	}
	err := checkMRSize(1<<31, 1<<30, "mlx5_0", "the region", "lower file_size")
	if err == nil || !strings.Contains(err.Error(), "max_mr_size 1073741824") || strings.Contains(err.Error(), "memlock") {
		t.Fatalf("err = %v; want one naming max_mr_size, not memlock", err)
	}
}

func TestTrafficClass(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "rxe0", "ports", "1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "default_roce_tos"), []byte("96\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tos := defaultRoCETOS(root, "rxe0", 1)
	if tos == nil || *tos != 96 {
		t.Fatalf("defaultRoCETOS = %v, want 96", tos)
	}
	if got := defaultRoCETOS(root, "rxe1", 1); got != nil {
		t.Fatalf("a device without a configfs directory: %v, want nil", *got)
	}
	for _, c := range []struct {
		set  int
		cm   bool
		tos  *int
		want int
	}{
		{-1, true, tos, 96}, // unset over rdma_cm: the administrator's
		{32, true, tos, 32}, // set: the plan's
		{-1, false, tos, 0}, // unset over tcp: the GRH's default
		{-1, true, nil, 0},  // unset, nothing configured: the kernel's 0
	} {
		if got := trafficClass(c.set, c.cm, c.tos); got != c.want {
			t.Errorf("trafficClass(%d, cm %v) = %d, want %d", c.set, c.cm, got, c.want)
		}
	}
}

func TestBreakingEvent(t *testing.T) {
	gid := GID{Index: 1, GID: "::ffff:10.0.2.15", Type: "RoCE v2"}
	gone := func() bool { return true }
	still := func() bool { return false }
	for _, c := range []struct {
		name        string
		typ, evPort int
		gidGone     func() bool
		want        string
	}{
		{"port down", eventPortErr, 1, still, "went down"},
		// The kernel raises GID_CHANGE for any entry that changes: a new
		// IPv6 address on the interface leaves the one in use alone.
		{"a GID added", eventGIDChange, 1, still, ""},
		{"the GID in use gone", eventGIDChange, 1, gone, "::ffff:10.0.2.15 at index 1, is gone"},
		{"no GID in use (InfiniBand by LID)", eventGIDChange, 1, nil, ""},
		{"another port's", eventPortErr, 2, gone, ""},
		{"port active", 9, 1, gone, ""},
		{"fatal", eventDeviceFatal, 0, still, "fatal device error"},
	} {
		got := breakingEvent(c.typ, c.evPort, 1, gid, c.gidGone)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: breakingEvent = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestRelaxedOrderingGranted(t *testing.T) {
	config := func(devCtl byte) []byte {
		c := make([]byte, 256)
		c[0x06] = 0x10 // capability list
		c[0x34] = 0x40
		c[0x40], c[0x41] = 0x01, 0x60 // power management, then
		c[0x60], c[0x61] = 0x10, 0x00 // PCI Express, last
		c[0x68] = devCtl
		return c
	}
	for _, c := range []struct {
		name      string
		requested bool
		config    []byte
		want      string
	}{
		// The DevCtl bit does not decide: mlx5 grants the write direction
		// from its device capability, and a driver that ignores the flag
		// holds nothing whatever the bit says.
		{"hardware, DevCtl enabled", true, config(0x10 | 0x0f), "unknown"},
		{"hardware, DevCtl disabled (a VF)", true, config(0x0f), "unknown"},
		{"not requested", false, config(0x10), "false"},
		{"software device", true, nil, "false"},
		{"unprivileged read", true, config(0x10)[:64], "unknown"},
	} {
		got := "unknown"
		if g := relaxedOrderingGranted(c.requested, c.config); g != nil {
			got = map[bool]string{true: "true", false: "false"}[*g]
		}
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
