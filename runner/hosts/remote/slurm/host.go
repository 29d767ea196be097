package slurm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"time"

	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/remote/agent"
)

// HostOptions shape the steps of one Host.
type HostOptions struct {
	// CPUs pins every step's task to these CPUs of the node: a
	// taskset-style list ("0-3,8"), given to srun as --cpu-bind (see
	// CPUBind). "" leaves the task on all of the job's CPUs on the node.
	CPUs string
	// Log receives the lines srun and slurmstepd write about a step (e.g.
	// "srun: error: n1: task 0: Exited with exit code 3"), which are taken
	// out of the command's stderr. nil drops them.
	Log func(line string)
}

// Host is one node of the allocation. It holds no connection: each
// command is a job step of its own. It is safe for concurrent use.
type Host struct {
	a    *Allocation
	node string
	bind string
	log  func(string)

	pool *agent.Pool // node attach --loop steps (attach.go)

	mu     sync.Mutex
	closed bool
	procs  map[*process]bool // started and not yet seen to end
}

var _ remote.Host = (*Host)(nil)

// Host returns node as a remote.Host. The node must be in the allocation.
func (a *Allocation) Host(node string, opts HostOptions) (*Host, error) {
	if m := a.Missing(node); m != nil {
		return nil, fmt.Errorf("node %q is not in slurm job %s (its nodes: %s)", node, a.JobID, strings.Join(a.nodes, ", "))
	}
	h := &Host{a: a, node: node, log: opts.Log, procs: map[*process]bool{}}
	h.pool = agent.NewPool(launcher{h}, &a.tokens)
	if opts.CPUs != "" {
		bind, err := CPUBind(opts.CPUs)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", node, err)
		}
		h.bind = bind
	}
	return h, nil
}

// Name is the node's name, as Slurm knows it.
func (h *Host) Name() string { return h.node }

// ErrClosed is a command on a Host after Close.
var ErrClosed = errors.New("slurm host closed")

// launch starts argv as a step on the node; env is added to the step's
// environment. An argv that names a file the allocation deployed is
// guarded: the step checks the file before it runs argv.
func (h *Host) launch(ctx context.Context, argv []string, stdin bool, env ...string) (*process, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	h.mu.Unlock()
	argv = h.a.deployed.Guard(argv)
	p, err := h.a.launch(ctx, stepSpec{nodes: []string{h.node}, bind: h.bind, argv: argv, stdin: stdin, env: env, log: h.log})
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if h.closed { // Close ran meanwhile and did not see p
		h.mu.Unlock()
		p.stop()
		return nil, ErrClosed
	}
	h.procs[p] = true
	h.mu.Unlock()
	go func() {
		<-p.exited
		h.mu.Lock()
		delete(h.procs, p)
		h.mu.Unlock()
	}()
	return p, nil
}

// Start starts argv as a step on the node, with stdin, stdout and stderr
// through srun, and returns once the command runs. Cancelling ctx stops
// only the start; after that the caller owns the process.
func (h *Host) Start(ctx context.Context, argv []string) (remote.Process, error) {
	return h.launch(ctx, argv, true)
}

// Run runs argv as a step on the node to completion, with no stdin.
// Cancelling ctx cancels the step and returns ctx's error.
func (h *Host) Run(ctx context.Context, argv []string) ([]byte, error) {
	return h.run(ctx, argv)
}

func (h *Host) run(ctx context.Context, argv []string) ([]byte, error) {
	p, err := h.launch(ctx, argv, false)
	if err != nil {
		return nil, err
	}
	out, err := p.collect(ctx)
	return out, remote.Refusal(err)
}

// collect reads a started step's stdout and stderr to the end and waits
// for it; ctx's end stops the step.
func (p *process) collect(ctx context.Context) ([]byte, error) {
	var stdout, stderr strings.Builder
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); io.Copy(&stdout, p.stdout) }()
	go func() { defer wg.Done(); io.Copy(&stderr, p.stderr) }()
	select {
	case <-p.done:
	case <-ctx.Done():
		p.stop()
		p.stdout.close()
		p.stderr.Close()
		<-p.done
		wg.Wait()
		return nil, ctx.Err()
	}
	wg.Wait()
	var ee *remote.ExitError
	if errors.As(p.err, &ee) {
		ee.Stderr = []byte(stderr.String())
	}
	return []byte(stdout.String()), p.err
}

// idleExitWait bounds how long Close waits for an idle node attach to
// end by itself before it cancels its step.
const idleExitWait = 2 * time.Second

// closeWait bounds how long Close waits for squeue to stop listing a
// cancelled step.
const closeWait = 30 * time.Second

// Close cancels every step this Host started that still runs, waits for
// their srun to exit and for squeue to stop listing them. Their stdin,
// stdout and stderr are closed. Later commands fail with ErrClosed.
func (h *Host) Close() error {
	// An idle node attach ends by itself, with status 0 and nothing for
	// srun to report, once its token is withdrawn and its connection
	// closed; the steps still running after that are stopped below.
	h.pool.Close(idleExitWait, nil)
	h.mu.Lock()
	h.closed = true
	live := maps.Clone(h.procs)
	h.mu.Unlock()
	remote.EndAll(live, func(p *process) {
		if in := p.Stdin(); in != nil {
			in.Close()
		}
		p.stop()
		p.stdout.close()
		p.stderr.Close()
	})
	if len(live) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	for {
		steps, err := h.a.Steps(ctx)
		if err != nil {
			return fmt.Errorf("close %s: %w", h.node, err)
		}
		var left []string
		for _, s := range steps {
			for p := range live {
				if s == p.step {
					left = append(left, s)
				}
			}
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("close %s: steps %s still listed by squeue after %v", h.node, strings.Join(left, ", "), closeWait)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
