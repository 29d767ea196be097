package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/testbed/testenv"
)

// attachListener is the runner's side of node attach: a listener, and the
// next connection's hello.
func attachListener(t *testing.T) (net.Listener, func() (net.Conn, results.AttachHello)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, func() (net.Conn, results.AttachHello) {
		t.Helper()
		ln.(*net.TCPListener).SetDeadline(time.Now().Add(20 * time.Second))
		c, err := ln.Accept()
		if err != nil {
			t.Fatalf("node did not attach: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		line, err := bufio.NewReader(c).ReadBytes('\n')
		var h results.AttachHello
		if err != nil || json.Unmarshal(line, &h) != nil {
			t.Fatalf("hello %q: %v", line, err)
		}
		return c, h
	}
}

// runnerKey is the runner's side of the token: it answers a hello's
// challenge with the command line, then moves to the next key as the
// runner does.
type runnerKey struct{ k results.AttachKey }

func newRunnerKey(token string) *runnerKey { return &runnerKey{results.AttachKey(token)} }

// command sends argv on c, answering hello, and returns the line sent.
func (r *runnerKey) command(t *testing.T, c net.Conn, hello results.AttachHello, argv []string) results.AttachCommand {
	t.Helper()
	if hello.ID != r.k.ID() {
		t.Fatalf("hello %+v: want the ID of the runner's key %s", hello, r.k.ID())
	}
	nonce, err := hello.HelloNonce()
	if err != nil {
		t.Fatal(err)
	}
	cmd := results.AttachCommand{Argv: argv, MAC: r.k.MAC(nonce, argv)}
	r.k = r.k.Next(nonce)
	sendLine(t, c, cmd)
	return cmd
}

func sendLine(t *testing.T, c net.Conn, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if _, err := c.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

// node attach takes its command line, and then its control lines, from its
// own connection to the runner, and stops when that connection ends, as
// node under --control-stdin stops on stdin's end. Its own stdin is not
// its control channel: here it stays open throughout.
func TestAttach(t *testing.T) {
	ln, accept := attachListener(t)
	t.Setenv(results.AttachTokenEnv, "t0ken")
	p := start(t, "", "attach", "--runner", ln.Addr().String())
	c, hello := accept()
	if hello.Pid != p.cmd.Process.Pid || strings.Contains(hello.ID+hello.Nonce, "t0ken") {
		t.Fatalf("hello %+v: want pid %d, and the token's ID, not the token", hello, p.cmd.Process.Pid)
	}
	file := filepath.Join(t.TempDir(), "data")
	newRunnerKey("t0ken").command(t, c, hello, serveArgs(file, "--create", "--control-stdin"))
	sendLine(t, c, results.Control{Secret: strings.Repeat("ab", 32)})
	if st := mustType[*results.Started](t, p.next(10*time.Second)); st.Role != "serve" || st.PID != p.cmd.Process.Pid {
		t.Errorf("started %+v: want serve in the attached process", st)
	}
	if rd := mustType[*results.Ready](t, p.next(30*time.Second)); rd.Port <= 0 {
		t.Errorf("ready %+v: want a port", rd)
	}
	c.Close()
	code, last := p.wait(10 * time.Second)
	if e, ok := last.(*results.Error); code != 1 || !ok || !strings.Contains(e.Message, "stdin closed") {
		t.Errorf("after the connection closed: exit %d, last event %#v", code, last)
	}
}

// node attach --loop runs one command after another, each a child with
// its own connection as stdin, marks each one's end and status on stdout
// and stderr, and attaches again with the next key; a connection closed
// before a command ends it cleanly.
func TestAttachLoop(t *testing.T) {
	// Each command is a child that node execs from its own binary, which
	// under qemu-user without binfmt the kernel cannot run: make test-arm64
	// leaves this test out (-skip), and the native make test runs it.
	if emu := os.Getenv("RDMASWEEP_NODE_EXEC"); emu != "" {
		testenv.Skip(t, "node runs under "+emu+", and this kernel execs its children only through it")
	}
	ln, accept := attachListener(t)
	t.Setenv(results.AttachTokenEnv, "t0ken")
	p := start(t, "", "attach", "--runner", ln.Addr().String(), "--loop")
	endLine := func(status int) string {
		b, _ := json.Marshal(results.AttachEnd{Status: status})
		return results.AttachEndMarker + string(b)
	}
	c, hello := accept()
	rk := newRunnerKey("t0ken")
	file := filepath.Join(t.TempDir(), "data")
	rk.command(t, c, hello, serveArgs(file, "--create", "--control-stdin"))
	sendLine(t, c, results.Control{Secret: strings.Repeat("ab", 32)})
	if st := mustType[*results.Started](t, p.next(10*time.Second)); st.Role != "serve" || st.PID == p.cmd.Process.Pid {
		t.Errorf("started %+v: want serve in a child of node attach (pid %d)", st, p.cmd.Process.Pid)
	}
	mustType[*results.Ready](t, p.next(30*time.Second))
	c.Close()
	if e := mustType[*results.Error](t, p.next(10*time.Second)); !strings.Contains(e.Message, "stdin closed") {
		t.Errorf("after the connection closed: %#v", e)
	}
	if err, ok := p.next(10 * time.Second).(error); !ok || !strings.Contains(err.Error(), strconv.Quote(endLine(1))[1:]) {
		t.Errorf("after serve: %v, want its end line %q", err, endLine(1))
	}

	c, again := accept()
	if again.ID == hello.ID || again.Nonce == hello.Nonce || again.Pid != hello.Pid {
		t.Errorf("second hello %+v after %+v: want the next key's ID and a new nonce", again, hello)
	}
	rk.command(t, c, again, []string{"read"}) // no --server: usage
	mustType[*results.Error](t, p.next(10*time.Second))
	if err, ok := p.next(10 * time.Second).(error); !ok || !strings.Contains(err.Error(), strconv.Quote(endLine(2))[1:]) {
		t.Errorf("after a usage error: %v, want its end line %q", err, endLine(2))
	}

	c, _ = accept()
	c.Close()
	if code, _ := p.wait(10 * time.Second); code != 0 {
		t.Errorf("closed before a third command: exit %d, want 0", code)
	}
	if n := strings.Count(p.stderr.String(), results.AttachEndMarker); n != 2 {
		t.Errorf("stderr holds %d end lines, want 2:\n%s", n, p.stderr.String())
	}
}

func TestAttachRefusals(t *testing.T) {
	ln, accept := attachListener(t)
	t.Run("NoToken", func(t *testing.T) {
		t.Setenv(results.AttachTokenEnv, "")
		p := start(t, "", "attach", "--runner", ln.Addr().String())
		code, last := p.wait(10 * time.Second)
		if e, ok := last.(*results.Error); code != 2 || !ok || !strings.Contains(e.Message, results.AttachTokenEnv+" is not set") {
			t.Errorf("exit %d, last event %#v", code, last)
		}
	})
	t.Run("ClosedBeforeCommand", func(t *testing.T) {
		t.Setenv(results.AttachTokenEnv, "t0ken")
		p := start(t, "", "attach", "--runner", ln.Addr().String())
		c, _ := accept()
		c.Close()
		code, last := p.wait(10 * time.Second)
		if e, ok := last.(*results.Error); code != 1 || !ok || !strings.Contains(e.Message, "closed the connection before sending a command") {
			t.Errorf("exit %d, last event %#v", code, last)
		}
	})
	t.Run("AttachAgain", func(t *testing.T) {
		t.Setenv(results.AttachTokenEnv, "t0ken")
		p := start(t, "", "attach", "--runner", ln.Addr().String())
		c, hello := accept()
		newRunnerKey("t0ken").command(t, c, hello, []string{"attach", "--runner", ln.Addr().String()})
		if code, _ := p.wait(10 * time.Second); code != 2 {
			t.Errorf("attach as the command: exit %d, want 2", code)
		}
	})
}

// node attach --loop runs node read, a fan-in's many clients, in its own
// process: no exec per client. Its started event carries node attach's
// pid, its verified result and its end line follow on the shared stdout,
// and the agent attaches again for the next command. This needs no exec,
// so it runs under the emulator too.
func TestAttachLoopReadInProcess(t *testing.T) {
	secret := strings.Repeat("cd", 32)
	file := filepath.Join(t.TempDir(), "data")
	s, ready := serveReady(t, `{"secret":"`+secret+`"}`+"\n", serveArgs(file, "--create", "--control-stdin")...)
	ln, accept := attachListener(t)
	t.Setenv(results.AttachTokenEnv, "t0ken")
	p := start(t, "", "attach", "--runner", ln.Addr().String(), "--loop")
	c, hello := accept()
	newRunnerKey("t0ken").command(t, c, hello, readArgs(ready.Port, "--control-stdin", "--verify"))
	sendLine(t, c, results.Control{Secret: secret})
	if st := mustType[*results.Started](t, p.next(10*time.Second)); st.Role != "read" || st.PID != p.cmd.Process.Pid {
		t.Errorf("started %+v: want read in node attach's own process (pid %d)", st, p.cmd.Process.Pid)
	}
	if res := mustType[*results.Result](t, p.next(30*time.Second)); res.Bytes != 8<<20 || !res.Verified {
		t.Errorf("result %+v: want 8MiB verified", res)
	}
	b, _ := json.Marshal(results.AttachEnd{Status: 0})
	if err, ok := p.next(10 * time.Second).(error); !ok || !strings.Contains(err.Error(), strconv.Quote(results.AttachEndMarker + string(b))[1:]) {
		t.Errorf("after read: %v, want its end line with status 0", err)
	}
	c.Close()
	mustType[*results.Done](t, s.next(10*time.Second))

	// The next command attaches as before; closing it before one ends
	// the agent cleanly.
	c, _ = accept()
	c.Close()
	if code, _ := p.wait(10 * time.Second); code != 0 {
		t.Errorf("closed before a second command: exit %d, want 0", code)
	}
}

// node attach --token-stdin, as the runner starts it over SSH for a
// pairwise sweep: the token is stdin's first line, node serve runs in the
// agent's own process too (--in-process read,serve), and the end of
// stdin, the runner's session, ends the agent while it waits for a
// command.
func TestAttachLoopTokenStdinServeInProcess(t *testing.T) {
	ln, accept := attachListener(t)
	t.Setenv(results.AttachTokenEnv, "")
	p := start(t, "t0ken\n", "attach", "--runner", ln.Addr().String(), "--loop", "--token-stdin", "--in-process", "read,serve")
	c, hello := accept()
	if hello.ID != results.AttachKey("t0ken").ID() || hello.Pid != p.cmd.Process.Pid {
		t.Errorf("hello %+v: want the ID of the token from stdin and pid %d", hello, p.cmd.Process.Pid)
	}
	secret := strings.Repeat("ef", 32)
	file := filepath.Join(t.TempDir(), "data")
	newRunnerKey("t0ken").command(t, c, hello, serveArgs(file, "--create", "--control-stdin"))
	sendLine(t, c, results.Control{Secret: secret})
	if st := mustType[*results.Started](t, p.next(10*time.Second)); st.Role != "serve" || st.PID != p.cmd.Process.Pid {
		t.Errorf("started %+v: want serve in node attach's own process (pid %d)", st, p.cmd.Process.Pid)
	}
	ready := mustType[*results.Ready](t, p.next(30*time.Second))

	// A client reads from the agent's server, verified.
	r := start(t, `{"secret":"`+secret+`"}`+"\n", readArgs(ready.Port, "--control-stdin", "--verify")...)
	mustType[*results.Started](t, r.next(10*time.Second))
	if res := mustType[*results.Result](t, r.next(30*time.Second)); res.Bytes != 8<<20 || !res.Verified {
		t.Errorf("read from the agent's serve: %+v, want 8MiB verified", res)
	}
	r.stdin.Close()
	if code, _ := r.wait(10 * time.Second); code != 0 {
		t.Fatalf("read: exit %d\n%s", code, r.stderr.String())
	}
	if d := mustType[*results.Done](t, p.next(10*time.Second)); d.BytesServed != 8<<20 {
		t.Errorf("serve done %+v: want 8MiB served", d)
	}
	b, _ := json.Marshal(results.AttachEnd{Status: 0})
	if err, ok := p.next(10 * time.Second).(error); !ok || !strings.Contains(err.Error(), strconv.Quote(results.AttachEndMarker + string(b))[1:]) {
		t.Errorf("after serve: %v, want its end line with status 0", err)
	}
	c.Close()

	// It has attached for the next command; the end of its stdin ends it.
	accept()
	p.stdin.Close()
	if code, _ := p.wait(10 * time.Second); code != 0 {
		t.Errorf("stdin closed while waiting for a command: exit %d, want 0\n%s", code, p.stderr.String())
	}
}

func TestAttachInProcessRefused(t *testing.T) {
	t.Setenv(results.AttachTokenEnv, "t0ken")
	p := start(t, "", "attach", "--runner", "127.0.0.1:1", "--loop", "--in-process", "read,check")
	code, last := p.wait(10 * time.Second)
	if e, ok := last.(*results.Error); code != 2 || !ok || !strings.Contains(e.Message, `--in-process "check"`) {
		t.Errorf("exit %d, last event %#v", code, last)
	}
}

// Whoever answers node attach's connection without the token (a host on
// the fabric that spoofs the runner's address) gets nothing run, with or
// without a MAC, and node says why on its stderr.
func TestAttachRefusesImpostor(t *testing.T) {
	for _, c := range []struct {
		name string
		loop bool
		mac  func(hello results.AttachHello, argv []string) string
	}{
		{"NoMAC", false, func(results.AttachHello, []string) string { return "" }},
		{"WrongKey", false, func(h results.AttachHello, argv []string) string {
			n, _ := h.HelloNonce()
			return results.AttachKey("guess").MAC(n, argv)
		}},
		{"WrongKeyLoop", true, func(h results.AttachHello, argv []string) string {
			n, _ := h.HelloNonce()
			return results.AttachKey("guess").MAC(n, argv)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ln, accept := attachListener(t)
			t.Setenv(results.AttachTokenEnv, "t0ken")
			args := []string{"attach", "--runner", ln.Addr().String()}
			if c.loop {
				args = append(args, "--loop", "--in-process", "read,serve")
			}
			p := start(t, "", args...)
			conn, hello := accept()
			file := filepath.Join(t.TempDir(), "key")
			argv := serveArgs(file, "--create")
			sendLine(t, conn, results.AttachCommand{Argv: argv, MAC: c.mac(hello, argv)})
			code, last := p.wait(10 * time.Second)
			want := "attach: the runner at " + ln.Addr().String() + " did not prove it holds the token; nothing was run"
			if e, ok := last.(*results.Error); code != 1 || !ok || e.Message != want {
				t.Errorf("exit %d, last event %#v; want 1 and %q", code, last, want)
			}
			if !strings.Contains(p.stderr.String(), want) {
				t.Errorf("stderr %q: want %q", p.stderr.String(), want)
			}
			if _, err := os.Stat(file); !os.IsNotExist(err) {
				t.Errorf("the impostor's serve ran: %s exists (%v)", file, err)
			}
		})
	}
}

// A token is good for one connection: after a command, both sides move to
// the next key, so the runner's answer replayed on the next connection
// (another nonce) is refused, and the next hello names another key, which
// an eavesdropper's copy of the first hello cannot.
func TestAttachReplayRefused(t *testing.T) {
	ln, accept := attachListener(t)
	t.Setenv(results.AttachTokenEnv, "t0ken")
	p := start(t, "", "attach", "--runner", ln.Addr().String(), "--loop")
	c, hello := accept()
	sent := newRunnerKey("t0ken").command(t, c, hello, []string{"read"}) // usage: ends at once, in process
	mustType[*results.Error](t, p.next(10*time.Second))
	p.next(10 * time.Second) // its end line
	c.Close()

	c, again := accept()
	if again.ID == hello.ID {
		t.Errorf("second hello %+v names the first connection's key", again)
	}
	sendLine(t, c, sent) // the first answer, replayed
	code, last := p.wait(10 * time.Second)
	if e, ok := last.(*results.Error); code != 1 || !ok || !strings.Contains(e.Message, "did not prove it holds the token; nothing was run") {
		t.Errorf("replayed answer: exit %d, last event %#v", code, last)
	}
}

// node serve under node attach refuses to run without a secret, whatever
// its command line says: the runner always gives one, and a command line
// without one would serve the region to anyone who reaches its port.
func TestAttachServeNeedsSecret(t *testing.T) {
	for _, c := range []struct {
		name    string
		extra   []string
		control string // the first control line, if any
	}{
		{"NoControlStdin", nil, ""},
		{"ControlWithoutSecret", []string{"--control-stdin"}, "{}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ln, accept := attachListener(t)
			t.Setenv(results.AttachTokenEnv, "t0ken")
			p := start(t, "", "attach", "--runner", ln.Addr().String())
			conn, hello := accept()
			newRunnerKey("t0ken").command(t, conn, hello, serveArgs(filepath.Join(t.TempDir(), "data"), append([]string{"--create"}, c.extra...)...))
			if c.control != "" {
				conn.Write([]byte(c.control + "\n"))
			}
			code, last := p.wait(10 * time.Second)
			if e, ok := last.(*results.Error); code != 1 || !ok || !strings.Contains(e.Message, `no secret: under node attach the first control line must carry the point's secret ("secret")`) {
				t.Errorf("exit %d, last event %#v", code, last)
			}
		})
	}
}
