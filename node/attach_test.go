package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/testbed/testenv"
)

// attachListener is the runner's side of node attach: a listener, and the
// next connection with its hello.
func attachListener(t *testing.T) (net.Listener, func() *runnerConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, func() *runnerConn {
		t.Helper()
		ln.(*net.TCPListener).SetDeadline(time.Now().Add(20 * time.Second))
		c, err := ln.Accept()
		if err != nil {
			t.Fatalf("node did not attach: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		br := bufio.NewReader(c)
		h, err := results.ReadHello(br)
		if err != nil {
			t.Fatalf("hello: %v", err)
		}
		if h.V != results.AttachVersion {
			t.Fatalf("hello %+v: want version %d", h, results.AttachVersion)
		}
		return &runnerConn{t: t, conn: c, br: br, hello: h}
	}
}

// runnerConn is one attached connection, on the runner's side.
type runnerConn struct {
	t     *testing.T
	conn  net.Conn
	br    *bufio.Reader
	hello results.AttachHello
}

func (c *runnerConn) nonce() []byte {
	n, err := c.hello.HelloNonce()
	if err != nil {
		c.t.Fatal(err)
	}
	return n
}

// runnerKey is the runner's side of the token: it seals a command on a
// connection, then moves to the next key as the runner does.
type runnerKey struct{ k results.AttachKey }

func newRunnerKey(token string) *runnerKey { return &runnerKey{results.AttachKey(token)} }

// command sends argv on c, and returns the command's side of the channel.
func (r *runnerKey) command(t *testing.T, c *runnerConn, argv []string) *attached {
	t.Helper()
	if c.hello.ID != r.k.ID() {
		t.Fatalf("hello %+v: want the ID of the runner's key %s", c.hello, r.k.ID())
	}
	ch := r.k.RunnerChannel(c.br, c.conn, c.nonce())
	r.k = r.k.Next(c.nonce())
	if err := ch.SendCommand(argv); err != nil {
		t.Fatal(err)
	}
	a := &attached{t: t, ch: ch, events: make(chan any, 100), ended: make(chan results.AttachEnd, 1)}
	go a.receive()
	return a
}

// attached is a command's stdout events, stderr and end, as the runner
// receives them.
type attached struct {
	t      *testing.T
	ch     *results.AttachChannel
	events chan any
	ended  chan results.AttachEnd

	mu     sync.Mutex
	stderr bytes.Buffer
}

func (a *attached) receive() {
	var out bytes.Buffer
	defer close(a.events)
	for {
		kind, b, err := a.ch.Recv()
		if err != nil {
			return
		}
		switch kind {
		case results.FrameStdout:
			out.Write(b)
			for {
				line, err := out.ReadBytes('\n')
				if err != nil {
					out.Write(line) // not whole yet
					break
				}
				ev, err := results.Decode(bytes.TrimSuffix(line, []byte("\n")))
				if err != nil {
					ev = fmt.Errorf("stdout line %q: %w", line, err)
				}
				a.events <- ev
			}
		case results.FrameStderr:
			a.mu.Lock()
			a.stderr.Write(b)
			a.mu.Unlock()
		case results.FrameEnd:
			var end results.AttachEnd
			json.Unmarshal(b, &end)
			a.ended <- end
			return
		}
	}
}

func (a *attached) send(v any) {
	a.t.Helper()
	b, _ := json.Marshal(v)
	if err := a.ch.Send(results.FrameStdin, append(b, '\n')); err != nil {
		a.t.Fatal(err)
	}
}

func (a *attached) closeStdin() { a.ch.Send(results.FrameStdinEnd, nil) }

func (a *attached) stderrText() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stderr.String()
}

// next is the command's next event that is not a warning.
func (a *attached) next(d time.Duration) any {
	a.t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev, ok := <-a.events:
			if !ok {
				a.t.Fatalf("the command's output ended early; its stderr:\n%s", a.stderrText())
			}
			if _, w := ev.(*results.Warning); w {
				continue
			}
			return ev
		case <-timeout:
			a.t.Fatalf("no event within %s; the command's stderr:\n%s", d, a.stderrText())
		}
	}
}

