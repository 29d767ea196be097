// Package agent runs node commands through long-lived `node attach
// --loop` agents, one per host and busy command, instead of starting node
// for each: a Pool hands out an idle agent, or launches one, and each
// command goes to it over a connection of its own, sealed after the
// hello, which carries that command's stdin (its control lines), its
// stdout and stderr, and how it ended (results/attach.go has the
// protocol). The agent's own stdout and stderr carry only its own
// messages, kept for an error.
//
// Slurm launches agents as job steps (runner/hosts/remote/slurm), since a step
// costs tens to hundreds of milliseconds; SSH launches them in a session
// for a pairwise or ring sweep (SSH here), whose rounds start N/2 pairs at
// once: at 64 hosts on 2 cores a session, a login shell and a node
// process per role cost 2.4 s a round.
package agent

import (
	"bufio"
	"container/list"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/hosts/remote"
)

// helloTimeout bounds how long an accepted connection may take to say
// which agent it is.
const helloTimeout = 10 * time.Second

// MaxPendingHellos bounds the accepted connections that have not yet said
// hello. Anyone who reaches the listener can open connections, and each
// holds a goroutine (over SSH a forwarded channel too) until its hello or
// helloTimeout; past the bound, the one silent the longest is closed at
// once. The oldest rather than the newest: an agent writes its hello as
// soon as it has connected, so closing the newest would let as many idle
// connections lock every agent out for helloTimeout, while closing the
// oldest costs an agent its connection only under a flood.
const MaxPendingHellos = 64

// Launcher starts a Pool's agents on one host, and what is not node.
type Launcher interface {
	// Name is how messages name the host.
	Name() string
	// Address is where an agent on the host dials the runner.
	Address(ctx context.Context) (string, error)
	// Launch starts `path attach --runner addr --loop …` on the host so
	// that it attaches with token, and returns once it runs.
	Launch(ctx context.Context, path, addr, token string) (remote.Process, error)
	// Start starts argv on the host as remote.Host.Start does: a Pending
	// given another program than the one it was started for falls back
	// to it.
	Start(ctx context.Context, argv []string) (remote.Process, error)
}

// Tokens hands each attaching agent's connection to the agent whose key
// it names. An agent's key changes with each command (results/attach.go):
// a hello is good for the one key the agent holds now, and for one waiting
// connection at a time. The zero value is ready to use.
type Tokens struct {
	mu      sync.Mutex
	waiting map[string]chan attachment // by the ID of the key each agent attaches with next
	ids     map[chan attachment]string // and back
	pending list.List                  // of net.Conn: accepted, no hello yet, oldest first
}

// attachment is an agent's connection, the reader of what follows its
// hello, and the hello's nonce, under which the connection is sealed; or
// why the agent cannot take a command (err).
type attachment struct {
	conn  net.Conn
	r     *bufio.Reader
	nonce []byte
	err   error
}

// Serve takes the connections of ln until it is closed, and closes any
// that does not say hello with the ID of a key given out, within
// helloTimeout; it keeps at most MaxPendingHellos waiting for theirs.
func (t *Tokens) Serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		var evicted net.Conn
		t.mu.Lock()
		if t.pending.Len() >= MaxPendingHellos {
			evicted = t.pending.Remove(t.pending.Front()).(net.Conn)
		}
		e := t.pending.PushBack(c)
		t.mu.Unlock()
		if evicted != nil {
			evicted.Close()
		}
		go t.hello(c, e)
	}
}

// hello reads c's hello, and hands c to the agent it names, or closes it.
func (t *Tokens) hello(c net.Conn, e *list.Element) {
	c.SetReadDeadline(time.Now().Add(helloTimeout))
	br := bufio.NewReader(c)
	hello, err := results.ReadHello(br)
	t.mu.Lock()
	t.pending.Remove(e) // a no-op if Serve closed it
	t.mu.Unlock()
	if err != nil {
		c.Close()
		return
	}
	nonce, err := hello.HelloNonce()
	if err != nil {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	at := attachment{conn: c, r: br, nonce: nonce}
	if hello.V != results.AttachVersion {
		at.err = fmt.Errorf("node attach speaks attach protocol version %d, this runner %d: it is another build's node (deploy the runner's own)", max(hello.V, 1), results.AttachVersion)
	}
	t.mu.Lock()
	ch, ok := t.waiting[hello.ID]
	if ok {
		select {
		case ch <- at: // buffered: one connection waits
		default:
			ok = false
		}
	}
	t.mu.Unlock()
	if !ok {
		c.Close()
	}
}

// add gives out key; its agent's connections come on ch.
func (t *Tokens) add(key results.AttachKey, ch chan attachment) {
	t.mu.Lock()
	if t.waiting == nil {
		t.waiting, t.ids = map[string]chan attachment{}, map[chan attachment]string{}
	}
	id := key.ID()
	t.waiting[id], t.ids[ch] = ch, id
	t.mu.Unlock()
}

// rekey moves ch's agent to its next key, once a command has been sent
// on the connection it took from ch: a hello under the old key is refused
// from now on, and one that came for it meanwhile is closed. It reports
// false if the key was withdrawn (forget).
func (t *Tokens) rekey(ch chan attachment, next results.AttachKey) bool {
	t.mu.Lock()
	id, ok := t.ids[ch]
	if ok {
		delete(t.waiting, id)
		id = next.ID()
		t.waiting[id], t.ids[ch] = ch, id
	}
	t.mu.Unlock()
	drain(ch)
	return ok
}

// forget withdraws ch's key, and closes a connection that came for it.
func (t *Tokens) forget(ch chan attachment) {
	t.mu.Lock()
	delete(t.waiting, t.ids[ch])
	delete(t.ids, ch)
	t.mu.Unlock()
	drain(ch)
}

func drain(ch chan attachment) {
	select {
	case a := <-ch:
		a.conn.Close()
	default:
	}
}

// Pool is the agents of one host: Prestart hands out an idle one, or
// launches one. It is safe for concurrent use.
type Pool struct {
	l      Launcher
	tokens *Tokens

	mu     sync.Mutex
	closed bool
	idle   []*agent
	live   map[*agent]bool
}

// NewPool is the agents l launches, which attach through tokens.
func NewPool(l Launcher, tokens *Tokens) *Pool {
	return &Pool{l: l, tokens: tokens, live: map[*agent]bool{}}
}

// Close ends the pool's agents: each one's token is withdrawn and its
// stdin closed, on which an idle agent ends by itself; one still there
// after wait is handed to kill, if not nil. Later Prestarts fail.
func (p *Pool) Close(wait time.Duration, kill func(remote.Process)) {
	p.mu.Lock()
	p.closed = true
	p.idle = nil
	live := maps.Clone(p.live)
	p.mu.Unlock()
	remote.EndAll(live, func(ag *agent) {
		<-ag.launched
		if ag.err != nil {
			return
		}
		p.tokens.forget(ag.conns)
		ag.p.Stdin().Close()
		select {
		case <-ag.gone:
		case <-time.After(wait):
			if kill != nil {
				kill(ag.p)
			}
		}
	})
}

// agent is one `node attach --loop` on the host: handed out by Prestart,
// back in its Pool's idle list once its command has ended, until it ends
// or the Pool closes.
type agent struct {
	pool  *Pool
	path  string
	token string            // its first key, which Launch hands it
	key   results.AttachKey // its key now: only the holder of a pending's Start uses it
	conns chan attachment   // its connection for the next command, once dialled

	launched chan struct{} // closed once it runs, or failed: p, err
	p        remote.Process
	err      error
	gone     chan struct{} // closed once it has ended and its output is read: exit
	exit     error

	mu    sync.Mutex
	cmds  []*command // given their command line, end not yet seen; oldest first
	ended bool
	stray []byte // the last of what it wrote with no command to take it
}

// maxStray bounds what is kept of an agent's output outside its commands:
// its own error, if it fails before attaching.
const maxStray = 4096

// launch starts the agent and, once it runs, reads its output.
func (ag *agent) launch(ctx context.Context) {
	defer close(ag.launched)
	p := ag.pool
	addr, err := p.l.Address(ctx)
	if err != nil {
		ag.err = fmt.Errorf("start node on %s: %w", p.l.Name(), err)
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ag.err = fmt.Errorf("start node on %s: %w", p.l.Name(), ErrClosed)
		return
	}
	p.live[ag] = true
	p.mu.Unlock()
	p.tokens.add(ag.key, ag.conns)
	if ag.p, ag.err = p.l.Launch(ctx, ag.path, addr, ag.token); ag.err != nil {
		p.tokens.forget(ag.conns)
		p.mu.Lock()
		delete(p.live, ag)
		p.mu.Unlock()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ag.keepStray(ag.p.Stdout()) }()
	go func() { defer wg.Done(); ag.keepStray(ag.p.Stderr()) }()
	go func() {
		wg.Wait()
		ag.exit = ag.p.Wait()
		ag.end()
	}()
}

// ErrClosed is a Prestart on a closed Pool.
var ErrClosed = errors.New("the host is closed")

// keepStray keeps the last of one of the agent's streams: its own
// messages, such as why it could not attach, for an error. Commands'
// output comes over their connections, never here.
func (ag *agent) keepStray(r io.Reader) {
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			ag.mu.Lock()
			ag.stray = append(ag.stray, buf[:n]...)
			if l := len(ag.stray); l > maxStray {
				ag.stray = ag.stray[l-maxStray:]
			}
			ag.mu.Unlock()
		}
		if err != nil {
			return
		}
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

// end is the agent's end: the commands still running end with it, with
// its exit's error, or a lost connection if it exited 0.
func (ag *agent) end() {
	p := ag.pool
	p.mu.Lock()
	p.idle = slices.DeleteFunc(p.idle, func(x *agent) bool { return x == ag })
	delete(p.live, ag)
	p.mu.Unlock()
	p.tokens.forget(ag.conns)
	ag.mu.Lock()
	ag.ended = true
	cmds := ag.cmds
	ag.cmds = nil
	ag.mu.Unlock()
	err := ag.exit
	if err == nil {
		err = fmt.Errorf("%w: node attach on %s ended before its command did", remote.ErrConnectionLost, p.l.Name())
	}
	for _, c := range cmds {
		c.finish(err)
	}
	close(ag.gone)
}

// exitText is how the agent's exit reads in a message.
func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// release puts an agent with no command back in its Pool's idle list,
// unless it has ended or the Pool is closed.
func (ag *agent) release() {
	p := ag.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	ag.mu.Lock()
	ended := ag.ended
	ag.mu.Unlock()
	if !ended && !p.closed {
		p.idle = append(p.idle, ag)
	}
}

// strayMessage is the agent's own last words, for an error.
func (ag *agent) strayMessage() string {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(ag.stray)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// command is one command of an agent, as a remote.Process: its stdin,
// stdout, stderr and end are sealed frames on its own connection.
type command struct {
	ag        *agent
	conn      net.Conn
	ch        *results.AttachChannel
	stdin     stdinWriter
	out, errs *stream
	once      sync.Once
	done      chan struct{}
	err       error
}

// lostWait bounds how long a command whose connection broke before its
// end waits for its agent's end, whose exit then says why.
const lostWait = 10 * time.Second

// receive hands the command's stdout and stderr frames to its readers
// until its end frame; a connection that ends or breaks first waits for
// the agent's end (a killed agent), and is otherwise a lost connection.
func (c *command) receive() {
	defer c.conn.Close()
	for {
		kind, b, err := c.ch.Recv()
		if errors.Is(err, results.ErrAttachFrame) {
			// Someone on the path: nothing more of this agent is believed.
			c.finish(fmt.Errorf("node attach on %s: %w", c.ag.pool.l.Name(), err))
			c.ag.p.Signal(syscall.SIGKILL)
			return
		}
		if err != nil {
			select {
			case <-c.done: // the agent's end finished it
			case <-time.After(lostWait):
				c.finish(fmt.Errorf("%w: node attach on %s: %v", remote.ErrConnectionLost, c.ag.pool.l.Name(), err))
			}
			return
		}
		switch kind {
		case results.FrameStdout:
			c.out.write(b)
		case results.FrameStderr:
			c.errs.write(b)
		case results.FrameEnd:
			var end results.AttachEnd
			if json.Unmarshal(b, &end) != nil {
				end = results.AttachEnd{Status: -1, Signal: "?"}
			}
			c.out.close()
			c.errs.close()
			c.ag.mu.Lock()
			c.ag.cmds = slices.DeleteFunc(c.ag.cmds, func(x *command) bool { return x == c })
			c.ag.mu.Unlock()
			// Back to the Pool before Wait returns: the caller's next
			// Prestart, as soon as Wait has returned, must find it idle,
			// or it starts another agent.
			c.ag.release()
			c.finish(endError(end))
			return
		}
	}
}

// finish ends the command with err, once.
func (c *command) finish(err error) {
	c.once.Do(func() {
		c.out.close()
		c.errs.close()
		c.err = err
		close(c.done)
	})
}

func (c *command) Stdin() io.WriteCloser { return &c.stdin }
func (c *command) Stdout() io.Reader     { return c.out }
func (c *command) Stderr() io.Reader     { return c.errs }

// maxUnread bounds what a command's stream holds for a reader that does
// not keep up; past it, what comes is dropped.
const maxUnread = 4 << 20

// stream is one of a command's output streams: the frames of one
// connection feed both, so a write never waits for its reader (one who
// reads stdout to its end before stderr must not stall stdout).
type stream struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    []byte
	closed bool
}

func newStream() *stream {
	s := &stream{}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *stream) write(b []byte) {
	s.mu.Lock()
	if !s.closed && len(s.buf)+len(b) <= maxUnread {
		s.buf = append(s.buf, b...)
	}
	s.mu.Unlock()
	s.cond.Broadcast()
}

func (s *stream) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cond.Broadcast()
}

// Read blocks until there is something to read, or the stream has ended.
func (s *stream) Read(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.buf) == 0 && !s.closed {
		s.cond.Wait()
	}
	if len(s.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(b, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// stdinWriter is a command's stdin: its bytes sealed as stdin frames,
// its Close the stdin's end frame, once.
type stdinWriter struct {
	ch   *results.AttachChannel
	once sync.Once
}

func (w *stdinWriter) Write(b []byte) (int, error) {
	if err := w.ch.Send(results.FrameStdin, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (w *stdinWriter) Close() error {
	var err error
	w.once.Do(func() { err = w.ch.Send(results.FrameStdinEnd, nil) })
	return err
}

// Signal delivers sig to the agent that runs the command (its step, or
// its process group): the agent ends with it and is not used again.
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

// Prestart hands out an idle agent for path, or launches a new one in the
// background.
func (p *Pool) Prestart(ctx context.Context, path string) remote.Pending {
	p.mu.Lock()
	for i, ag := range p.idle {
		if ag.path == path {
			p.idle = slices.Delete(p.idle, i, i+1)
			p.mu.Unlock()
			return &pending{ag: ag, pooled: true, cancel: func() {}}
		}
	}
	p.mu.Unlock()
	var rnd [32]byte
	rand.Read(rnd[:])
	token := hex.EncodeToString(rnd[:])
	lctx, cancel := context.WithCancel(ctx)
	ag := &agent{pool: p, path: path, token: token, key: results.AttachKey(token), conns: make(chan attachment, 1),
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

// Start waits for the agent and its connection, then sends argv.
func (pd *pending) Start(ctx context.Context, argv []string) (remote.Process, error) {
	if !pd.claim() {
		return nil, errors.New("start a prestarted node: already started or closed")
	}
	ag := pd.ag
	if len(argv) == 0 || argv[0] != ag.path {
		pd.giveBack()
		return ag.pool.l.Start(ctx, argv)
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
	var at attachment
	select {
	case at = <-ag.conns:
	case <-ag.gone:
		if pd.pooled { // it ended while idle: start another
			return ag.pool.Prestart(ctx, ag.path).Start(ctx, argv)
		}
		msg := ag.strayMessage()
		if msg == "" {
			msg = exitText(ag.exit)
		}
		return nil, fmt.Errorf("node attach on %s ended before it attached: %s", ag.pool.l.Name(), msg)
	case <-ctx.Done():
		pd.giveBack()
		return nil, ctx.Err()
	}
	pd.cancel() // the launch is over: release its context
	if at.err != nil {
		at.conn.Close()
		return nil, fmt.Errorf("start node on %s: %w", ag.pool.l.Name(), at.err)
	}
	conn := at.conn
	ch := ag.key.RunnerChannel(at.r, conn, at.nonce)
	c := &command{ag: ag, conn: conn, ch: ch, stdin: stdinWriter{ch: ch}, done: make(chan struct{})}
	c.out, c.errs = newStream(), newStream()
	ag.mu.Lock()
	ended := ag.ended
	if !ended {
		ag.cmds = append(ag.cmds, c)
	}
	ag.mu.Unlock()
	if ended {
		conn.Close()
		if pd.pooled {
			return ag.pool.Prestart(ctx, ag.path).Start(ctx, argv)
		}
		return nil, fmt.Errorf("%w: node attach on %s ended", remote.ErrConnectionLost, ag.pool.l.Name())
	}
	// The command is the first sealed frame, and both sides move to the
	// next key: the agent's next hello, which it may send as soon as it
	// has opened this frame, names it.
	ag.key = ag.key.Next(at.nonce)
	if !ag.pool.tokens.rekey(ag.conns, ag.key) {
		conn.Close() // withdrawn: the agent has ended or its Pool closed; its end says why
	}
	// A failed send means node is gone; its end says why.
	_ = ch.SendCommand(argv[1:])
	go c.receive()
	return c, nil
}

// Close gives back an agent that never got its command: its Pool keeps
// it for a later Prestart, until the Pool's Close.
func (pd *pending) Close() error {
	if pd.claim() {
		pd.giveBack()
	}
	return nil
}

// giveBack ends a launch still under way, or puts a running agent back
// in its Pool's idle list.
func (pd *pending) giveBack() {
	pd.cancel()
	<-pd.ag.launched
	if pd.ag.err == nil {
		pd.ag.release()
	}
}
