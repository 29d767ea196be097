package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/testhosts"
)

// Faults of the connection to a host: its sshd killed, the link down, connections blackholed. See faults_test.go for the table every fault joins and the
// harness it runs in.

// sshdKilled is (c): the sshd process serving the runner's connection to
// a dies.
func sshdKilled() fault {
	return fault{
		name: "c_sshd_killed", sweep: onePoint, args: short("20s"), tally: true, code: 1, wait: 20 * time.Second,
		inject: func(f *faultRun) {
			f.bothUp()
			sshdPid := parentPid(f.T, f.pids[f.a])
			if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", sshdPid)); exe != "/usr/sbin/sshd" || sshdPid == f.a.SSHDPid {
				f.Fatalf("node serve's parent %d is %q, not a connection's sshd", sshdPid, exe)
			}
			f.a.Run(f, "kill", "-9", strconv.Itoa(sshdPid))
			killed := time.Now()
			lost := f.r.WaitStderr(f, hostLabel("server", f.a)+": connection lost", 10*time.Second)
			f.Logf("connection lost reported %v after its sshd was killed", lost.Sub(killed).Round(time.Millisecond))
		},
		check: func(f *faultRun) {
			rows := clitest.WholeCSV(f, f.csv)
			if len(rows) != 1 || rows[0].Status != results.StatusFailed || !strings.Contains(rows[0].Error, "connection lost") {
				f.Fatalf("rows: %+v", rows)
			}
			// node serve lost its stdin with its sshd: it exits on EOF, long
			// before its --deadline.
			if left := clitest.WaitNoNodes(f, 5*time.Second, f.a, f.b); len(left) > 0 {
				f.Fatalf("nodes outlived the lost connection: %v", left)
			}
		},
	}
}

// linkDown is (d): a's link goes down mid-point, then comes back.
func linkDown() fault {
	const keepalive = time.Second
	return fault{
		name: "d_link_down", sweep: onePoint, tally: true, code: 1, wait: 20 * time.Second,
		args: append(short("20s"), "--set", "ssh.keepalive_interval="+keepalive.String()),
		setup: func(f *faultRun) []string {
			f.Cleanup(func() { f.a.SetLink(f, true) })
			// Put node in place first: a 1 s keepalive can time out behind a
			// 5 MB upload on a loaded machine, and the upload is not the fault.
			for _, h := range []*testhosts.Host{f.a, f.b} {
				h.Run(f, "install", "-D", "-m", "0755", filepath.Join(binDir, "node"), testhosts.DeployDir+"/bin/node")
			}
			return nil
		},
		inject: func(f *faultRun) {
			f.bothUp()
			// When the link comes back, the FINs of the runner's old connection
			// and of the stopped client would reach a, and node serve would
			// exit on its own. Dropping them keeps it running, as on a host
			// that never heard: the next exec must reap it.
			blackholeConnections(f.T, f.a, parentPid(f.T, f.pids[f.a]), f.pids[f.a])
			f.a.SetLink(f, false)
			down := time.Now()
			failed := f.r.WaitStderr(f, "failed: ", 3*keepalive+5*time.Second)
			f.Logf("point failed %v after the link went down (keepalive_interval %v)", failed.Sub(down).Round(time.Millisecond), keepalive)
		},
		check: func(f *faultRun) {
			rows := clitest.WholeCSV(f, f.csv)
			if len(rows) != 1 || rows[0].Status != results.StatusFailed || !strings.HasPrefix(rows[0].Error, hostLabel("server", f.a)+": connection lost") ||
				!strings.Contains(rows[0].Error, "no answer to keepalives") {
				f.Fatalf("rows: %+v\n%s", rows, f.r.Stderr())
			}
			// Cut off, node serve runs on; the state file remembers it.
			if left := clitest.NodesOn(f, f.a); len(left) != 1 || left[0] != f.pids[f.a] {
				f.Fatalf("node serve on a while cut off: %v, want pid %d", left, f.pids[f.a])
			}
			if _, err := os.Stat(f.csv + ".state"); err != nil {
				f.Fatalf("the node cut off is not in the state file: %v", err)
			}
			f.a.SetLink(f, true)
			// The next exec, at once, kills it from the state file and gets
			// the fixed port.
			again := runnerEnv(f.T, f.dir, f.env, "exec", f.plan, "--set", "duration=1s", "--set", "total=0")
			if again.Code != 0 || !strings.Contains(again.Stderr, fmt.Sprintf("killed leftover node pid %d from an earlier exec", f.pids[f.a])) {
				f.Fatalf("next exec: exit %d\n%s", again.Code, again.Stderr)
			}
			if rows := clitest.WholeCSV(f, f.csv); len(rows) != 2 || rows[1].Status != results.StatusOK {
				f.Fatalf("rows after the next exec: %+v", rows)
			}
			f.noNodesLeft(0)
			if _, err := os.Stat(f.csv + ".state"); !os.IsNotExist(err) {
				f.Fatalf("state file left after a clean exec: %v", err)
			}
		},
	}
}

// blackholeConnections makes h drop every packet that reaches it on the
// established TCP connections of the given processes (an nftables table
// in h's namespace, removed at the end of the test), as if their peers
// had vanished without a word.
func blackholeConnections(t *testing.T, h *testhosts.Host, pids ...int) {
	t.Helper()
	h.Run(t, "nft", "add table inet rswfault")
	t.Cleanup(func() { h.Output("nft", "delete table inet rswfault") })
	h.Run(t, "nft", "add chain inet rswfault input { type filter hook input priority 0 ; }")
	ss := h.Run(t, "ss", "-Htnp", "state", "established")
	for _, pid := range pids {
		n := 0
		for _, line := range strings.Split(ss, "\n") {
			// Recv-Q Send-Q Local:Port Peer:Port Process
			f := strings.Fields(line)
			if len(f) < 5 || !strings.Contains(line, fmt.Sprintf("pid=%d,", pid)) {
				continue
			}
			split := func(s string) (string, string) {
				i := strings.LastIndexByte(s, ':')
				return s[:i], s[i+1:]
			}
			_, lport := split(f[2])
			paddr, pport := split(f[3])
			h.Run(t, "nft", "add rule inet rswfault input ip saddr "+paddr+" tcp sport "+pport+" tcp dport "+lport+" drop")
			n++
		}
		if n == 0 {
			t.Fatalf("no connection of pid %d on %s:\n%s", pid, h.Name, ss)
		}
	}
}
