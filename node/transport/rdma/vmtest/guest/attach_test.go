//go:build rdmaguest

package guest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"rdmasweep/results"
)

// TestAttachLoopRDMA: node attach --loop, as the Slurm launcher starts it,
// runs rdma clients (node read) in its own process one point after
// another. Each read is verified, and what a read takes from the process
// it gives back: after the first points the agent's open files (each
// device context is a uverbs fd) stay the same and its memory does not
// grow by the 16 MiB each read registers.
func TestAttachLoopRDMA(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	agent := launch(t, "", func(c *exec.Cmd) {
		c.Env = append(os.Environ(), results.AttachTokenEnv+"=t0ken")
	}, nodeBin(t), "attach", "--runner", ln.Addr().String(), "--loop")
	pid := agent.cmd.Process.Pid
	key := results.AttachKey("t0ken") // the runner's side of the handshake

	const points = 10
	var fds0, rss0 int
	for i := 1; i <= points; i++ {
		secret := fmt.Sprintf("%064x", i)
		srv := start(t, secret, serveArgs(t, "16MiB")...)
		ready := until[results.Ready](t, srv, "ready")
		ln.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second))
		c, err := ln.Accept()
		if err != nil {
			t.Fatalf("point %d: node attach did not attach: %v", i, err)
		}
		line, err := bufio.NewReader(c).ReadBytes('\n')
		if err != nil {
			t.Fatalf("point %d: hello: %v", i, err)
		}
		var hello results.AttachHello
		json.Unmarshal(line, &hello)
		nonce, err := hello.HelloNonce()
		if err != nil || hello.ID != key.ID() {
			t.Fatalf("point %d: hello %s: want the ID %s and a nonce (%v)", i, line, key.ID(), err)
		}
		argv := readArgs(ready.Address, ready.Port, "--block-size", "1MiB", "--queue-depth", "16", "--total", "16MiB", "--verify", "--control-stdin")
		cmd := results.AttachCommand{Argv: argv, MAC: key.MAC(nonce, argv)}
		key = key.Next(nonce)
		for _, v := range []any{cmd, results.Control{Secret: secret}} {
			b, _ := json.Marshal(v)
			c.Write(append(b, '\n'))
		}
		st := until[results.Started](t, agent, "started")
		res := until[results.Result](t, agent, "result")
		if st.PID != pid || !res.Verified || res.Bytes != 16<<20 {
			t.Fatalf("point %d: started pid %d (agent %d), result %d bytes verified %v", i, st.PID, pid, res.Bytes, res.Verified)
		}
		endLine(t, agent, i)
		c.Close()
		until[results.Done](t, srv, "done")
		finish(t, srv)
		fds, rss := procUse(t, pid)
		t.Logf("point %d: %.1f MB/s verified; agent %d open files, %d KiB resident", i, res.BandwidthMBs, fds, rss)
		if i == 2 {
			fds0, rss0 = fds, rss
		}
		if i == points && (fds != fds0 || rss-rss0 > 16<<10) {
			t.Errorf("after %d more points: %d open files (was %d), %d KiB resident (was %d): a read left something behind", points-2, fds, fds0, rss, rss0)
		}
	}
}

// endLine waits for the agent's end line for a command that exited 0.
func endLine(t *testing.T, agent *proc, point int) {
	t.Helper()
	b, _ := json.Marshal(results.AttachEnd{Status: 0})
	want := results.AttachEndMarker + string(b)
	for {
		select {
		case ev, ok := <-agent.events:
			if !ok {
				t.Fatalf("point %d: node attach exited; stderr:\n%s", point, agent.stderr.String())
			}
			if e, isErr := ev.(error); isErr {
				if q := strconv.Quote(want); !strings.Contains(e.Error(), q[1:len(q)-1]) {
					t.Fatalf("point %d: %v, want the end line %q", point, e, want)
				}
				return
			}
			if e, isErr := ev.(*results.Error); isErr {
				t.Fatalf("point %d: error event %s", point, e.Message)
			}
		case <-time.After(time.Minute):
			t.Fatalf("point %d: no end line", point)
		}
	}
}

// procUse is pid's open files and resident KiB.
func procUse(t *testing.T, pid int) (fds, rssKiB int) {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			fmt.Sscanf(strings.TrimPrefix(l, "VmRSS:"), "%d", &rssKiB)
		}
	}
	return len(ents), rssKiB
}
