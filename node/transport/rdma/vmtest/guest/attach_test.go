//go:build rdmaguest

package guest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
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
// grow by the 16 MiB each read registers. Both are read when the agent
// has attached for its next command: it is then idle, between points,
// with one connection open. (Read at a point's end, they raced the
// agent's own close of that point's connection.)
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
	var files0 []string
	for i := 1; ; i++ {
		ln.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second))
		c, err := ln.Accept()
		if err != nil {
			t.Fatalf("point %d: node attach did not attach: %v", i, err)
		}
		br := bufio.NewReader(c)
		hello, err := results.ReadHello(br)
		if err != nil {
			t.Fatalf("point %d: hello: %v", i, err)
		}
		nonce, err := hello.HelloNonce()
		if err != nil || hello.ID != key.ID() {
			t.Fatalf("point %d: hello %+v: want the ID %s and a nonce (%v)", i, hello, key.ID(), err)
		}
		if done := i - 1; done > 0 {
			files, rss := procUse(t, pid)
			t.Logf("after point %d: agent %d open files, %d KiB resident", done, len(files), rss)
			if done == 2 {
				files0, rss0 = files, rss
				fds0 = len(files)
			}
			if done == points {
				if len(files) != fds0 || rss-rss0 > 16<<10 {
					t.Errorf("after %d more points: %d open files (was %d), %d KiB resident (was %d): a read left something behind\nnow: %s\nwas: %s",
						points-2, len(files), fds0, rss, rss0, strings.Join(files, " "), strings.Join(files0, " "))
				}
				c.Close() // no command: the agent's loop ends
				select {
				case err := <-agent.done:
					if err != nil {
						t.Errorf("node attach --loop ended with %v after a connection with no command; stderr:\n%s", err, agent.stderr.String())
					}
				case <-time.After(30 * time.Second):
					t.Errorf("node attach --loop still runs 30 s after a connection with no command")
				}
				return
			}
		}
		secret := fmt.Sprintf("%064x", i)
		srv := start(t, secret, serveArgs(t, "16MiB")...)
		ready := until[results.Ready](t, srv, "ready")
		argv := readArgs(ready.Address, ready.Port, "--block-size", "1MiB", "--queue-depth", "16", "--total", "16MiB", "--verify", "--control-stdin")
		ch := key.RunnerChannel(br, c, nonce)
		key = key.Next(nonce)
		ch.SendCommand(argv)
		b, _ := json.Marshal(results.Control{Secret: secret})
		ch.Send(results.FrameStdin, append(b, '\n'))
		st, res := attachedRead(t, ch, i)
		if st.PID != pid || !res.Verified || res.Bytes != 16<<20 {
			t.Fatalf("point %d: started pid %d (agent %d), result %d bytes verified %v", i, st.PID, pid, res.Bytes, res.Verified)
		}
		c.Close()
		until[results.Done](t, srv, "done")
		finish(t, srv)
		t.Logf("point %d: %.1f MB/s verified", i, res.BandwidthMBs)
	}
}

// attachedRead reads an attached read's events from its channel: its
// started and result events, then its end, which must be status 0.
func attachedRead(t *testing.T, ch *results.AttachChannel, point int) (*results.Started, *results.Result) {
	t.Helper()
	var st *results.Started
	var res *results.Result
	var out []byte
	for {
		kind, b, err := ch.Recv()
		if err != nil {
			t.Fatalf("point %d: the agent's connection: %v", point, err)
		}
		switch kind {
		case results.FrameStdout:
			out = append(out, b...)
			for {
				i := bytes.IndexByte(out, '\n')
				if i < 0 {
					break
				}
				ev, _ := results.Decode(out[:i])
				out = out[i+1:]
				switch ev := ev.(type) {
				case *results.Started:
					st = ev
				case *results.Result:
					res = ev
				case *results.Error:
					t.Fatalf("point %d: error event %s", point, ev.Message)
				}
			}
		case results.FrameEnd:
			var end results.AttachEnd
			json.Unmarshal(b, &end)
			if end.Status != 0 || st == nil || res == nil {
				t.Fatalf("point %d: end %+v, started %v, result %v", point, end, st, res)
			}
			return st, res
		}
	}
}

// procUse is pid's open files (fd:target) and resident KiB.
func procUse(t *testing.T, pid int) (files []string, rssKiB int) {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		target, _ := os.Readlink(dir + "/" + e.Name())
		files = append(files, e.Name()+":"+target)
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
	return files, rssKiB
}
