package tcp

import (
	"net"
	"os/exec"
	"testing"

	"rdmasweep/testbed/testenv"
)

// TestThroughVeth: an address on a veth is told apart from one on the
// loopback and from one on no interface, so SendAuto writes replies
// under 1 MiB to a client in another namespace of this machine, rather
// than sendfile them, and every reply to a loopback client.
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
	for _, c := range []struct {
		remote, local string
		want          int
	}{
		{"198.18.251.2", "198.18.251.1", vethSendfileMin},
		{"127.0.0.1", "127.0.0.1", noSendfile},
		{"198.18.251.1", "198.18.251.2", 0},
	} {
		if got := autoSendfileMin(net.ParseIP(c.remote), net.ParseIP(c.local), throughVeth); got != c.want {
			t.Errorf("from %s to %s: replies from %d bytes by sendfile, want from %d", c.local, c.remote, got, c.want)
		}
	}
}