// end is how the command ended, from its end frame.
func (a *attached) end(d time.Duration) results.AttachEnd {
	a.t.Helper()
	select {
	case e := <-a.ended:
		return e
	case <-time.After(d):
		a.t.Fatalf("no end within %s; the command's stderr:\n%s", d, a.stderrText())
	}
	return results.AttachEnd{}
}

// node attach takes its command line, and then its control lines, from its
// own connection to the runner, sends its events back there, and stops
// when the runner ends its stdin, as node under --control-stdin stops on
// stdin's end. Its own stdout carries nothing of the command's, and its
// own stdin is not its control channel: here it stays open throughout.
func TestAttach(t *testing.T) {
	ln, accept := attachListener(t)
	t.Setenv(results.AttachTokenEnv, "t0ken")
	p := start(t, "", "attach", "--runner", ln.Addr().String())
	c := accept()
	if c.hello.Pid != p.cmd.Process.Pid || strings.Contains(c.hello.ID+c.hello.Nonce, "t0ken") {
		t.Fatalf("hello %+v: want pid %d, and the token's ID, not the token", c.hello, p.cmd.Process.Pid)
	}
	file := filepath.Join(t.TempDir(), "data")
	a := newRunnerKey("t0ken").command(t, c, serveArgs(file, "--create", "--control-stdin"))
	a.send(results.Control{Secret: strings.Repeat("ab", 32)})
	if st := mustType[*results.Started](t, a.next(10*time.Second)); st.Role != "serve" || st.PID != p.cmd.Process.Pid {
		t.Errorf("started %+v: want serve in the attached process", st)
	}
	if rd := mustType[*results.Ready](t, a.next(30*time.Second)); rd.Port <= 0 {
		t.Errorf("ready %+v: want a port", rd)
	}
	a.closeStdin()
	if e := mustType[*results.Error](t, a.next(10*time.Second)); !strings.Contains(e.Message, "stdin closed") {
		t.Errorf("after the runner ended stdin: %#v", e)
	}
	if end := a.end(10 * time.Second); end.Status != 1 {
		t.Errorf("end %+v, want status 1", end)
	}
	if code, _ := p.wait(10 * time.Second); code != 1 || len(p.lines) != 0 {
		t.Errorf("node attach: exit %d, its own stdout %q: want 1 and nothing", code, p.lines)
	}
}

// node attach --loop runs one command after another, each a child with
// its own connection as stdin, stdout and stderr, ends each with its
// status, and attaches again with the next key; a connection closed
// before a command ends it cleanly. Nothing of the commands' reaches its
// own stdout or stderr.
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
	c := accept()
	rk := newRunnerKey("t0ken")
	file := filepath.Join(t.TempDir(), "data")
	a := rk.command(t, c, serveArgs(file, "--create", "--control-stdin"))
	a.send(results.Control{Secret: strings.Repeat("ab", 32)})
	if st := mustType[*results.Started](t, a.next(10*time.Second)); st.Role != "serve" || st.PID == p.cmd.Process.Pid {
		t.Errorf("started %+v: want serve in a child of node attach (pid %d)", st, p.cmd.Process.Pid)
	}
	mustType[*results.Ready](t, a.next(30*time.Second))
	a.closeStdin()
	if e := mustType[*results.Error](t, a.next(10*time.Second)); !strings.Contains(e.Message, "stdin closed") {
		t.Errorf("after its stdin ended: %#v", e)
	}
	if end := a.end(10 * time.Second); end.Status != 1 {
		t.Errorf("after serve: end %+v, want status 1", end)
	}

	again := accept()
	if again.hello.ID == c.hello.ID || again.hello.Nonce == c.hello.Nonce || again.hello.Pid != c.hello.Pid {
		t.Errorf("second hello %+v after %+v: want the next key's ID and a new nonce", again.hello, c.hello)
	}
	a = rk.command(t, again, []string{"read"}) // no --server: usage
	mustType[*results.Error](t, a.next(10*time.Second))
	if end := a.end(10 * time.Second); end.Status != 2 {
		t.Errorf("after a usage error: end %+v, want status 2", end)
	}

	c = accept()
	c.conn.Close()
	if code, _ := p.wait(10 * time.Second); code != 0 {
		t.Errorf("closed before a third command: exit %d, want 0", code)
	}
	if len(p.lines) != 0 || strings.Contains(p.stderr.String(), "stdin closed") {
		t.Errorf("node attach's own stdout %q, stderr %q: want nothing of its commands'", p.lines, p.stderr.String())
	}
}

