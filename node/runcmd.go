package main

// node run: a peer tool (ib_read_bw, iperf3, fio) run as node's child, so
// that its CPU is measured as node's own is, from its processes' rusage.
// The rules:
//
//   - Stdout and stderr are the command's, the same descriptors, untouched.
//     Once it has exited, node adds one line to stderr: its CPU
//     (results.RunCPU), user + sys of it and of every descendant it
//     waited for, over the wall time from its start to its exit.
//   - The exit status is the command's. Killed by a signal, node dies of
//     the same one (reraisable), or exits 128+N as a shell reports it.
//   - The command never outlives node: it stays in node's process group,
//     so a kill of the group reaches both; it gets SIGKILL when node dies
//     (Pdeathsig); and it gets SIGTERM, then SIGKILL after runStopGrace,
//     when node is told to stop (SIGINT, SIGTERM), at --deadline, and
//     under --stop-on-eof when stdin ends (the runner's connection).
//   - Under node attach it runs only the peers' programs and node itself
//     (attachedProgram): the runner asks for nothing else.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"rdmasweep/node/session"
	"rdmasweep/results"
)

// runStopGrace is how long a command has to exit after SIGTERM before
// node run sends SIGKILL.
const runStopGrace = 2 * time.Second

const runUsage = "usage: node run [--deadline DUR] [--stop-on-eof] [--] COMMAND [ARG...]"

// exitCode is a status node exits with that the command node run ran
// exited with; the command has said why itself, so node prints nothing.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("the command exited with status %d", int(c)) }

// reraise ends node by sig when the command it ran died of sig, so that
// whoever started node sees the same end; main sets it. It is nil in
// tests that call run in-process: node run then returns 128+sig.
var reraise func(sig syscall.Signal)

// reraisable are the signals node run dies of when its command did: the
// ones a runner or a person sends.
var reraisable = []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGKILL}

func reraiseSignal(sig syscall.Signal) {
	signal.Reset(sig)
	_ = unix.Kill(unix.Getpid(), sig)
	time.Sleep(time.Second) // delivery is asynchronous; the status follows if it fails
}

func runRun(ctx context.Context, e *env, args []string) error {
	e.out = session.NewPrinter(e.stdout, e.stderr, "text") // stdout is the command's
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	deadline := fs.Duration("deadline", 0, "stop the command after this long (SIGTERM, then SIGKILL) and fail (0: never)")
	stopOnEOF := fs.Bool("stop-on-eof", false, "stop the command when stdin ends; the command's stdin is then /dev/null")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return helpText(runUsage + "\n" + flagUsage(fs))
		}
		return usagef("run: %v (%s)", err, runUsage)
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return usagef("run: no command (%s)", runUsage)
	}
	if e.attached {
		if err := attachedProgram(argv); err != nil {
			return err
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = e.stdout, e.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var eof chan struct{}
	if *stopOnEOF {
		eof = make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, e.stdin); close(eof) }()
	} else {
		cmd.Stdin = e.stdin
	}
	started, exited := spawn(cmd)
	if err := <-started; err != nil {
		return fmt.Errorf("run: start %s: %w", argv[0], err)
	}
	end, why := superviseChild(ctx, cmd.Process, exited, *deadline, eof)
	return childEnd(e, argv[0], end, why)
}

// childExit is how a command ended and how long it ran.
type childExit struct {
	state *os.ProcessState
	wall  time.Duration
}

// spawn starts cmd and waits for it on a goroutine locked to its OS
// thread until the child is reaped: Pdeathsig fires when the thread that
// forked the child ends, not the process, and the Go runtime may end an
// idle thread.
func spawn(cmd *exec.Cmd) (<-chan error, <-chan childExit) {
	started, exited := make(chan error, 1), make(chan childExit, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start := time.Now()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait() // the state says how it ended
		exited <- childExit{cmd.ProcessState, time.Since(start)}
	}()
	return started, exited
}

// superviseChild waits for p to exit, stopping it when ctx ends, at the
// deadline (0: none) or when eof is closed (nil: never). why is the
// deadline's error when that stopped it.
func superviseChild(ctx context.Context, p *os.Process, exited <-chan childExit, deadline time.Duration, eof <-chan struct{}) (childExit, error) {
	var why error
	var deadlineC, killC <-chan time.Time
	if deadline > 0 {
		t := time.NewTimer(deadline)
		defer t.Stop()
		deadlineC = t.C
	}
	done := ctx.Done()
	stop := func() {
		done, deadlineC, eof = nil, nil, nil // once
		_ = p.Signal(syscall.SIGTERM)
		killC = time.After(runStopGrace)
	}
	for {
		select {
		case end := <-exited:
			return end, why
		case <-done:
			stop()
		case <-eof:
			stop()
		case <-deadlineC:
			why = fmt.Errorf("deadline of %s reached: stopped", deadline)
			stop()
		case <-killC:
			killC = nil
			_ = p.Kill()
		}
	}
}

// childEnd reports the command's CPU on stderr and turns how it ended
// into node's error.
func childEnd(e *env, name string, end childExit, why error) error {
	cpu := results.RunCPU{CPUWallS: end.wall.Seconds()}
	if ru, ok := end.state.SysUsage().(*syscall.Rusage); ok {
		cpu.CPUUserS = tvSeconds(ru.Utime)
		cpu.CPUSysS = tvSeconds(ru.Stime)
	}
	_, _ = e.stderr.Write(cpu.Line())
	if why != nil {
		return fmt.Errorf("run: %w %s", why, name)
	}
	ws, _ := end.state.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		sig := ws.Signal()
		for _, r := range reraisable {
			if r == sig && reraise != nil {
				reraise(sig)
			}
		}
		return exitCode(128 + int(sig))
	case ws.ExitStatus() != 0:
		return exitCode(ws.ExitStatus())
	}
	return nil
}

func tvSeconds(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }
