package transport

// The Listener's rules. Whoever can reach the data port can connect, so
// no connection may hold up another's admission:
//   - every connection gets a handshake of its own, in a goroutine of its
//     own, under its own deadline (Admission.Timeout): a connection that
//     says nothing holds only itself, until that deadline;
//   - one peer address may have at most PeerHandshakes handshakes in
//     flight beyond the clients still awaited (the Accepts waiting); a
//     connection past that is closed at once and reported as refused, so
//     one address cannot take every descriptor the process has;
//   - a connection that passes its handshake goes to the Accept that has
//     waited longest, whichever Accept was waiting when it connected;
//     with none waiting at that moment (the server's next Serve not yet
//     begun: on a loaded host, its goroutine not yet run) it waits for
//     the next Accept, at most MaxReady of them, rather than being
//     closed on a client that has proved the secret.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// PeerHandshakes is how many handshakes one peer address may have in
// flight beyond the number of Accepts waiting: the clients a server
// awaits may all come from one host, and a few strays (a port scan, a
// client retrying) besides them.
const PeerHandshakes = 8

// MaxReady is how many connections that passed their handshake may wait
// for an Accept; one past that is closed.
const MaxReady = 64

// ErrBusy is the refusal of a connection whose address already has as
// many handshakes in flight as it may.
var ErrBusy = errors.New("too many handshakes in flight from this address")

// Admission is how a Listener admits a client.
type Admission[S any] struct {
	// Handshake admits or refuses c and returns what the server keeps
	// of an admitted client (its session). It runs in a goroutine of
	// its own, several at once, under a deadline of Timeout set on c
	// (it may set a shorter one; the Listener lifts it once Handshake
	// has admitted c). ctx ends when the Listener is closed.
	Handshake func(ctx context.Context, c *net.TCPConn) (S, error)
	Timeout   time.Duration // each handshake's own deadline; > 0
	// Refused, when not nil, is told of each connection refused, from
	// Handshake's goroutine or the accept loop.
	Refused func(from net.Addr, err error)
	// Discard, when not nil, frees what Handshake kept for a client no
	// Accept takes (the Listener closed, or no Accept waiting).
	Discard func(S)
}

// Listener is a server's TCP listener and the connections it serves, as
// every transport needs them: the tcp transport moves the bytes over a
// connection, the rdma transport trades QP metadata and the bye on it.
// Cancelling Accept's context, or Close, interrupts any read or write on
// the connection until it is released. Several Accepts may run at once,
// one per client a server expects; each owns the connection it returns.
type Listener[S any] struct {
	ln     *net.TCPListener
	adm    Admission[S]
	ctx    context.Context // the handshakes': ends at Close
	cancel context.CancelFunc
	done   chan struct{} // closed by Close

	mu        sync.Mutex
	conns     map[*net.TCPConn]bool // the connections being handshaken or served
	inflight  map[string]int        // handshakes in flight per peer address
	waiters   []*waiter[S]          // the Accepts waiting, oldest first
	ready     []admitted[S]         // admitted with no Accept waiting, oldest first
	accepting bool                  // the accept loop runs
	closed    bool
	// running counts the Accepts not yet released, the accept loop and
	// the handshakes: Close waits for them all.
	running sync.WaitGroup
}

// admitted is a connection whose handshake passed, or an accept error.
type admitted[S any] struct {
	c   *net.TCPConn
	s   S
	err error
}

type waiter[S any] struct{ got chan admitted[S] } // buffered: sent to under mu

// NewListener takes ownership of ln; it accepts only while an Accept
// waits, so until then clients wait in the kernel's backlog.
func NewListener[S any](ln *net.TCPListener, a Admission[S]) *Listener[S] {
	ctx, cancel := context.WithCancel(context.Background())
	return &Listener[S]{ln: ln, adm: a, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		conns: map[*net.TCPConn]bool{}, inflight: map[string]int{}}
}

// Port is the TCP port listened on.
func (l *Listener[S]) Port() int { return l.ln.Addr().(*net.TCPAddr).Port }

// Accept waits until a connection passes its handshake, timeout passes
// (0 is no limit), ctx ends or Close is called. A connection refused is
// closed and reported to Admission.Refused, and the wait goes on: whoever
// connects first must not end the experiment.
//
// The caller owns the accepted connection and its session until it calls
// release, which closes the connection (the session stays the caller's);
// until then cancelling ctx, or Close, still interrupts its I/O, and Close
// waits for release before it returns, so the caller may go on using what
// Close's caller frees afterwards. release must be called exactly once; on
// error there is nothing to release.
func (l *Listener[S]) Accept(ctx context.Context, timeout time.Duration) (c *net.TCPConn, s S, release func(), err error) {
	w := &waiter[S]{got: make(chan admitted[S], 1)}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, s, nil, fmt.Errorf("accept: %w", net.ErrClosed)
	}
	l.running.Add(1)
	if len(l.ready) > 0 {
		a := l.ready[0]
		l.ready = l.ready[1:]
		l.mu.Unlock()
		return l.own(ctx, a)
	}
	l.waiters = append(l.waiters, w)
	if !l.accepting {
		l.accepting = true
		l.running.Add(1)
		go l.acceptLoop()
	}
	l.mu.Unlock()
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case a := <-w.got:
		return l.own(ctx, a)
	case <-ctx.Done():
		err = ctx.Err()
	case <-expired:
		err = fmt.Errorf("no client within the accept timeout of %s: %w", timeout, os.ErrDeadlineExceeded)
	case <-l.done:
		err = fmt.Errorf("accept: %w", net.ErrClosed)
	}
	if !l.leave(w) { // a connection came meanwhile: it is another's
		if a := <-w.got; a.c != nil {
			l.pass(a)
		}
	}
	l.running.Done()
	return nil, s, nil, err
}

// own hands a, delivered to an Accept with ctx, to its caller, or passes
// it on when ctx has ended or the Listener is closed.
func (l *Listener[S]) own(ctx context.Context, a admitted[S]) (*net.TCPConn, S, func(), error) {
	var zero S
	if a.err != nil {
		l.running.Done()
		return nil, zero, nil, a.err
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed || ctx.Err() != nil {
		l.pass(a) // to another Accept, or discarded
		l.running.Done()
		if ctx.Err() != nil {
			return nil, zero, nil, ctx.Err()
		}
		return nil, zero, nil, fmt.Errorf("accept: %w", net.ErrClosed)
	}
	// Cancelling ctx pushes the deadline into the past, which unblocks any
	// read or write on the connection.
	unwatch := context.AfterFunc(ctx, func() { a.c.SetDeadline(time.Unix(1, 0)) })
	return a.c, a.s, func() {
		unwatch()
		l.forget(a.c)
		l.running.Done()
	}, nil
}

// leave takes w off the waiters and reports whether it was still there
// (false: a connection or an error was sent to it).
func (l *Listener[S]) leave(w *waiter[S]) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, x := range l.waiters {
		if x == w {
			l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
			l.stopIfIdle()
			return true
		}
	}
	return false
}

// stopIfIdle wakes the accept loop when no Accept waits any more, so it
// stops and later clients wait in the backlog. Call it with mu held.
func (l *Listener[S]) stopIfIdle() {
	if len(l.waiters) == 0 && l.accepting {
		l.ln.SetDeadline(time.Unix(1, 0))
	}
}

// acceptLoop accepts connections while an Accept waits, and starts a
// handshake for each that its address's cap lets in.
func (l *Listener[S]) acceptLoop() {
	defer l.running.Done()
	l.mu.Lock()
	if l.closed || len(l.waiters) == 0 { // every Accept left before the loop began
		l.accepting = false
		l.mu.Unlock()
		return
	}
	l.ln.SetDeadline(time.Time{}) // a stop stopIfIdle asked of an earlier loop
	l.mu.Unlock()
	for {
		c, err := l.ln.AcceptTCP()
		if err != nil && l.acceptFailed(err) {
			return
		}
		if err != nil {
			continue
		}
		ip := c.RemoteAddr().(*net.TCPAddr).IP.String()
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			c.Close()
			continue // the next accept fails and ends the loop
		}
		if n := l.inflight[ip]; n >= PeerHandshakes+len(l.waiters) {
			l.mu.Unlock()
			l.refused(c.RemoteAddr(), fmt.Errorf("%w: %d already", ErrBusy, n))
			c.Close()
			continue
		}
		l.inflight[ip]++
		l.conns[c] = true
		l.running.Add(1)
		l.mu.Unlock()
		go l.handshake(c, ip)
	}
}

// acceptFailed handles an accept's error and reports whether the loop
// ends: at Close, with no Accept waiting, or on an error other than the
// deadline stopIfIdle set, which every waiting Accept then returns.
func (l *Listener[S]) acceptFailed(err error) (stop bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed && len(l.waiters) > 0 {
		if errors.Is(err, os.ErrDeadlineExceeded) { // a stop no longer wanted
			l.ln.SetDeadline(time.Time{})
			return false
		}
		for _, w := range l.waiters {
			w.got <- admitted[S]{err: fmt.Errorf("accept: %w", err)}
		}
		l.waiters = nil
	}
	l.accepting = false
	return true
}

// handshake runs the admission's handshake on c under its own deadline,
// then passes c on or refuses it.
func (l *Listener[S]) handshake(c *net.TCPConn, ip string) {
	defer l.running.Done()
	c.SetDeadline(time.Now().Add(l.adm.Timeout))
	s, err := l.adm.Handshake(l.ctx, c)
	if err == nil {
		if err = c.SetDeadline(time.Time{}); err != nil && l.adm.Discard != nil {
			l.adm.Discard(s)
		}
	}
	l.mu.Lock()
	if l.inflight[ip]--; l.inflight[ip] <= 0 {
		delete(l.inflight, ip)
	}
	l.mu.Unlock()
	if err != nil { // told before the peer sees the close
		// A refusal of the secret is told even once the Listener is
		// closed: the client learnt of it from the handshake's last
		// message, and the server may have finished and closed before
		// this goroutine ran. Any other failure then is Close's doing.
		if l.ctx.Err() == nil || errors.Is(err, ErrAuth) {
			l.refused(c.RemoteAddr(), err)
		}
		l.forget(c)
		return
	}
	l.pass(admitted[S]{c: c, s: s})
}

// pass hands a to the Accept that has waited longest, or, with none
// waiting, keeps it for the next (up to MaxReady); once the Listener is
// closed, or past MaxReady, it closes it and discards its session.
func (l *Listener[S]) pass(a admitted[S]) {
	l.mu.Lock()
	switch {
	case !l.closed && len(l.waiters) > 0:
		w := l.waiters[0]
		l.waiters = l.waiters[1:]
		w.got <- a
		l.stopIfIdle()
		l.mu.Unlock()
		return
	case !l.closed && len(l.ready) < MaxReady:
		l.ready = append(l.ready, a)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.forget(a.c)
	if l.adm.Discard != nil {
		l.adm.Discard(a.s)
	}
}

// forget closes c and drops it from the connections Close closes.
func (l *Listener[S]) forget(c *net.TCPConn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	c.Close()
}

func (l *Listener[S]) refused(from net.Addr, err error) {
	if l.adm.Refused != nil {
		l.adm.Refused(from, err)
	}
}

// Close closes the listener and the connections being handshaken or
// served, then waits until every Accept has returned an error or been
// released, and every handshake has ended. It is safe to call more than
// once.
func (l *Listener[S]) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.running.Wait()
		return nil
	}
	l.closed = true
	close(l.done)
	l.cancel()
	for c := range l.conns {
		c.Close()
	}
	err := l.ln.Close()
	ready := l.ready
	l.ready = nil
	l.mu.Unlock()
	for _, a := range ready {
		l.forget(a.c)
		if l.adm.Discard != nil {
			l.adm.Discard(a.s)
		}
	}
	l.running.Wait()
	return err
}