func TestAttachRefusals(t *testing.T) {
	ln, accept := attachListener(t)
	t.Run("NoToken", func(t *testing.T) {
		t.Setenv(results.AttachTokenEnv, "")
		p := start(t, "", "attach", "--runner", ln.Addr().String())
		code, last := p.wait(10 * time.Second)
		if e, ok := last.(*results.Error); code != 2 || !ok || !strings.Contains(e.Message, results.AttachTokenEnv+" is set") {
			t.Errorf("exit %d, last event %#v", code, last)
		}
	})
	t.Run("ClosedBeforeCommand", func(t *testing.T) {
		t.Setenv(results.AttachTokenEnv, "t0ken")
		p := start(t, "", "attach", "--runner", ln.Addr().String())
		accept().conn.Close()
		code, last := p.wait(10 * time.Second)
		if e, ok := last.(*results.Error); code != 1 || !ok || !strings.Contains(e.Message, "closed the connection before sending a command") {
			t.Errorf("exit %d, last event %#v", code, last)
		}
	})
	t.Run("AttachAgain", func(t *testing.T) {
		t.Setenv(results.AttachTokenEnv, "t0ken")
		p := start(t, "", "attach", "--runner", ln.Addr().String())
		a := newRunnerKey("t0ken").command(t, accept(), []string{"attach", "--runner", ln.Addr().String()})
		if end := a.end(10 * time.Second); end.Status != 2 {
			t.Errorf("attach as the command: end %+v, want status 2", end)
		}
		if code, _ := p.wait(10 * time.Second); code != 2 {
			t.Errorf("attach as the command: exit %d, want 2", code)
		}
	})
	t.Run("BadCredential", func(t *testing.T) {
		t.Setenv(results.AttachTokenEnv, "")
		t.Setenv(results.AttachCredEnv, "MUNGE:not-a-credential:")
		p := start(t, "", "attach", "--runner", ln.Addr().String())
		code, last := p.wait(10 * time.Second)
		if e, ok := last.(*results.Error); code != 1 || !ok || !strings.Contains(e.Message, "decode the token's MUNGE credential") {
			t.Errorf("exit %d, last event %#v", code, last)
		}
	})
}

