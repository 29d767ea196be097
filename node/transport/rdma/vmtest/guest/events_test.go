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
