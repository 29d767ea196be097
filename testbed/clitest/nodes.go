package clitest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rdmasweep/testbed/testhosts"
)

// NodesOn lists the node processes that h's SSH sessions run or left
// running, by their executable's name.
func NodesOn(t testing.TB, h *testhosts.Host) []int {
	t.Helper()
	var pids []int
	for _, pid := range h.SessionPids(t) {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err == nil && strings.HasSuffix(strings.TrimSuffix(exe, " (deleted)"), "/node") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// LocalNodes lists the live processes on this machine whose executable is
// exe.
func LocalNodes(t testing.TB, exe string) []int {
	t.Helper()
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if got, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && got == exe {
			pids = append(pids, pid)
		}
	}
	return pids
}

// WaitNodes waits until every host runs one node of a point's role (both
// roles of a point are up, so the point is under way) and returns each
// host's node pid. A role's node takes its control on stdin; the short
// node commands the runner's checks run (node version, devices, host) do
// not, and are not counted.
func (p *Proc) WaitNodes(t testing.TB, hosts ...*testhosts.Host) map[*testhosts.Host]int {
	t.Helper()
	var got map[*testhosts.Host]int
	p.Until(t, "nodes on every host", 60*time.Second, func() bool {
		got = map[*testhosts.Host]int{}
		for _, h := range hosts {
			var roles []int
			for _, pid := range NodesOn(t, h) {
				cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				if strings.Contains(string(cmd), "\x00--control-stdin\x00") {
					roles = append(roles, pid)
				}
			}
			if len(roles) == 1 {
				got[h] = roles[0]
			}
		}
		return len(got) == len(hosts)
	})
	return got
}

// WaitNoNodes waits up to timeout for every host to be free of node, and
// returns what is left there ("host: pid N").
func WaitNoNodes(t testing.TB, timeout time.Duration, hosts ...*testhosts.Host) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var left []string
		for _, h := range hosts {
			for _, pid := range NodesOn(t, h) {
				left = append(left, fmt.Sprintf("%s: pid %d", h.Name, pid))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// KillLeftNodes kills, when the test ends, any node still on the hosts,
// so that what a failed test left does not break the next.
func KillLeftNodes(t testing.TB, hosts ...*testhosts.Host) {
	t.Cleanup(func() {
		for _, h := range hosts {
			for _, pid := range NodesOn(t, h) {
				t.Logf("killing node pid %d left on %s", pid, h.Name)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}
