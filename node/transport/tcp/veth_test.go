package tcp

import (
	"net"
	"os/exec"
	"testing"

	"rdmasweep/testbed/testenv"
)

// TestThroughVeth: an address on a veth is told apart from one on the
// loopback and from one on no interface, so SendAuto writes rather than
// sendfiles to a client in another namespace of this machine.
func TestThroughVeth(t *testing.T) {
	testenv.NeedRoot(t)
	testenv.NeedTool(t, "ip", "iproute2")
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	ip("link", "add", "rswvt0", "type", "veth", "peer", "name", "rswvt1")
	t.Cleanup(func() { exec.Command("ip", "link", "del", "rswvt0").Run() })
	ip("addr", "add", "198.18.251.1/30", "dev", "rswvt0")
	for _, c := range []struct {
		ip   string
		want bool
	}{{"198.18.251.1", true}, {"127.0.0.1", false}, {"198.18.251.2", false}} {
		if got := throughVeth(net.ParseIP(c.ip)); got != c.want {
			t.Errorf("throughVeth(%s) = %v, want %v", c.ip, got, c.want)
		}
	}
}
