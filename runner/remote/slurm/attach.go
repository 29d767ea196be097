package slurm

// Prestart: node started as a step before its command line is known, which
// it then takes over a TCP connection of its own to the runner, with its
// control lines (results/attach.go has the handshake). A step takes tens
// to hundreds of milliseconds to start, and srun's stdin delivered lines up
// to 0.36 s late; a line on node's own connection arrives in well under a
// millisecond.
//
// The step is `node attach --loop`, an agent: it runs one command after
// another, each over a connection of its own, and marks each one's end on
// the step's stdout and stderr. When a command has ended its agent goes
// back to its Host, idle, and the next Prestart of the same binary there
// takes it: a run's points after the first start no step at all. On this
// 2-core machine a step costs about 70 ms when started alone and 0.58 s
// for nine started together (a fan-in of 8), more than a point's budget.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/remote"
)

var _ remote.Prestarter = (*Host)(nil)

// helloTimeout bounds how long an accepted connection may take to say
// which node it is.
const helloTimeout = 10 * time.Second

// attachAddr is the address node on the given node dials to attach: the
// runner's listener (started on first use, for the runner's life), at the
// runner's own address on the route to that node.
func (a *Allocation) attachAddr(ctx context.Context, node string) (string, error) {
	a.mu.Lock()
	if a.listener == nil {
		ln, err := net.Listen("tcp", ":0")
		if err != nil {
			a.mu.Unlock()
			return "", fmt.Errorf("listen for nodes to attach: %w", err)
		}
		a.listener, a.waiting, a.localAddr = ln, map[string]chan net.Conn{}, map[string]string{}
		go a.acceptAttach(ln)
	}
	addr, ok := a.localAddr[node]
	port := a.listener.Addr().(*net.TCPAddr).Port
	a.mu.Unlock()
	if ok {
		return addr, nil
	}
	// The address the kernel would send from to the node is one the node
	// reaches the runner at (routes are symmetric on a cluster's network).
	// A UDP "connection" sends nothing.
	c, err := net.Dial("udp", net.JoinHostPort(a.NodeAddr(ctx, node), "9"))
	if err != nil {
		return "", fmt.Errorf("find the runner's address on the route to %s: %w", node, err)
	}
	ip := c.LocalAddr().(*net.UDPAddr).IP
	c.Close()
	addr = net.JoinHostPort(ip.String(), fmt.Sprint(port))
	a.mu.Lock()
	a.localAddr[node] = addr
	a.mu.Unlock()
	return addr, nil
}

// acceptAttach hands each attaching node's connection to the agent that
// holds its token, and closes any other. A token is good for as long as
// its agent's step runs, for one waiting connection at a time.
func (a *Allocation) acceptAttach(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return // the listener lives as long as the runner
		}
		go func() {
			c.SetReadDeadline(time.Now().Add(helloTimeout))
			line, err := bufio.NewReader(io.LimitReader(c, results.MaxAttachLine)).ReadBytes('\n')
			var hello results.AttachHello
			if err != nil || json.Unmarshal(line, &hello) != nil {
				c.Close()
				return
			}
			c.SetReadDeadline(time.Time{})
			a.mu.Lock()
			ch, ok := a.waiting[hello.Token]
			if ok {
				select {
				case ch <- c: // buffered: one connection waits
				default:
					ok = false
				}
			}
			a.mu.Unlock()
			if !ok {
				c.Close()
			}
		}()
	}
}

// forget withdraws a token, and closes a connection that came for it.
func (a *Allocation) forget(token string, ch chan net.Conn) {
	a.mu.Lock()
	delete(a.waiting, token)
	a.mu.Unlock()
	select {
	case c := <-ch:
		c.Close()
	default:
	}
}

// agent is one `node attach --loop` step: handed out by Prestart, back in
// its Host's idle list once its command has ended, until its step ends
// or the Host closes.
type agent struct {
	h     *Host
	path  string
	token string
	conns chan net.Conn // its connection for the next command, once dialled

	launched chan struct{} // closed once the step runs, or failed: p, err
	p        *process
	err      error
	gone     chan struct{} // closed once the step has ended and its output is read

	mu    sync.Mutex
	cmds  []*command // given their command line, end not yet seen on both streams; oldest first
	ended bool       // the step has ended
	stray []byte     // the last of what it wrote with no command to take it
}

// maxStray bounds what is kept of an agent's output outside its commands:
// its own error, if it fails before attaching.
const maxStray = 4096

