package agent

import (
	"bufio"
	"bytes"
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

// nodeSide is the fake agent's side of one connection.
type nodeSide struct {
	c  net.Conn
	ch *results.AttachChannel
}

// readCommand opens the runner's command on c under key and nonce, or
// fails if c closes first or nothing comes within d.
func readCommand(c net.Conn, key results.AttachKey, nonce []byte, d time.Duration) (*nodeSide, []string, error) {
	c.SetReadDeadline(time.Now().Add(d))
	ch := key.NodeChannel(bufio.NewReader(c), c, nonce)
	argv, err := ch.RecvCommand()
	c.SetReadDeadline(time.Time{})
	return &nodeSide{c, ch}, argv, err
}

// end sends the command's end, status 0.
func (n *nodeSide) end() {
	b, _ := json.Marshal(results.AttachEnd{})
	n.ch.Send(results.FrameEnd, b)
}

// An agent's key is good for one connection. After its first command, a
// copy of its first hello (an eavesdropper's replay) is refused: the
// runner's next command goes only to a connection under the next key,
// sealed under it and the new nonce.
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
	n1, argv, err := readCommand(c1, key, nonce1, 5*time.Second)
	if err != nil || argv[0] != "version" {
		t.Fatalf("first command %q (%v): want version, sealed under the token", argv, err)
	}
	n1.end()
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
	if _, argv, err := readCommand(replay, key, nonce1, 2*time.Second); err == nil {
		t.Fatalf("the first hello, replayed, got a command: %q", argv)
	} else if !errors.Is(err, io.EOF) {
		t.Errorf("the first hello, replayed: %v, want the runner to close it at once", err)
	}
	next := key.Next(nonce1)
	c2, _, nonce2 := hello(t, addr, next)
	raw := bufio.NewReader(c2)
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := raw.Peek(5); err != nil {
		t.Fatal(err)
	}
	c2.SetReadDeadline(time.Time{})
	sealed, _ := raw.Peek(raw.Buffered())
	if _, err := key.NodeChannel(bytes.NewReader(sealed), io.Discard, nonce2).RecvCommand(); err == nil {
		t.Errorf("the second command opens under the first key too")
	}
	if argv, err := next.NodeChannel(raw, c2, nonce2).RecvCommand(); err != nil || argv[0] != "read" {
		t.Fatalf("second command %q (%v): want read, sealed under the next key", argv, err)
	}
	if err := <-started; err != nil {
		t.Errorf("second Start: %v", err)
	}
}

// What the runner takes from an agent is sealed too: a frame on the
// agent's connection that does not open (someone on the path writing
// rows of their own) fails the command, whose output so far is all it
// gets, and the agent is not used again.
func TestForgedOutputRefused(t *testing.T) {
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
	c, _, nonce := hello(t, addr, key)
	proc, err := pd.Start(ctx, []string{"node", "read"})
	if err != nil {
		t.Fatal(err)
	}
	n, _, err := readCommand(c, key, nonce, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	n.ch.Send(results.FrameStdout, []byte(`{"type":"started","role":"read"}`+"\n"))
	// A row of an on-path host's own, sealed under a key it guessed.
	forged := results.AttachKey("guess").NodeChannel(nil, c, nonce)
	forged.Send(results.FrameStdout, []byte(`{"type":"result","bytes":1}`+"\n"))
	forged.Send(results.FrameEnd, []byte(`{"status":0}`))
	go io.Copy(io.Discard, proc.Stderr())
	read := make(chan []byte, 1)
	go func() { out, _ := io.ReadAll(proc.Stdout()); read <- out }()
	var out []byte
	select {
	case out = <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("the command's output did not end within 10 s of a forged frame")
	}
	err = proc.Wait()
	if !errors.Is(err, results.ErrAttachFrame) || strings.Contains(string(out), "result") {
		t.Errorf("after a forged frame: stdout %q, %v; want only the started line and %v", out, err, results.ErrAttachFrame)
	}
}

// A node of another build, whose hello names another protocol version,
// fails its command with a message that says so.
func TestOtherVersionRefused(t *testing.T) {
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
	h, _, _ := results.NewAttachHello(key, 1)
	h.V = 0 // version 1 sent none
	line, _ := json.Marshal(h)
	sendHello(t, addr, line)
	_, err := pd.Start(ctx, []string{"node", "version"})
	if err == nil || !strings.Contains(err.Error(), "attach protocol version 1, this runner 2") {
		t.Errorf("Start with a version-1 node: %v", err)
	}
}

// A command's stdout and stderr share one connection, yet a caller that
// reads stdout to its end before it reads stderr gets both: what the
// agent wrote on stderr meanwhile waits for its reader without holding
// stdout.
func TestStdoutNotHeldByStderr(t *testing.T) {
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
	c, _, nonce := hello(t, addr, key)
	proc, err := pd.Start(ctx, []string{"node", "version"})
	if err != nil {
		t.Fatal(err)
	}
	n, _, err := readCommand(c, key, nonce, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	n.ch.Send(results.FrameStderr, bytes.Repeat([]byte("e"), 256<<10))
	n.ch.Send(results.FrameStdout, []byte("node v\n"))
	n.end()
	out, _ := io.ReadAll(proc.Stdout())
	errOut, _ := io.ReadAll(proc.Stderr())
	if string(out) != "node v\n" || len(errOut) != 256<<10 || proc.Wait() != nil {
		t.Errorf("stdout %q, %d bytes of stderr, %v", out, len(errOut), proc.Wait())
	}
}