// node attach --loop runs node read, a fan-in's many clients, in its own
// process: no exec per client. Its started event carries node attach's
// pid, its verified result and its end follow on its connection, and the
// agent attaches again for the next command. This needs no exec, so it
// runs under the emulator too.
func TestAttachLoopReadInProcess(t *testing.T) {
	secret := strings.Repeat("cd", 32)
	file := filepath.Join(t.TempDir(), "data")
	s, ready := serveReady(t, `{"secret":"`+secret+`"}`+"\n", serveArgs(file, "--create", "--control-stdin")...)
	ln, accept := attachListener(t)
	t.Setenv(results.AttachTokenEnv, "t0ken")
	p := start(t, "", "attach", "--runner", ln.Addr().String(), "--loop")
	a := newRunnerKey("t0ken").command(t, accept(), readArgs(ready.Port, "--control-stdin", "--verify"))
	a.send(results.Control{Secret: secret})
	if st := mustType[*results.Started](t, a.next(10*time.Second)); st.Role != "read" || st.PID != p.cmd.Process.Pid {
		t.Errorf("started %+v: want read in node attach's own process (pid %d)", st, p.cmd.Process.Pid)
	}
	if res := mustType[*results.Result](t, a.next(30*time.Second)); res.Bytes != 8<<20 || !res.Verified {
		t.Errorf("result %+v: want 8MiB verified", res)
	}
	if end := a.end(10 * time.Second); end.Status != 0 {
		t.Errorf("after read: end %+v, want status 0", end)
	}
	mustType[*results.Done](t, s.next(10*time.Second))

	// The next command attaches as before; closing it before one ends
	// the agent cleanly.
	accept().conn.Close()
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
	c := accept()
	if c.hello.ID != results.AttachKey("t0ken").ID() || c.hello.Pid != p.cmd.Process.Pid {
		t.Errorf("hello %+v: want the ID of the token from stdin and pid %d", c.hello, p.cmd.Process.Pid)
	}
	secret := strings.Repeat("ef", 32)
	file := filepath.Join(t.TempDir(), "data")
	a := newRunnerKey("t0ken").command(t, c, serveArgs(file, "--create", "--control-stdin"))
	a.send(results.Control{Secret: secret})
	if st := mustType[*results.Started](t, a.next(10*time.Second)); st.Role != "serve" || st.PID != p.cmd.Process.Pid {
		t.Errorf("started %+v: want serve in node attach's own process (pid %d)", st, p.cmd.Process.Pid)
	}
	ready := mustType[*results.Ready](t, a.next(30*time.Second))

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
	if d := mustType[*results.Done](t, a.next(10*time.Second)); d.BytesServed != 8<<20 {
		t.Errorf("serve done %+v: want 8MiB served", d)
	}
	if end := a.end(10 * time.Second); end.Status != 0 {
		t.Errorf("after serve: end %+v, want status 0", end)
	}

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
// the fabric that spoofs the runner's address) gets nothing run: not
// with version 1's command line and MAC, not with frames sealed under
// another key, and node says why on its stderr.
func TestAttachRefusesImpostor(t *testing.T) {
	for _, c := range []struct {
		name string
		loop bool
		send func(c *runnerConn, argv []string)
	}{
		{"Version1Line", false, func(c *runnerConn, argv []string) {
			b, _ := json.Marshal(map[string]any{"argv": argv, "mac": hex.EncodeToString(results.Answer([]byte("t0ken"), c.nonce(), []byte("attach-command")))})
			c.conn.Write(append(b, '\n'))
		}},
		{"WrongKey", false, func(c *runnerConn, argv []string) {
			results.AttachKey("guess").RunnerChannel(c.br, c.conn, c.nonce()).SendCommand(argv)
		}},
		{"WrongKeyLoop", true, func(c *runnerConn, argv []string) {
			results.AttachKey("guess").RunnerChannel(c.br, c.conn, c.nonce()).SendCommand(argv)
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
			file := filepath.Join(t.TempDir(), "key")
			c.send(accept(), serveArgs(file, "--create"))
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

// recorder is a TCP proxy between node attach and the runner that keeps
// every byte either way, as an eavesdropper on the path would, and hands
// the attacker the connection to node for its next command.
type recorder struct {
	ln      net.Listener
	mu      sync.Mutex
	wire    bytes.Buffer
	toNode  chan net.Conn // node's connections, for the attacker when not proxied
	proxied int           // connections proxied to the runner before the attacker takes over
}

func newRecorder(t *testing.T, runner string, proxied int) *recorder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	r := &recorder{ln: ln, toNode: make(chan net.Conn, 4), proxied: proxied}
	go func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if n >= r.proxied {
				r.toNode <- c
				continue
			}
			up, err := net.Dial("tcp", runner)
			if err != nil {
				c.Close()
				continue
			}
			go r.copy(up, c)
			go r.copy(c, up)
		}
	}()
	return r
}

func (r *recorder) copy(dst, src net.Conn) {
	buf := make([]byte, 4096)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			r.mu.Lock()
			r.wire.Write(buf[:n])
			r.mu.Unlock()
			dst.Write(buf[:n])
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

func (r *recorder) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.wire.Bytes())
}

// An eavesdropper who saw a whole command on the wire (its hello, its
// command line, its secret control line, its events) learns neither the
// token, the secret, the command nor the events, and what it sends on the
// agent's next connection, built from those bytes, runs nothing: a
// version-1 line whose MAC is keyed with every string it saw, frames
// sealed under keys drawn from the hellos it saw, and the runner's own
// frames replayed.
func TestAttachRefusesSniffedInjection(t *testing.T) {
	secret := strings.Repeat("5e", 32)
	for _, c := range []struct {
		name   string
		inject func(t *testing.T, wire []byte, hellos []results.AttachHello, conn net.Conn, br *bufio.Reader, argv []string)
	}{
		{"MACFromSniffedBytes", func(t *testing.T, wire []byte, hellos []results.AttachHello, conn net.Conn, br *bufio.Reader, argv []string) {
			// Version 1's attack: the token read off the wire keys the MAC.
			// Every hello field and hex run seen is tried as that key.
			nonce, _ := hellos[len(hellos)-1].HelloNonce()
			var lines []byte
			for _, k := range sniffedKeys(wire, hellos) {
				mac := hex.EncodeToString(results.Answer(k, nonce, append([]byte("attach-command"), mustJSON(argv)...)))
				b, _ := json.Marshal(map[string]any{"argv": argv, "mac": mac})
				lines = append(append(lines, b...), '\n')
			}
			conn.Write(lines)
		}},
		{"FramesUnderSniffedKeys", func(t *testing.T, wire []byte, hellos []results.AttachHello, conn net.Conn, br *bufio.Reader, argv []string) {
			nonce, _ := hellos[len(hellos)-1].HelloNonce()
			k := sniffedKeys(wire, hellos)[0]
			results.AttachKey(k).RunnerChannel(br, conn, nonce).SendCommand(argv)
		}},
		{"ReplayedFrames", func(t *testing.T, wire []byte, hellos []results.AttachHello, conn net.Conn, br *bufio.Reader, argv []string) {
			// Everything the runner sent on the first connection, after
			// node's hello, again on the second.
			_, after, _ := bytes.Cut(wire, []byte("\n"))
			conn.Write(after)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ln, accept := attachListener(t)
			rec := newRecorder(t, ln.Addr().String(), 1)
			t.Setenv(results.AttachTokenEnv, "t0ken-"+secret[:8])
			p := start(t, "", "attach", "--runner", rec.ln.Addr().String(), "--loop")
			rk := newRunnerKey("t0ken-" + secret[:8])
			// read without --server: a usage error, in node attach's own
			// process (the emulator of make test-arm64 runs no child).
			a := rk.command(t, accept(), []string{"read", "--block-size", "4KiB"})
			a.send(results.Control{Secret: secret})
			a.end(10 * time.Second)

			// The agent's next connection comes to the attacker.
			var conn net.Conn
			select {
			case conn = <-rec.toNode:
			case <-time.After(20 * time.Second):
				t.Fatal("node attach did not attach again")
			}
			defer conn.Close()
			br := bufio.NewReader(conn)
			hello, err := results.ReadHello(br)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // the recorder has the first connection's last bytes
			wire := rec.bytes()
			for what, s := range map[string]string{"token": "t0ken", "secret": secret, "command": "block-size", "events": `"type"`} {
				if bytes.Contains(wire, []byte(s)) || bytes.Contains(wire, []byte(hex.EncodeToString([]byte(s)))) {
					t.Errorf("the wire holds the %s (%q)", what, s)
				}
			}
			first, err := results.ReadHello(bufio.NewReader(bytes.NewReader(wire)))
			if err != nil {
				t.Fatal(err)
			}
			planted := filepath.Join(t.TempDir(), "planted")
			c.inject(t, wire, []results.AttachHello{first, hello}, conn, br, serveArgs(planted, "--create"))
			code, _ := p.wait(10 * time.Second)
			if want := "did not prove it holds the token; nothing was run"; code != 1 || !strings.Contains(p.stderr.String(), want) {
				t.Errorf("after the injection: exit %d, stderr %q; want 1 and %q", code, p.stderr.String(), want)
			}
			if _, err := os.Stat(planted); !os.IsNotExist(err) {
				t.Errorf("the injected serve ran: %s exists (%v)", planted, err)
			}
		})
	}
}

// sniffedKeys is every key an eavesdropper can try from what it saw: each
// hello's ID and nonce, as text and as bytes, and every hex run on the
// wire.
func sniffedKeys(wire []byte, hellos []results.AttachHello) [][]byte {
	var keys [][]byte
	for _, h := range hellos {
		n, _ := h.HelloNonce()
		id, _ := hex.DecodeString(h.ID)
		keys = append(keys, []byte(h.ID), id, []byte(h.Nonce), n)
	}
	for _, f := range bytes.FieldsFunc(wire, func(r rune) bool { return !strings.ContainsRune("0123456789abcdef", r) }) {
		if len(f) >= 16 {
			keys = append(keys, f)
		}
	}
	return keys
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// A token is good for one connection: after a command, both sides move to
// the next key, and the next connection's frames are sealed under keys
// drawn from it and the new nonce, so the runner's first frame replayed
// on it does not open, and the next hello names another key.
func TestAttachReplayRefused(t *testing.T) {
	ln, accept := attachListener(t)
	t.Setenv(results.AttachTokenEnv, "t0ken")
	p := start(t, "", "attach", "--runner", ln.Addr().String(), "--loop")
	c := accept()
	var sent bytes.Buffer
	ch := results.AttachKey("t0ken").RunnerChannel(c.br, io.MultiWriter(c.conn, &sent), c.nonce())
	ch.SendCommand([]string{"read"}) // usage: ends at once, in process
	a := &attached{t: t, ch: ch, events: make(chan any, 100), ended: make(chan results.AttachEnd, 1)}
	go a.receive()
	a.end(10 * time.Second)

	again := accept()
	if again.hello.ID == c.hello.ID {
		t.Errorf("second hello %+v names the first connection's key", again.hello)
	}
	again.conn.Write(sent.Bytes()) // the first command, replayed
	code, last := p.wait(10 * time.Second)
	if e, ok := last.(*results.Error); code != 1 || !ok || !strings.Contains(e.Message, "did not prove it holds the token; nothing was run") {
		t.Errorf("replayed command: exit %d, last event %#v", code, last)
	}
}

// A frame altered, dropped or replayed within a connection fails to open:
// the command's stdin ends there, so it stops, and nothing after the
// tampering reaches it.
func TestAttachTamperedStdinStops(t *testing.T) {
	ln, accept := attachListener(t)
	t.Setenv(results.AttachTokenEnv, "t0ken")
	start(t, "", "attach", "--runner", ln.Addr().String())
	c := accept()
	file := filepath.Join(t.TempDir(), "data")
	var sent bytes.Buffer
	ch := results.AttachKey("t0ken").RunnerChannel(c.br, io.MultiWriter(c.conn, &sent), c.nonce())
	ch.SendCommand(serveArgs(file, "--create", "--control-stdin"))
	a := &attached{t: t, ch: ch, events: make(chan any, 100), ended: make(chan results.AttachEnd, 1)}
	go a.receive()
	sent.Reset()
	a.send(results.Control{Secret: strings.Repeat("ab", 32)})
	frame := bytes.Clone(sent.Bytes())
	mustType[*results.Started](t, a.next(10*time.Second))
	mustType[*results.Ready](t, a.next(30*time.Second))
	c.conn.Write(frame) // the control line's frame again: replayed
	if e := mustType[*results.Error](t, a.next(10*time.Second)); !strings.Contains(e.Message, "stdin closed") {
		t.Errorf("after a replayed frame: %#v, want serve stopped by its stdin's end", e)
	}
	if end := a.end(10 * time.Second); end.Status != 1 {
		t.Errorf("end %+v, want status 1", end)
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
			start(t, "", "attach", "--runner", ln.Addr().String())
			a := newRunnerKey("t0ken").command(t, accept(), serveArgs(filepath.Join(t.TempDir(), "data"), append([]string{"--create"}, c.extra...)...))
			if c.control != "" {
				a.ch.Send(results.FrameStdin, []byte(c.control+"\n"))
			}
			ev := a.next(10 * time.Second)
			for _, ok := ev.(*results.Started); ok; _, ok = ev.(*results.Started) {
				ev = a.next(10 * time.Second)
			}
			if e, ok := ev.(*results.Error); !ok || !strings.Contains(e.Message, `no secret: under node attach the first control line must carry the point's secret ("secret")`) {
				t.Errorf("event %#v", ev)
			}
			if end := a.end(10 * time.Second); end.Status != 1 {
				t.Errorf("end %+v, want status 1", end)
			}
		})
	}
}

