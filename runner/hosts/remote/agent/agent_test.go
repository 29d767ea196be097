package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/hosts/remote"
)

// nodeBin builds node once for the tests that run a real agent.
var nodeBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "agent-test-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "node")
	if out, err := exec.Command("go", "build", "-o", bin, "rdmasweep/node").CombinedOutput(); err != nil {
		return "", errors.New(string(out))
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := nodeBin(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

// localLauncher starts real agents on this machine, as SSH's do on a host:
// the token on stdin.
type localLauncher struct{ addr string }

func (l localLauncher) Name() string                            { return "local" }
func (l localLauncher) Address(context.Context) (string, error) { return l.addr, nil }
func (l localLauncher) Start(ctx context.Context, argv []string) (remote.Process, error) {
	return remote.Local{}.Start(ctx, argv)
}

func (l localLauncher) Launch(ctx context.Context, path, addr, token string) (remote.Process, error) {
	p, err := remote.Local{}.Start(ctx, []string{path, "attach", "--runner", addr, "--loop", "--token-stdin", "--in-process", InProcessTCP})
	if err != nil {
		return nil, err
	}
	p.Stdin().Write([]byte(token + "\n"))
	return p, nil
}

func listen(t *testing.T, tokens *Tokens) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go tokens.Serve(ln)
	return ln
}

// version runs node version through the pool, as a sweep's point runs its
// roles.
func version(t *testing.T, ctx context.Context, p *Pool, node string) {
	t.Helper()
	proc, err := p.Prestart(ctx, node).Start(ctx, []string{node, "version"})
	if err != nil {
		t.Fatalf("start node version: %v", err)
	}
	go io.Copy(io.Discard, proc.Stderr())
	out, _ := io.ReadAll(proc.Stdout())
	if err := proc.Wait(); err != nil || !strings.HasPrefix(string(out), "node ") {
		t.Fatalf("node version through an agent: %q, %v", out, err)
	}
}

// Connections that never say hello are bounded: past MaxPendingHellos the
// one silent the longest is closed at once, not after helloTimeout, and the
// agents' own connections, which say hello at once, still get through.
func TestIdleConnectionsCapped(t *testing.T) {
	node, err := nodeBin()
	if err != nil {
		t.Fatalf("build node: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var tokens Tokens
	ln := listen(t, &tokens)

	const extra = 16
	closed := make(chan time.Duration, MaxPendingHellos+extra)
	start := time.Now()
	for range MaxPendingHellos + extra {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		go func() {
			io.Copy(io.Discard, c)
			closed <- time.Since(start)
		}()
	}
	p := NewPool(localLauncher{ln.Addr().String()}, &tokens)
	defer p.Close(2*time.Second, func(p remote.Process) { p.Signal(os.Kill) })
	for range 3 { // a sweep's points, one agent
		version(t, ctx, p, node)
	}
	deadline := time.After(2 * time.Second)
	n := 0
	for n < extra {
		select {
		case <-closed:
			n++
		case <-deadline:
			t.Fatalf("%d of %d idle connections closed within 2 s; want at least the %d past the bound of %d",
				n, MaxPendingHellos+extra, extra, MaxPendingHellos)
		}
	}
	t.Logf("%d idle connections closed past the bound, 3 commands run meanwhile, in %v", n, time.Since(start).Round(time.Millisecond))
}

// fakeAgent is a Launcher whose agent is the test itself: it learns the
// token as the real one would, and speaks the handshake by hand.
type fakeAgent struct {
	addr   string
	tokens chan string
	proc   *fakeProc
}

func (f *fakeAgent) Name() string                            { return "fake" }
func (f *fakeAgent) Address(context.Context) (string, error) { return f.addr, nil }
func (f *fakeAgent) Start(context.Context, []string) (remote.Process, error) {
	return nil, errors.New("not node")
}

func (f *fakeAgent) Launch(_ context.Context, _, _, token string) (remote.Process, error) {
	f.tokens <- token
	return f.proc, nil
}

// fakeProc is the fake agent's process: its output is what the test writes.
type fakeProc struct {
	outR, errR *io.PipeReader
	outW, errW *io.PipeWriter
	done       chan struct{}
	once       sync.Once
}

func newFakeProc() *fakeProc {
	p := &fakeProc{done: make(chan struct{})}
	p.outR, p.outW = io.Pipe()
	p.errR, p.errW = io.Pipe()
	return p
}

func (p *fakeProc) end() {
	p.once.Do(func() { p.outW.Close(); p.errW.Close(); close(p.done) })
}

func (p *fakeProc) Stdin() io.WriteCloser       { return p }
func (p *fakeProc) Write(b []byte) (int, error) { return len(b), nil }
func (p *fakeProc) Close() error                { p.end(); return nil }
func (p *fakeProc) Stdout() io.Reader           { return p.outR }
func (p *fakeProc) Stderr() io.Reader           { return p.errR }
func (p *fakeProc) Signal(os.Signal) error      { p.end(); return nil }
func (p *fakeProc) Wait() error                 { <-p.done; return nil }

// commandEnded writes the end line of a command on both of its streams.
func (p *fakeProc) commandEnded() {
	b, _ := json.Marshal(results.AttachEnd{})
	line := results.AttachEndMarker + string(b) + "\n"
	io.WriteString(p.outW, line)
	io.WriteString(p.errW, line)
}

// hello dials addr and says hello under key; it returns the connection,
// the line sent and its nonce.
func hello(t *testing.T, addr string, key results.AttachKey) (net.Conn, []byte, []byte) {
	t.Helper()
	h, nonce, err := results.NewAttachHello(key, 1)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := json.Marshal(h)
	return sendHello(t, addr, line), line, nonce
}

func sendHello(t *testing.T, addr string, line []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(append(line, '\n')); err != nil {
		t.Fatal(err)
	}
	return c
}

// readCommand reads the runner's command line on c, or fails if c closes
// first or nothing comes within d.
func readCommand(c net.Conn, d time.Duration) (results.AttachCommand, error) {
	c.SetReadDeadline(time.Now().Add(d))
	line, err := bufio.NewReader(c).ReadBytes('\n')
	var cmd results.AttachCommand
	if err != nil {
		return cmd, err
	}
	return cmd, json.Unmarshal(line, &cmd)
}

// An agent's key is good for one connection. After its first command, a
// copy of its first hello (an eavesdropper's replay) is refused: the
// runner's next command goes only to a connection under the next key, and
// its answer proves that key for the new nonce.
func TestReplayedHelloRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var tokens Tokens
	ln := listen(t, &tokens)
	addr := ln.Addr().String()
	f := &fakeAgent{addr: addr, tokens: make(chan string, 1), proc: newFakeProc()}
	p := NewPool(f, &tokens)
	defer p.Close(time.Second, nil)

	pd := p.Prestart(ctx, "node")
	key := results.AttachKey(<-f.tokens)
	c1, hello1, nonce1 := hello(t, addr, key)
	proc, err := pd.Start(ctx, []string{"node", "version"})
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := readCommand(c1, 5*time.Second)
	if err != nil || !key.Admit(nonce1, cmd) {
		t.Fatalf("first command %+v (%v): want one whose MAC proves the token", cmd, err)
	}
	f.proc.commandEnded()
	go io.Copy(io.Discard, proc.Stdout())
	go io.Copy(io.Discard, proc.Stderr())
	if err := proc.Wait(); err != nil {
		t.Fatal(err)
	}

	// The runner waits for the agent's next connection; the replay
	// comes first.
	started := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err := p.Prestart(sctx, "node").Start(sctx, []string{"node", "read"})
		started <- err
	}()
	replay := sendHello(t, addr, hello1)
	if cmd, err := readCommand(replay, 2*time.Second); err == nil {
		t.Fatalf("the first hello, replayed, got a command: %+v", cmd)
	} else if !errors.Is(err, io.EOF) {
		t.Errorf("the first hello, replayed: %v, want the runner to close it at once", err)
	}
	next := key.Next(nonce1)
	c2, _, nonce2 := hello(t, addr, next)
	cmd, err = readCommand(c2, 5*time.Second)
	if err != nil || !next.Admit(nonce2, cmd) || cmd.Argv[0] != "read" {
		t.Fatalf("second command %+v (%v): want read, with a MAC that proves the next key", cmd, err)
	}
	if key.Admit(nonce2, cmd) {
		t.Errorf("the second command's MAC proves the first key too")
	}
	if err := <-started; err != nil {
		t.Errorf("second Start: %v", err)
	}
}
