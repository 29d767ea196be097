package point

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/files/outdir"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
)

// update is one thing a role's process did: printed an event, or exited
// (after every event it printed).
type update struct {
	role   int // index into the point's roles
	ev     any
	exited bool
	err    error // Wait's result, when exited
}

// proc is one running node. Its output belongs to one goroutine, which
// decodes stdout into events and forwards them, then the exit, to the
// point's updates channel in the order they happened; the point's loop is
// the only reader of that channel. stop may be called from anywhere.
type proc struct {
	target role.Target
	tool   string // the program when it is not node, e.g. "iperf3"
	// control: it was written a control line, and stops when its stdin
	// ends (node, or node's own command as a tool)
	control bool
	p       remote.Process
	log     *os.File
	tail    *tail
	gone    chan struct{} // closed once the process has exited and its output is drained
	// waitErr is Wait's result, and started node's started event (nil if
	// it printed none); read them only after gone is closed.
	waitErr error
	started *results.Started
	stdout  bytes.Buffer // a tool's whole stdout (at most maxToolStdout)
	// cpu is node run's cpu line of a tool (nil: none); read it only
	// after gone is closed.
	cpu      *results.RunCPU
	stopOnce sync.Once
}

// maxToolStdout bounds what is kept of a tool's stdout: its report
// (iperf3 -J of a long run with every interval is well under it).
const maxToolStdout = 16 << 20

// startProc starts argv on t (through pd, a node already started there,
// when not nil), writes the control line and begins
// forwarding. Stderr, node's events but its intervals, and any stdout
// line that is not an event, go to logPath. started is called from the forwarding goroutine when node
// reports its pid, before the event is forwarded, so a node is recorded
// even while the point is being torn down. Once abandon is closed,
// updates are no longer forwarded.
//
// A tool (a peer such as iperf3, named by tool; "" is node) prints no
// events, and its stdout is kept whole (and logged) for its report
// instead of decoded. control is the line written first (nil: none, for
// a tool that reads none).
func startProc(ctx context.Context, t role.Target, pd remote.Pending, argv []string, tool string, control *results.Control, logPath string,
	idx int, updates chan<- update, abandon <-chan struct{}, started func(*results.Started)) (*proc, error) {
	log, err := outdir.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, outdir.Private)
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	fmt.Fprintf(log, "# %s: %s\n", t.Label, strings.Join(argv, " "))
	start := t.Host.Start
	if pd != nil {
		start = pd.Start
	}
	p, err := start(ctx, argv)
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", programName(tool), err)
	}
	pr := &proc{target: t, tool: tool, control: control != nil, p: p, log: log, tail: newTail(4096), gone: make(chan struct{})}
	if control != nil {
		line, _ := json.Marshal(control)
		// A failed write means node is already gone; its exit tells why.
		_, _ = p.Stdin().Write(append(line, '\n'))
	}

	forward := func(u update) {
		select {
		case updates <- u:
		case <-abandon:
		}
	}
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		if tool != "" {
			pr.cpu = copyToolStderr(p.Stderr(), log, pr.tail)
			return
		}
		_, _ = io.Copy(io.MultiWriter(log, pr.tail), p.Stderr())
	}()
	go func() {
		if tool != "" {
			_, _ = io.Copy(io.MultiWriter(log, &limitedWriter{&pr.stdout, maxToolStdout}), p.Stdout())
		}
		sc := bufio.NewScanner(p.Stdout())
		sc.Buffer(make([]byte, 64<<10), results.MaxEventLine)
		for sc.Scan() {
			ev, err := results.Decode(sc.Bytes())
			if err != nil {
				fmt.Fprintf(log, "# stdout: %s\n", sc.Bytes())
				continue
			}
			// node's own report, kept beside the row it makes (as a peer's
			// is), so a cell can be held to what node said; its intervals
			// are the time series' file.
			if _, iv := ev.(*results.Interval); !iv {
				fmt.Fprintf(log, "%s\n", sc.Bytes())
			}
			if st, ok := ev.(*results.Started); ok && pr.started == nil {
				pr.started = st
				if started != nil {
					started(st)
				}
			}
			forward(update{role: idx, ev: ev})
		}
		// Keep draining so node never blocks on a full pipe.
		_, _ = io.Copy(io.Discard, p.Stdout())
		<-stderrDone
		pr.waitErr = p.Wait()
		close(pr.gone)
		forward(update{role: idx, exited: true, err: pr.waitErr})
	}()
	return pr, nil
}