// An attached node runs node's own subcommands and, under node run, only
// the peers' programs and node itself: a command line that asks for any
// other program, even through node run of node, is not the runner's, and
// nothing runs.
func TestAttachedRunRefusesOtherPrograms(t *testing.T) {
	planted := filepath.Join(t.TempDir(), "planted")
	self, _ := filepath.Abs(nodeBin)
	for _, c := range []struct {
		name string
		argv []string
		ok   bool
	}{
		{"Shell", []string{"run", "--", "/bin/sh", "-c", "touch " + planted}, false},
		{"ShellByName", []string{"run", "--deadline", "5s", "--", "sh", "-c", "touch " + planted}, false},
		{"PeerByPath", []string{"run", "--", "/usr/bin/fio", "--version"}, false},
		{"PeerRunsAProgram", []string{"run", "--", "fio", "--name=x", "--readonly", "--filename=" + planted + ".dat", "--size=4096", "--exec_prerun=touch " + planted}, false},
		{"NodeRunsRun", []string{"run", "--", self, "run", "--", "/bin/sh", "-c", "touch " + planted}, false},
		{"NodeAttaches", []string{"run", "--", self, "attach", "--runner", "127.0.0.1:1"}, false},
		{"Peer", []string{"run", "--deadline", "10s", "--stop-on-eof", "--", "iperf3", "--version"}, true},
		// Under make test-arm64's emulator nodeBin is a script that runs
		// the emulator, not node's own file: there it is another program.
		{"Node", []string{"run", "--deadline", "10s", "--stop-on-eof", "--", self, "version"}, os.Getenv("RDMASWEEP_NODE_EXEC") == ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "Peer" {
				testenv.NeedTool(t, "iperf3", "iperf3")
			}
			ln, accept := attachListener(t)
			t.Setenv(results.AttachTokenEnv, "t0ken")
			start(t, "", "attach", "--runner", ln.Addr().String())
			a := newRunnerKey("t0ken").command(t, accept(), c.argv)
			end := a.end(10 * time.Second)
			refused := strings.Contains(a.stderrText(), "an attached node runs only the peers' programs and node itself")
			if c.ok && (end.Status != 0 || refused) {
				t.Errorf("%q: end %+v, stderr %q; want it run", c.argv, end, a.stderrText())
			}
			if !c.ok && (end.Status == 0 || !refused) {
				t.Errorf("%q: end %+v, stderr %q; want it refused", c.argv, end, a.stderrText())
			}
			if _, err := os.Stat(planted); !os.IsNotExist(err) {
				t.Errorf("%q ran: %s exists (%v)", c.argv, planted, err)
			}
		})
	}
}

