//go:build rdmaguest

package guest

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"rdmasweep/results"
)

// TestPortDownEndsPoint: the server watches the device's async events
// while the client reads, and setting eth1 down under rxe1 ends the point
// with the event named, not a bare retry-exceeded. rxe reports the GID
// change (the interface's addresses leave the table) before the port
// going down; either names what broke the path.
func TestPortDownEndsPoint(t *testing.T) {
	srv := start(t, "", serveArgs(t, "4MiB", "--listen", guestIP1)...)
	ready := until[results.Ready](t, srv, "ready")
	cl := start(t, "", readArgs(guestIP1, ready.Port, "--block-size", "64KiB", "--queue-depth", "4", "--duration", "60s")...)
	t.Cleanup(func() { exec.Command("ip", "link", "set", "eth1", "up").Run() })
	time.Sleep(5 * time.Second) // connected and reading, under TCG
	if out, err := exec.Command("ip", "link", "set", "eth1", "down").CombinedOutput(); err != nil {
		t.Fatalf("ip link set eth1 down: %v: %s", err, out)
	}
	msg := failure(t, srv)
	if !strings.Contains(msg, "rxe1") || !strings.Contains(msg, "went down") && !strings.Contains(msg, "GID table changed") {
		t.Errorf("server: %q; want the port-down or GID-change event on rxe1 named", msg)
	}
	t.Logf("server: %s; client: %s", msg, failure(t, cl))
}

// TestGIDEventsJudgedByTheGIDInUse: the kernel raises a GID change for any
// entry of the port's table. A new IPv6 address on eth1, under rxe1,
// adds one and leaves the GID the QPs use alone: the point ends ok.
// Removing eth1's IPv4 address removes the GID in use: the point ends,
// the server and the client (which watches its own device's events)
// each naming the GID that went.
func TestGIDEventsJudgedByTheGIDInUse(t *testing.T) {
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	exec.Command("sysctl", "-qw", "net.ipv6.conf.eth1.disable_ipv6=0").Run()

	srv := start(t, "", serveArgs(t, "4MiB", "--listen", guestIP1)...)
	ready := until[results.Ready](t, srv, "ready")
	cl := start(t, "", readArgs(guestIP1, ready.Port, "--block-size", "64KiB", "--queue-depth", "4", "--duration", "8s")...)
	time.Sleep(3 * time.Second) // connected and reading, under TCG
	ip("-6", "addr", "add", "fd00:5eed::15/64", "dev", "eth1")
	t.Cleanup(func() { exec.Command("ip", "-6", "addr", "del", "fd00:5eed::15/64", "dev", "eth1").Run() })
	res := until[results.Result](t, cl, "result")
	finish(t, cl)
	finish(t, srv)
	t.Logf("a GID added mid-point: %.1f MB/s, the point ok", res.BandwidthMBs)

	srv = start(t, "", serveArgs(t, "4MiB", "--listen", guestIP1)...)
	ready = until[results.Ready](t, srv, "ready")
	cl = start(t, "", readArgs(guestIP1, ready.Port, "--block-size", "64KiB", "--queue-depth", "4", "--duration", "60s")...)
	time.Sleep(3 * time.Second)
	ip("addr", "del", guestIP1+"/24", "dev", "eth1")
	t.Cleanup(func() { exec.Command("ip", "addr", "add", guestIP1+"/24", "dev", "eth1").Run() })
	gone := "::ffff:" + guestIP1 + " at index"
	if msg := failure(t, srv); !strings.Contains(msg, gone) || !strings.Contains(msg, "IBV_EVENT_GID_CHANGE") {
		t.Errorf("server: %q; want the GID in use (%s) named gone", msg, gone)
	}
	if msg := failure(t, cl); !strings.Contains(msg, gone) {
		t.Errorf("client: %q; want its own device's event naming the GID in use (%s) gone", msg, gone)
	}
}
