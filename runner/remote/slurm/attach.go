package slurm

// Prestart: node started as a step before its command line is known, which
// it then takes over a TCP connection of its own to the runner, with its
// control lines (results/attach.go has the handshake). A step takes tens
// to hundreds of milliseconds to start, and srun's stdin delivered lines up
// to 0.36 s late; a line on node's own connection arrives in well under a
// millisecond.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
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

// acceptAttach hands each attaching node's connection to the Pending that
// gave out its token, and closes any other.
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
			delete(a.waiting, hello.Token) // a token is good once
			if ok {
				ch <- c // buffered: never blocks
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

// pending is a node step started by Prestart, waiting for its command.
type pending struct {
	h      *Host
	path   string
	token  string
	conns  chan net.Conn // the node's connection once it has attached
	cancel context.CancelFunc

	launched chan struct{} // closed once the step runs, or failed: p, err
	p        *process
	err      error

	mu   sync.Mutex
	used bool // Start or Close was called
}

// Prestart starts `node attach` as a step on the node, in the background.
func (h *Host) Prestart(ctx context.Context, path string) remote.Pending {
	var rnd [16]byte
	rand.Read(rnd[:])
	lctx, cancel := context.WithCancel(ctx)
	pd := &pending{h: h, path: path, token: hex.EncodeToString(rnd[:]), conns: make(chan net.Conn, 1), cancel: cancel, launched: make(chan struct{})}
	go func() {
		defer close(pd.launched)
		addr, err := h.a.attachAddr(lctx, h.node)
		if err != nil {
			pd.err = fmt.Errorf("start node on %s: %w", h.node, err)
			return
		}
		h.a.mu.Lock()
		h.a.waiting[pd.token] = pd.conns
		h.a.mu.Unlock()
		pd.p, pd.err = h.launch(lctx, []string{path, "attach", "--runner", addr}, false, results.AttachTokenEnv+"="+pd.token)
		if pd.err != nil {
			h.a.forget(pd.token, pd.conns)
		}
	}()
	return pd
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

// Start waits for the step and node's connection, then sends argv.
func (pd *pending) Start(ctx context.Context, argv []string) (remote.Process, error) {
	if !pd.claim() {
		return nil, errors.New("start a prestarted node: already started or closed")
	}
	if len(argv) == 0 || argv[0] != pd.path {
		pd.drop()
		return pd.h.Start(ctx, argv)
	}
	select {
	case <-pd.launched:
	case <-ctx.Done():
		pd.drop()
		return nil, ctx.Err()
	}
	if pd.err != nil {
		return nil, pd.err
	}
	p := pd.p
	var c net.Conn
	select {
	case c = <-pd.conns:
	case <-p.exited:
		// node ended before it attached: its stdout and exit say why.
		pd.h.a.forget(pd.token, pd.conns)
		return p, nil
	case <-ctx.Done():
		pd.drop()
		return nil, ctx.Err()
	}
	line, _ := json.Marshal(results.AttachCommand{Argv: argv[1:]})
	// A failed write means node is gone; its exit says why.
	_, _ = c.Write(append(line, '\n'))
	p.setControl(c)
	pd.cancel() // the launch is over: release its context
	return p, nil
}

// Close stops a node that never got its command.
func (pd *pending) Close() error {
	if !pd.claim() {
		return nil
	}
	pd.drop()
	return nil
}

// drop ends the pending's step: the launch cancelled or awaited, the
// token withdrawn, and a node that attached told to stop by its
// connection's end; one that does not, stopped as any step is.
func (pd *pending) drop() {
	pd.cancel()
	<-pd.launched
	pd.h.a.forget(pd.token, pd.conns)
	p := pd.p
	if p == nil {
		return
	}
	p.stderr.Close() // nobody reads it: never let srun block on it
	select {
	case <-p.exited:
	case <-time.After(2 * time.Second):
		p.stop()
	}
	<-p.done
	p.stdout.close()
}