// copyToolStderr copies the stderr of a tool, which node run ends with
// its cpu line, whole to log, and to tail without that line, so that a
// message quotes the tool's own last words. It returns the cpu line's
// figures, or nil when the last line is none or does not parse. The line
// is found at the end of the last line: a tool whose last words lack a
// newline has node run's line follow them on the same line.
func copyToolStderr(r io.Reader, log, tail io.Writer) *results.RunCPU {
	br := bufio.NewReaderSize(r, 4096)
	var held []byte // the last whole line, kept from tail until another follows
	for {
		chunk, err := br.ReadSlice('\n')
		_, _ = log.Write(chunk)
		if len(chunk) > 0 {
			_, _ = tail.Write(held)
			held = held[:0]
			if err == bufio.ErrBufferFull { // a long line, not node run's
				_, _ = tail.Write(chunk)
			} else {
				held = append(held, chunk...)
			}
		}
		if err != nil && err != bufio.ErrBufferFull {
			break
		}
	}
	before, c, ok, err := results.CutRunCPU(held)
	_, _ = tail.Write(before)
	if !ok || err != nil {
		return nil
	}
	return &c
}

// stop ends the role: close stdin (node exits on EOF), then SIGTERM, then
// SIGKILL, to node's process group, each after grace. It returns once the
// process has exited or every step is spent.
func (pr *proc) stop(grace time.Duration) {
	pr.stopOnce.Do(func() {
		_ = pr.p.Stdin().Close()
		// A tool does not stop on stdin's end: signal it at once. What
		// reads a control line does, and tears down what it set up first.
		if pr.control && pr.waitGone(grace) {
			return
		}
		// An error here means the host is unreachable; the leftover
		// record keeps node for the next exec to reap.
		_ = pr.p.Signal(syscall.SIGTERM)
		if pr.waitGone(grace) {
			return
		}
		_ = pr.p.Signal(syscall.SIGKILL)
		pr.waitGone(grace)
	})
}

func (pr *proc) waitGone(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-pr.gone:
		return true
	case <-t.C:
		return false
	}
}

// reaped reports whether node is known to have exited. A lost connection
// ends the session but not node, which may run on until its deadline: the
// leftover record must keep it for the next exec to reap.
func (pr *proc) reaped() bool {
	select {
	case <-pr.gone:
		return !errors.Is(pr.waitErr, remote.ErrConnectionLost)
	default:
		return false
	}
}

// programName is how messages name a role's program.
func programName(tool string) string {
	if tool == "" {
		return "node"
	}
	return tool
}

// limitedWriter keeps what fits in n bytes of w and drops the rest, so a
// runaway tool cannot fill the runner's memory.
type limitedWriter struct {
	w *bytes.Buffer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if room := l.n - l.w.Len(); room > 0 {
		l.w.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// exitDescription says how a role running program ended, for a one-line
// error.
func exitDescription(program string, err error) string {
	var ee *remote.ExitError
	switch {
	case err == nil:
		return program + " exited"
	case errors.As(err, &ee):
		return program + " " + ee.Error()
	case errors.Is(err, remote.ErrConnectionLost):
		return err.Error() // "connection lost", or why (unanswered keepalives)
	default:
		return err.Error()
	}
}

// diedOfCause reports whether a role's exit came from outside: a signal,
// or its host's connection lost.
func diedOfCause(err error) bool {
	var ee *remote.ExitError
	return errors.As(err, &ee) && ee.Signal != "" || errors.Is(err, remote.ErrConnectionLost)
}

// tail keeps the last n bytes written to it.
type tail struct {
	mu  sync.Mutex
	n   int
	buf []byte
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.n {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.n:]...)
	}
	return len(p), nil
}

// text is all that is kept.
func (t *tail) text() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// lastLine is the last non-empty line, for one-line errors.
func (t *tail) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
