package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// Listener is a server's TCP listener and the connections it serves, as
// every transport needs them: the tcp transport moves the bytes over a
// connection, the rdma transport trades QP metadata and the bye on it.
// Cancelling Accept's context, or Close, interrupts both the accept and any
// read or write on the connection until it is released. Several Accepts
// may run at once, one per client a server expects; each owns the
// connection it accepts.
type Listener struct {
	ln *net.TCPListener

	mu      sync.Mutex
	conns   map[net.Conn]bool // the connections being handshaken or served
	closed  bool
	serving sync.WaitGroup // Accepts not yet released: Close waits for them
}

// NewListener takes ownership of ln.
func NewListener(ln *net.TCPListener) *Listener {
	return &Listener{ln: ln, conns: map[net.Conn]bool{}}
}

// Port is the TCP port listened on.
func (l *Listener) Port() int { return l.ln.Addr().(*net.TCPAddr).Port }

// Accept waits for connections until handshake accepts one, timeout passes
// (0 is no limit), ctx ends or Close is called. handshake gets the accept
// deadline (zero when there is none) and sets the connection's deadlines
// itself. A connection it refuses is closed and reported to refused, and
// the wait goes on: whoever connects first must not end the experiment.
//
// The caller owns the accepted connection until it calls release, which
// closes it; until then cancelling ctx, or Close, still interrupts its I/O,
// and Close waits for release before it returns, so the caller may go on
// using what Close's caller frees afterwards. release must be called
// exactly once; on error there is nothing to release.
func (l *Listener) Accept(ctx context.Context, timeout time.Duration,
	handshake func(c *net.TCPConn, deadline time.Time) error, refused func(from net.Addr, err error),
) (c *net.TCPConn, release func(), err error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, nil, fmt.Errorf("accept: %w", net.ErrClosed)
	}
	l.serving.Add(1)
	l.mu.Unlock()
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	// Cancelling ctx pushes every deadline into the past, which unblocks
	// the accept and any read or write on the connection.
	var mine *net.TCPConn // this Accept's connection, once it has one
	unwatch := context.AfterFunc(ctx, func() {
		past := time.Unix(1, 0)
		l.ln.SetDeadline(past)
		l.mu.Lock()
		if mine != nil {
			mine.SetDeadline(past)
		}
		l.mu.Unlock()
	})
	drop := func() { // forget and close mine
		l.mu.Lock()
		if mine != nil {
			delete(l.conns, mine)
			mine.Close()
			mine = nil
		}
		l.mu.Unlock()
	}
	release = func() {
		unwatch()
		drop()
		l.serving.Done()
	}
	for {
		if ctx.Err() != nil {
			release()
			return nil, nil, ctx.Err()
		}
		l.ln.SetDeadline(deadline)
		c, err := l.ln.AcceptTCP()
		if err != nil {
			release()
			switch {
			case ctx.Err() != nil:
				return nil, nil, ctx.Err()
			case errors.Is(err, os.ErrDeadlineExceeded):
				return nil, nil, fmt.Errorf("no client within the accept timeout of %s: %w", timeout, err)
			}
			return nil, nil, fmt.Errorf("accept: %w", err)
		}
		l.mu.Lock()
		mine = c
		l.conns[c] = true
		closed := l.closed
		l.mu.Unlock()
		if closed || ctx.Err() != nil { // Close or cancel ran between accept and here
			release()
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			return nil, nil, fmt.Errorf("accept: %w", net.ErrClosed)
		}
		if err := handshake(c, deadline); err != nil {
			drop()
			if ctx.Err() != nil {
				release()
				return nil, nil, ctx.Err()
			}
			if refused != nil {
				refused(c.RemoteAddr(), err)
			}
			continue
		}
		if ctx.Err() != nil {
			release()
			return nil, nil, ctx.Err()
		}
		return c, release, nil
	}
}

// Close closes the listener and the connections being served, then waits
// until every Accept has returned an error or been released. It is safe to
// call more than once.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.serving.Wait()
		return nil
	}
	l.closed = true
	for c := range l.conns {
		c.Close()
	}
	err := l.ln.Close()
	l.mu.Unlock()
	l.serving.Wait()
	return err
}