// launch starts the agent's step and, once it runs, reads its output.
func (ag *agent) launch(ctx context.Context) {
	defer close(ag.launched)
	h := ag.h
	addr, err := h.a.attachAddr(ctx, h.node)
	if err != nil {
		ag.err = fmt.Errorf("start node on %s: %w", h.node, err)
		return
	}
	h.a.mu.Lock()
	h.a.waiting[ag.token] = ag.conns
	h.a.mu.Unlock()
	ag.p, ag.err = h.launch(ctx, []string{ag.path, "attach", "--runner", addr, "--loop"}, false, results.AttachTokenEnv+"="+ag.token)
	if ag.err != nil {
		h.a.forget(ag.token, ag.conns)
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ag.demux(ag.p.stdout, false) }()
	go func() { defer wg.Done(); ag.demux(ag.p.stderr, true) }()
	go func() {
		wg.Wait()
		<-ag.p.done
		ag.end()
	}()
}

// demux hands each line of one of the step's streams to the command it
// belongs to: the oldest whose end has not yet been seen on that stream.
func (ag *agent) demux(r io.Reader, stderr bool) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			ag.route(line, stderr)
		}
		if err != nil {
			return
		}
	}
}

func (ag *agent) route(line []byte, stderr bool) {
	ag.mu.Lock()
	i := slices.IndexFunc(ag.cmds, func(c *command) bool { return !c.ended(stderr) })
	var c *command
	if i >= 0 {
		c = ag.cmds[i]
	}
	ag.mu.Unlock()
	body, tail, isEnd := bytes.Cut(line, []byte(results.AttachEndMarker))
	if len(body) > 0 {
		if c != nil {
			c.w(stderr).Write(body) // the reader gone: dropped
		} else {
			ag.mu.Lock()
			ag.stray = append(ag.stray, body...)
			if n := len(ag.stray); n > maxStray {
				ag.stray = ag.stray[n-maxStray:]
			}
			ag.mu.Unlock()
		}
	}
	if !isEnd || c == nil {
		return
	}
	var end results.AttachEnd
	if json.Unmarshal(bytes.TrimSpace(tail), &end) != nil {
		end = results.AttachEnd{Status: -1, Signal: "?"}
	}
	c.w(stderr).Close()
	ag.mu.Lock()
	if stderr {
		c.errEnd = true
	} else {
		c.outEnd = true
	}
	done := c.outEnd && c.errEnd
	if done {
		ag.cmds = slices.DeleteFunc(ag.cmds, func(x *command) bool { return x == c })
	}
	ag.mu.Unlock()
	if done {
		// Back to the Host before Wait returns: the caller's next
		// Prestart, as soon as Wait has returned, must find it idle, or it
		// starts another step.
		ag.release()
		c.finish(endError(end))
	}
}

// endError maps a command's end to the remote.Host contract.
func endError(e results.AttachEnd) error {
	switch {
	case e.Signal != "":
		return &remote.ExitError{Status: -1, Signal: e.Signal}
	case e.Status != 0:
		return &remote.ExitError{Status: e.Status}
	}
	return nil
}

// end is the step's end: the commands still running end with it.
func (ag *agent) end() {
	h := ag.h
	h.mu.Lock()
	h.idle = slices.DeleteFunc(h.idle, func(x *agent) bool { return x == ag })
	h.mu.Unlock()
	h.a.forget(ag.token, ag.conns)
	ag.mu.Lock()
	ag.ended = true
	cmds := ag.cmds
	ag.cmds = nil
	ag.mu.Unlock()
	err := ag.p.err
	if err == nil {
		err = fmt.Errorf("%w: node attach on %s ended before its command did", remote.ErrConnectionLost, h.node)
	}
	for _, c := range cmds {
		c.outW.Close()
		c.errW.Close()
		c.finish(err)
	}
	close(ag.gone)
}

// release puts an agent with no command back in its Host's idle list,
// unless its step has ended or the Host is closed.
func (ag *agent) release() {
	h := ag.h
	h.mu.Lock()
	defer h.mu.Unlock()
	ag.mu.Lock()
	ended := ag.ended
	ag.mu.Unlock()
	if !ended && !h.closed {
		h.idle = append(h.idle, ag)
	}
}

// strayMessage is the agent's own last words, for an error.
func (ag *agent) strayMessage() string {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(ag.stray)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// command is one command of an agent, as a remote.Process.
type command struct {
	ag         *agent
	conn       net.Conn
	outR, errR *io.PipeReader
	outW, errW *io.PipeWriter
	outEnd     bool // its end seen on stdout (ag.mu)
	errEnd     bool // and on stderr
	done       chan struct{}
	err        error
}

func (c *command) ended(stderr bool) bool {
	if stderr {
		return c.errEnd
	}
	return c.outEnd
}

func (c *command) w(stderr bool) *io.PipeWriter {
	if stderr {
		return c.errW
	}
	return c.outW
}

func (c *command) finish(err error) {
	c.err = err
	close(c.done)
}

func (c *command) Stdin() io.WriteCloser { return c.conn }
func (c *command) Stdout() io.Reader     { return c.outR }
func (c *command) Stderr() io.Reader     { return c.errR }

// Signal delivers sig to the whole step: node attach and its command.
// A step whose agent is signalled is not used again.
func (c *command) Signal(sig os.Signal) error {
	select {
	case <-c.done:
		return nil
	default:
	}
	return c.ag.p.Signal(sig)
}

func (c *command) Wait() error {
	<-c.done
	return c.err
}

// pending is an agent handed out by Prestart, waiting for its command.
type pending struct {
	ag     *agent
	pooled bool               // the agent was idle, not started for this pending
	cancel context.CancelFunc // ends a launch still under way

	mu   sync.Mutex
	used bool // Start or Close was called
}

// Prestart hands out an idle agent of this Host for path, or starts a new
// one in the background.
func (h *Host) Prestart(ctx context.Context, path string) remote.Pending {
	h.mu.Lock()
	for i, ag := range h.idle {
		if ag.path == path {
			h.idle = slices.Delete(h.idle, i, i+1)
			h.mu.Unlock()
			return &pending{ag: ag, pooled: true, cancel: func() {}}
		}
	}
	h.mu.Unlock()
	var rnd [16]byte
	rand.Read(rnd[:])
	lctx, cancel := context.WithCancel(ctx)
	ag := &agent{h: h, path: path, token: hex.EncodeToString(rnd[:]), conns: make(chan net.Conn, 1),
		launched: make(chan struct{}), gone: make(chan struct{})}
	go ag.launch(lctx)
	return &pending{ag: ag, cancel: cancel}
}

// claim marks the pending used, once.
func (pd *pending) claim() bool {
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if pd.used {
		return false
	}
	pd.used = true
	return true
}

// Start waits for the agent's step and its connection, then sends argv.
func (pd *pending) Start(ctx context.Context, argv []string) (remote.Process, error) {
	if !pd.claim() {
		return nil, errors.New("start a prestarted node: already started or closed")
	}
	ag := pd.ag
	if len(argv) == 0 || argv[0] != ag.path {
		pd.giveBack()
		return ag.h.Start(ctx, argv)
	}
	select {
	case <-ag.launched:
	case <-ctx.Done():
		pd.giveBack()
		return nil, ctx.Err()
	}
	if ag.err != nil {
		return nil, ag.err
	}
	var conn net.Conn
	select {
	case conn = <-ag.conns:
	case <-ag.gone:
		if pd.pooled { // it ended while idle: start another
			return ag.h.Prestart(ctx, ag.path).Start(ctx, argv)
		}
		msg := ag.strayMessage()
		if msg == "" {
			msg = fmt.Sprint(ag.p.err)
		}
		return nil, fmt.Errorf("node attach on %s ended before it attached: %s", ag.h.node, msg)
	case <-ctx.Done():
		pd.giveBack()
		return nil, ctx.Err()
	}
	pd.cancel() // the launch is over: release its context
	c := &command{ag: ag, conn: conn, done: make(chan struct{})}
	c.outR, c.outW = io.Pipe()
	c.errR, c.errW = io.Pipe()
	ag.mu.Lock()
	ended := ag.ended
	if !ended {
		ag.cmds = append(ag.cmds, c)
	}
	ag.mu.Unlock()
	if ended {
		conn.Close()
		if pd.pooled {
			return ag.h.Prestart(ctx, ag.path).Start(ctx, argv)
		}
		return nil, fmt.Errorf("%w: node attach on %s ended", remote.ErrConnectionLost, ag.h.node)
	}
	line, _ := json.Marshal(results.AttachCommand{Argv: argv[1:]})
	// A failed write means node is gone; its end says why.
	_, _ = conn.Write(append(line, '\n'))
	return c, nil
}

// Close gives back an agent that never got its command: its Host keeps
// it for a later Prestart, until the Host's Close.
func (pd *pending) Close() error {
	if pd.claim() {
		pd.giveBack()
	}
	return nil
}

// giveBack ends a launch still under way, or puts a running agent back
// in its Host's idle list.
func (pd *pending) giveBack() {
	pd.cancel()
	<-pd.ag.launched
	if pd.ag.err == nil {
		pd.ag.release()
	}
}
