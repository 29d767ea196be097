// Package netns is the plumbing the namespace test harnesses share
// (testhosts' sshd hosts, slurmlab's Slurm nodes): one instance at a time
// by flock, the processes of a network namespace found by `ip netns pids`
// (the namespaces share this machine's pid space, so never by name), what
// a crashed run left removed by name prefix, and a subnet refused when the
// machine already uses it. Each function's messages start with who, the
// harness's name.
package netns

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Lock holds an flock on file until the test ends. The lock dies with
// the process, so a crashed run never blocks the next.
func Lock(t testing.TB, who, file string) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("%s: open lock: %v", who, err)
	}
	done := make(chan error, 1)
	go func() { done <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: lock %s: %v", who, file, err)
		}
	case <-time.After(10 * time.Minute):
		t.Fatalf("%s: another instance held %s for 10 minutes", who, file)
	}
	t.Cleanup(func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	})
}

// Pids lists every process in the network namespace ns.
func Pids(ns string) ([]int, error) {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

// Kill kills every process in ns and waits, up to 5 s, for them to go.
func Kill(ns string) {
	for i := 0; i < 250; i++ {
		pids, err := Pids(ns)
		if err != nil || len(pids) == 0 {
			return
		}
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RemoveStale removes what a crashed instance left: every namespace
// named nsPrefix… with its processes, the bridge, and every link named
// linkPrefix…. Call it with the lock held, so nothing it finds belongs to
// a live instance.
func RemoveStale(t testing.TB, who, nsPrefix, bridge, linkPrefix string) {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], nsPrefix) {
			continue
		}
		t.Logf("%s: removing stale namespace %s", who, f[0])
		Kill(f[0])
		exec.Command("ip", "netns", "delete", f[0]).Run()
	}
	exec.Command("ip", "link", "delete", bridge).Run()
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	for _, line := range strings.Split(string(links), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if strings.HasPrefix(name, linkPrefix) {
			exec.Command("ip", "link", "delete", name).Run()
		}
	}
}

// CheckSubnetFree refuses to build a network on a machine that already
// uses subnet: adding the harness's addresses would hijack its traffic.
func CheckSubnetFree(t testing.TB, who, subnet string) {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatalf("%s: list addresses: %v", who, err)
	}
	_, ours, err := net.ParseCIDR(subnet)
	if err != nil {
		t.Fatalf("%s: subnet %q: %v", who, subnet, err)
	}
	for _, a := range addrs {
		if ip, _, err := net.ParseCIDR(a.String()); err == nil && ours.Contains(ip) {
			t.Fatalf("%s: this machine already has %s, in the harness's subnet %s", who, a, ours)
		}
	}
}

// MustRun runs a setup command, failing the test with its output.
func MustRun(t testing.TB, who, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %s %s: %v: %s", who, name, strings.Join(args, " "), err, out)
	}
}
