package sweep

import (
	"bufio"
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
	"rdmasweep/runner/remote"
)

// Target is where a role runs: a host and the absolute path of node there.
type Target struct {
	Host     remote.Host
	Label    string // how messages name it: "server (alice@10.0.0.1:22)"
	NodePath string
}

// roleProc is one running node (serve or read) and the goroutines that
// drain its output. Events arrive on events, which is closed at stdout EOF;
// exit receives Wait's result once both streams are drained, and gone is
// closed then.
type roleProc struct {
	target  Target
	proc    remote.Process
	events  chan any
	exit    chan error
	gone    chan struct{}
	tail    *tail
	log     *os.File
	started *results.Started
	// waitErr is Wait's result; read it only after gone is closed.
	waitErr error

	stopOnce sync.Once
}

// startRole starts argv on t, writes the control line and begins draining.
// Stderr, and any stdout line that is not an event, go to logPath.
func startRole(ctx context.Context, t Target, argv []string, control results.Control, logPath string) (*roleProc, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	fmt.Fprintf(log, "# %s: %s\n", t.Label, strings.Join(argv, " "))
	proc, err := t.Host.Start(ctx, argv)
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("start node: %w", err)
	}
	rp := &roleProc{target: t, proc: proc, events: make(chan any, 16), exit: make(chan error, 1), gone: make(chan struct{}), tail: newTail(4096), log: log}
	line, _ := json.Marshal(control)
	// A failed write means node is already gone; its exit tells why.
	_, _ = proc.Stdin().Write(append(line, '\n'))

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(io.MultiWriter(log, rp.tail), proc.Stderr())
	}()
	go func() {
		defer wg.Done()
		defer close(rp.events)
		sc := bufio.NewScanner(proc.Stdout())
		sc.Buffer(make([]byte, 64<<10), results.MaxEventLine)
		for sc.Scan() {
			ev, err := results.Decode(sc.Bytes())
			if err != nil {
				fmt.Fprintf(log, "# stdout: %s\n", sc.Bytes())
				continue
			}
			rp.events <- ev
		}
		// Keep draining so node never blocks on a full pipe.
		_, _ = io.Copy(io.Discard, proc.Stdout())
	}()
	go func() {
		wg.Wait()
		rp.waitErr = proc.Wait()
		rp.exit <- rp.waitErr
		close(rp.gone)
	}()
	return rp, nil
}

// stop ends the role: close stdin (node exits on EOF), then SIGTERM, then
// SIGKILL, to node's process group, each after grace. It returns once the
// process has exited or every step is spent.
func (rp *roleProc) stop(grace time.Duration) {
	rp.stopOnce.Do(func() {
		_ = rp.proc.Stdin().Close()
		if rp.waitExit(grace) {
			return
		}
		// An error here means the host is unreachable; the state file
		// keeps node for the next exec to reap.
		_ = rp.proc.Signal(syscall.SIGTERM)
		if rp.waitExit(grace) {
			return
		}
		_ = rp.proc.Signal(syscall.SIGKILL)
		rp.waitExit(grace)
	})
}

// waitExit waits up to d for the process to exit, draining events.
func (rp *roleProc) waitExit(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-rp.events:
			if !ok {
				rp.events = nil // stdout closed; wait on exit alone
			}
			if st, isStarted := ev.(*results.Started); isStarted && rp.started == nil {
				rp.started = st // needed to kill its process group
			}
		case <-rp.gone:
			return true
		case <-timer.C:
			return false
		}
	}
}

// reaped reports whether node is known to have exited. A lost connection
// ends the session but not node, which may run on until its deadline: the
// state file must keep it for the next exec to reap.
func (rp *roleProc) reaped() bool {
	select {
	case <-rp.gone:
		return !errors.Is(rp.waitErr, remote.ErrConnectionLost)
	default:
		return false
	}
}

func (rp *roleProc) close() {
	rp.log.Close()
}

// exitDescription says how a role ended, for a one-line error.
func exitDescription(err error) string {
	var ee *remote.ExitError
	switch {
	case err == nil:
		return "node exited"
	case errors.As(err, &ee):
		return "node " + ee.Error()
	case errors.Is(err, remote.ErrConnectionLost):
		return err.Error() // "connection lost", or why (unanswered keepalives)
	default:
		return err.Error()
	}
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

// lastLine is the last non-empty line, for one-line errors.
func (t *tail) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// String is the whole tail.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
