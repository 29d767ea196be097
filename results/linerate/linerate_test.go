package linerate

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseIBRate(t *testing.T) {
	for in, want := range map[string]float64{
		"100 Gb/sec (4X EDR)\n": 12500,
		"2.5 Gb/sec (1X SDR)":   312.5,
		"200 Gb/sec (4X HDR)":   25000,
		"10 Gb/sec (1X QDR)":    1250,
	} {
		if got, err := ParseIBRate(in); err != nil || got != want {
			t.Errorf("ParseIBRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "fast", "100 Mb/sec", "-1 Gb/sec (1X)", "x Gb/sec"} {
		if _, err := ParseIBRate(bad); err == nil {
			t.Errorf("ParseIBRate(%q) accepted it", bad)
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

func TestRDMA(t *testing.T) {
	root := fakeSys(t, map[string]string{"sys/class/infiniband/rxe0/ports/1/rate": "100 Gb/sec (4X EDR)\n"})
	if r := RDMA(root, "rxe0", 1); r.MBs != 12500 {
		t.Errorf("RDMA(rxe0, 1) = %+v, want 12500 MB/s", r)
	}
	if r := RDMA(root, "rxe0", 2); r.Known() || !strings.Contains(r.Unknown, "rxe0 port 2") {
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