// startMunged runs a private munged (its own key and socket) for the
// test, as a Slurm cluster's is, and returns its socket.
func startMunged(t *testing.T) string {
	t.Helper()
	testenv.NeedRoot(t)
	munged := "/usr/sbin/munged"
	if _, err := os.Stat(munged); err != nil {
		testenv.Skip(t, munged+" not found (apt-get install munge)")
	}
	testenv.NeedTool(t, "munge", "munge")
	testenv.NeedTool(t, "unmunge", "munge")
	// munged wants every directory above its socket searchable by all,
	// and a key only root owns and reads.
	dir, err := os.MkdirTemp("", "node-munge-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	key := make([]byte, 1024)
	rand.Read(key)
	if err := os.WriteFile(filepath.Join(dir, "key"), key, 0o400); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "socket")
	cmd := exec.Command(munged, "--foreground", "--socket="+socket, "--key-file="+filepath.Join(dir, "key"),
		"--pid-file="+filepath.Join(dir, "pid"), "--log-file="+filepath.Join(dir, "log"), "--seed-file="+filepath.Join(dir, "seed"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(socket); err == nil {
			return socket
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			t.Fatalf("munged did not start: %s", log)
		}
	}
}

// credential is token as munge makes it with args.
func credential(t *testing.T, socket, token string, args ...string) string {
	t.Helper()
	cmd := exec.Command("munge", append([]string{"--socket=" + socket}, args...)...)
	cmd.Stdin = strings.NewReader(token)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("munge %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Under Slurm node attach's token is a MUNGE credential in its
// environment. node decodes it with unmunge and attaches with the token
// inside; it refuses the same credential a second time (a replay), one
// not encrypted, one another UID made, and one restricted to another UID,
// and says why before it dials.
func TestAttachMungeCredential(t *testing.T) {
	socket := startMunged(t)
	ln, accept := attachListener(t)
	uid := strconv.Itoa(os.Getuid())
	good := credential(t, socket, "t0ken-munged", "--restrict-uid="+uid, "--cipher=aes128")
	t.Setenv(results.AttachTokenEnv, "")
	t.Run("Decoded", func(t *testing.T) {
		t.Setenv(results.AttachCredEnv, good)
		p := start(t, "", "attach", "--runner", ln.Addr().String(), "--munge-socket", socket)
		c := accept()
		if c.hello.ID != results.AttachKey("t0ken-munged").ID() {
			t.Errorf("hello %+v: want the ID of the token in the credential", c.hello)
		}
		c.conn.Close()
		p.wait(10 * time.Second)
	})
	for _, c := range []struct{ name, cred, want string }{
		{"Replayed", good, "decode the token's MUNGE credential"},
		{"NotEncrypted", credential(t, socket, "t0ken", "--restrict-uid="+uid, "--cipher=none"), "not encrypted"},
		{"AnotherUIDs", credential(t, socket, "t0ken", "--restrict-uid="+uid, "--uid=65534"), "made by UID 65534"},
		{"ForAnotherUID", credential(t, socket, "t0ken", "--restrict-uid=65534"), "decode the token's MUNGE credential"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(results.AttachCredEnv, c.cred)
			p := start(t, "", "attach", "--runner", ln.Addr().String(), "--munge-socket", socket)
			code, last := p.wait(10 * time.Second)
			if e, ok := last.(*results.Error); code != 1 || !ok || !strings.Contains(e.Message, c.want) {
				t.Errorf("exit %d, last event %#v; want 1 and %q", code, last, c.want)
			}
		})
	}
}
