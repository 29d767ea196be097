package linerate

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseIBRate: a port's rate file gives the data its link carries,
// whatever figure the kernel writes before the parenthesis: 4X QDR
// signals 40 Gb/s and carries 32.
func TestParseIBRate(t *testing.T) {
	for in, want := range map[string]float64{
		"40 Gb/sec (4X QDR)\n":   4000,
		"100 Gb/sec (4X EDR)\n":  12500,
		"200 Gb/sec (1X XDR)\n":  25000,
		"800 Gb/sec (4X XDR)":    100000,
		"2.5 Gb/sec (1X SDR)":    250,
		"20 Gb/sec (4X DDR)":     2000,
		"40 Gb/sec (4X FDR10)":   5000,
		"56 Gb/sec (4X FDR)":     6820,
		"200 Gb/sec (4X HDR)":    25000,
		"100 Gb/sec (2X HDR)":    12500,
		"400 Gb/sec (8X HDR)":    50000,
		"400 Gb/sec (4X NDR)":    50000,
		"300 Gb/sec (12X EDR)":   37500,
		"10 Gb/sec (1X FDR10)\n": 1250,
	} {
		if l, err := ParseIBRate(in); err != nil || l.DataMBs() != want {
			t.Errorf("ParseIBRate(%q) = %+v (%v MB/s), %v; want %v MB/s", in, l, l.DataMBs(), err, want)
		}
	}
	for _, bad := range []string{"", "fast", "100 Mb/sec", "40 Gb/sec", "40 Gb/sec (4X)", "40 Gb/sec (3X QDR)", "40 Gb/sec (4X QDR", "40 Gb/sec (4X GDR)"} {
		if l, err := ParseIBRate(bad); err == nil {
			t.Errorf("ParseIBRate(%q) accepted it: %+v", bad, l)
		}
	}
}

// TestLinkOf: verbs' active_speed and active_width numbers name the
// same links as the rate file, 4X being width 2.
func TestLinkOf(t *testing.T) {
	for _, c := range []struct {
		speed, width int
		want         string
		mbs, gbps    float64
	}{
		{4, 2, "4x QDR", 4000, 40},
		{32, 2, "4x EDR", 12500, 103.125},
		{256, 1, "1x XDR", 25000, 212.5},
		{64, 16, "2x HDR", 12500, 106.25},
		{64, 4, "8x HDR", 50000, 425},
		{1, 8, "12x SDR", 3000, 30},
	} {
		l, err := LinkOf(c.speed, c.width)
		if got := l.Width() + " " + l.Speed.Name; err != nil || got != c.want || l.DataMBs() != c.mbs || l.SignalGbps() != c.gbps {
			t.Errorf("LinkOf(%d, %d) = %s (%v MB/s, %v Gb/s), %v; want %s (%v, %v)", c.speed, c.width, got, l.DataMBs(), l.SignalGbps(), err, c.want, c.mbs, c.gbps)
		}
	}
	for _, c := range [][2]int{{3, 2}, {4, 3}, {512, 1}} {
		if l, err := LinkOf(c[0], c[1]); err == nil {
			t.Errorf("LinkOf(%d, %d) = %+v, want an error", c[0], c[1], l)
		}
	}
}

func TestParseSpeed(t *testing.T) {
	if got, err := ParseSpeed("10000\n"); err != nil || got != 1250 {
		t.Errorf("ParseSpeed(10000) = %v, %v; want 1250", got, err)
	}
	for _, bad := range []string{"-1", "0", "fast"} {
		if _, err := ParseSpeed(bad); err == nil {
			t.Errorf("ParseSpeed(%q) accepted it", bad)
		}
	}
}

