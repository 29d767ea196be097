package remote_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/remote/hosttest"
	"rdmasweep/testbed/testhosts"
)

// TestConformanceLocal runs the remote.Host suite against this machine.
func TestConformanceLocal(t *testing.T) {
	hosttest.Run(t, hosttest.Target{
		New:       func(t *testing.T) remote.Host { return remote.Local{} },
		Dir:       t.TempDir(),
		Leftovers: hosttest.LocalLeftovers,
	})
}

// testConformanceSSH runs the remote.Host suite against a real sshd host
// (part of TestSSH, which builds the hosts once), logged in as root
// (signals go by pid over a second session) and as an unprivileged user
// (sshd delivers session signals).
func testConformanceSSH(t *testing.T, n *testhosts.Net) {
	a := n.Hosts["a"]
	for _, user := range []string{"root", n.User} {
		t.Run(user, func(t *testing.T) {
			hosttest.Run(t, hosttest.Target{
				New: func(t *testing.T) remote.Host {
					cfg := config(t, n, a)
					cfg.User = user
					// 24 dials: on a loaded machine one handshake can
					// take over config's 5 s.
					cfg.ConnectTimeout = 30 * time.Second
					return dial(t, cfg)
				},
				Dir:       testhosts.DeployDir + "/hosttest-" + user,
				Leftovers: func(t *testing.T) []string { return sessionLeftovers(t, a) },
			})
		})
	}
}

// sessionLeftovers describes the processes on h other than sshd's own.
func sessionLeftovers(t *testing.T, h *testhosts.Host) []string {
	var out []string
	for _, p := range h.SessionPids(t) {
		cmd, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(p), "cmdline"))
		if err != nil {
			continue
		}
		out = append(out, fmt.Sprintf("%s: pid %d: %s", h.Name, p, strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")))
	}
	return out
}
