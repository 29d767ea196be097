package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/remote"
)

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