// fakeSys writes files under a fake root: path → content.
func fakeSys(t *testing.T, files map[string]string) string {
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestRDMA: an InfiniBand port gives its link's data rate; an Ethernet
// one (RoCE, iWARP) its network device's speed, whatever rate the kernel
// made up for it, or unknown with the reason.
func TestRDMA(t *testing.T) {
	root := fakeSys(t, map[string]string{
		"sys/class/infiniband/mlx5_0/ports/1/rate":       "40 Gb/sec (4X QDR)\n",
		"sys/class/infiniband/mlx5_0/ports/1/link_layer": "InfiniBand\n",
		"sys/class/infiniband/mlx5_1/ports/1/rate":       "100 Gb/sec (4X EDR)\n",
		"sys/class/infiniband/mlx5_1/ports/1/link_layer": "InfiniBand\n",
		"sys/class/infiniband/mlx5_2/ports/1/rate":       "200 Gb/sec (1X XDR)\n",
		"sys/class/infiniband/mlx5_2/ports/1/link_layer": "InfiniBand\n",
		"sys/class/infiniband/rxe0/ports/1/rate":         "10 Gb/sec (1X FDR10)\n",
		"sys/class/infiniband/rxe0/ports/1/link_layer":   "Ethernet\n",
		"sys/class/infiniband/rxe1/ports/1/rate":         "2.5 Gb/sec (1X SDR)\n",
		"sys/class/infiniband/rxe1/ports/1/link_layer":   "Ethernet\n",
		"sys/class/infiniband/siw0/ports/1/rate":         "2.5 Gb/sec (1X SDR)\n",
		"sys/class/infiniband/siw0/ports/1/link_layer":   "Ethernet\n",
		"sys/class/net/eth0/speed":                       "10000\n",
		"sys/class/net/eth1/speed":                       "-1\n",
	})
	for _, c := range []struct {
		dev, netdev, noNetdev, want string
	}{
		{"mlx5_0", "", "", "4000.0 MB/s"},
		{"mlx5_1", "", "", "12500.0 MB/s"},
		{"mlx5_2", "", "", "25000.0 MB/s"},
		{"rxe0", "eth0", "", "1250.0 MB/s"},
		{"rxe1", "eth1", "", "unknown (rxe1 port 1: eth1: speed is -1: the driver does not know the link's rate)"},
		{"siw0", "", "no netdev", "unknown (siw0 port 1 is Ethernet, and its network device is not known: no netdev)"},
	} {
		if got := RDMA(root, c.dev, 1, c.netdev, c.noNetdev).String(); got != c.want {
			t.Errorf("RDMA(%s) = %s, want %s", c.dev, got, c.want)
		}
	}
	if r := RDMA(root, "mlx5_0", 2, "", ""); r.Known() || !strings.Contains(r.Unknown, "mlx5_0 port 2") {
		t.Errorf("RDMA of a missing port = %+v, want unknown naming it", r)
	}
}

func TestTCP(t *testing.T) {
	root := fakeSys(t, map[string]string{
		"sys/class/net/eth0/speed":  "10000\n",
		"sys/class/net/veth1/speed": "-1\n",
	})
	ifaces := []Iface{
		{Name: "lo", Loopback: true, Addrs: []net.IP{net.ParseIP("127.0.0.1")}},
		{Name: "eth0", Addrs: []net.IP{net.ParseIP("198.18.17.2")}},
		{Name: "veth1", Addrs: []net.IP{net.ParseIP("198.18.17.3")}},
	}
	for addr, want := range map[string]string{
		"198.18.17.2": "1250.0 MB/s",
		"198.18.17.3": "unknown (veth1: speed is -1: the driver does not know the link's rate)",
		"127.0.0.1":   "unknown (loopback has no line rate)",
		"0.0.0.0":     "unknown (listening on all addresses, so no one link carries the data)",
		"192.0.2.9":   "unknown (no network device has the address 192.0.2.9)",
	} {
		if got := TCP(root, ifaces, net.ParseIP(addr)).String(); got != want {
			t.Errorf("TCP(%s) = %s, want %s", addr, got, want)
		}
	}
}

func TestIfacesHasLoopback(t *testing.T) {
	ifs, err := Ifaces()
	if err != nil {
		t.Fatal(err)
	}
	r := TCP("/", ifs, net.ParseIP("127.0.0.1"))
	if r.Known() {
		t.Errorf("this host's loopback has a rate: %v", r)
	}
}
