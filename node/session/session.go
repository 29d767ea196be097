// Package session is what every node command shares with the runner that
// started it: the events it prints (Printer: JSON lines on stdout, words
// for people on stderr) and its lifetime (Lifetime: the control line on
// stdin, the go, --deadline, and stopping when stdin closes).
package session

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"rdmasweep/node/transport"
	"rdmasweep/results"
)

// Printer writes events. In json format every event is a line on stdout;
// warnings and errors are also told to stderr for a person. In text format
// stdout carries only the classic lines, and warnings and errors go to
// stderr alone.
type Printer struct {
	mu             sync.Mutex
	stdout, stderr io.Writer
	text           bool
}

// NewPrinter prints to stdout and stderr in format, "json" or "text".
func NewPrinter(stdout, stderr io.Writer, format string) *Printer {
	return &Printer{stdout: stdout, stderr: stderr, text: format == "text"}
}

// Event prints ev as a JSON line (json format only).
func (p *Printer) Event(ev any) {
	if p.text {
		return
	}
	b, err := json.Marshal(ev)
	if err != nil {
		b, _ = json.Marshal(results.Error{Type: results.TypeError, Message: "encode event: " + err.Error()})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stdout.Write(append(b, '\n'))
}

// Line prints a classic text line (text format only).
func (p *Printer) Line(format string, a ...any) {
	if !p.text {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.stdout, format+"\n", a...)
}

// Warn prints a warning event and tells stderr.
func (p *Printer) Warn(msg string) {
	p.Event(results.Warning{Type: results.TypeWarning, Message: msg})
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.stderr, "node: warning: %s\n", msg)
}

// Error prints an error event, with its code, and tells stderr.
func (p *Printer) Error(err error) {
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	p.Event(results.Error{Type: results.TypeError, Message: msg, Code: ErrorCode(err)})
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.stderr, "node: error: %s\n", err)
}

// ErrStdinClosed and the deadline are why a node stops on its own; they
// become the cause of its context, and so the message of its error event.
var ErrStdinClosed = errors.New("stdin closed: stopping")

// Lifetime is what a command sets up before slow work: --deadline and
// --control-stdin.
type Lifetime struct {
	ControlStdin bool
	Deadline     time.Duration
	// released is closed when a control line with "go" arrives; goAt is
	// its start time, written before the close (0: at once).
	released chan struct{}
	goAt     int64
}

func (l *Lifetime) AddFlags(fs *flag.FlagSet) {
	fs.BoolVar(&l.ControlStdin, "control-stdin", false, "read JSON control lines from stdin, and stop when stdin closes")
	fs.DurationVar(&l.Deadline, "deadline", 0, "exit with an error after this long (0: never)")
}

// Start applies the deadline and reads the first control line. The
// returned context ends at the deadline, on stdin EOF (under
// --control-stdin) or when ctx ends; context.Cause says which. secret is
// nil without --control-stdin, or when the control line carries none.
// Later control lines are read as they come: one with "go" closes
// l.released (see WaitGo).
func (l *Lifetime) Start(ctx context.Context, stdin io.Reader) (context.Context, func(), []byte, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := func() { cancel(nil) }
	if l.Deadline > 0 {
		var cancelT context.CancelFunc
		ctx, cancelT = context.WithTimeoutCause(ctx, l.Deadline, fmt.Errorf("deadline of %s reached: stopping", l.Deadline))
		stop = func() { cancelT(); cancel(nil) }
	}
	l.released = make(chan struct{})
	if !l.ControlStdin {
		return ctx, stop, nil, nil
	}
	type line struct {
		b   []byte
		err error
	}
	first := make(chan line, 1)
	r := bufio.NewReader(stdin)
	go func() {
		b, err := r.ReadBytes('\n')
		if err == io.EOF && len(b) > 0 {
			err = nil
		}
		first <- line{b, err}
		if err != nil {
			cancel(ErrStdinClosed)
			return
		}
		// After the first line, stdin carries later control lines, and
		// signals stop by closing.
		released := false
		for {
			b, err := r.ReadBytes('\n')
			var c results.Control
			if !released && json.Unmarshal(b, &c) == nil && c.Go {
				l.goAt = c.AtUnixNs
				close(l.released)
				released = true
			}
			if err != nil {
				cancel(ErrStdinClosed)
				return
			}
		}
	}()
	var l1 line
	select {
	case l1 = <-first:
	case <-ctx.Done():
		stop()
		return nil, nil, nil, context.Cause(ctx)
	}
	if l1.err != nil {
		stop()
		return nil, nil, nil, fmt.Errorf("read control line from stdin: %w", ErrStdinClosed)
	}
	var c results.Control
	if err := json.Unmarshal(l1.b, &c); err != nil {
		stop()
		return nil, nil, nil, fmt.Errorf("parse control line from stdin: %w", err)
	}
	var secret []byte
	if c.Secret != "" {
		var err error
		if secret, err = hex.DecodeString(c.Secret); err != nil {
			stop()
			return nil, nil, nil, errors.New("parse control line from stdin: secret is not hex")
		}
	}
	return ctx, stop, secret, nil
}

// WaitGo waits for the control line that says go, or for ctx to end.
// Without --control-stdin nothing could say go, so it returns at once.
func (l *Lifetime) WaitGo(ctx context.Context) error {
	if !l.ControlStdin {
		return nil
	}
	select {
	case <-l.released:
	case <-ctx.Done():
		return ctx.Err()
	}
	// The go may name a start time (results.Control.AtUnixNs).
	d := time.Until(time.Unix(0, l.goAt))
	if l.goAt == 0 || d <= 0 || d > results.MaxGoWait {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// StopReason turns an error caused by the node's own context ending into
// the reason it ended (stdin closed, deadline); other errors pass through.
func StopReason(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("interrupted: stopping: %w", context.Canceled)
	}
	return err
}

// ErrorCode is the code of an error event: what kind of failure err is,
// for a program to act on (results.ErrorCode*).
func ErrorCode(err error) string {
	switch {
	case errors.Is(err, transport.ErrODPMismatch):
		return results.ErrorCodeODPVerifyMismatch
	case errors.Is(err, transport.ErrMismatch):
		return results.ErrorCodeVerifyMismatch
	case errors.Is(err, transport.ErrMemAvailable):
		return results.ErrorCodeMemAvailable
	case errors.Is(err, transport.ErrNeedsCM):
		return results.ErrorCodeNeedsCM
	}
	return ""
}
