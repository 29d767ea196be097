// Package clitest runs a command-line program the way a person does, for
// tests that judge it only by what a person can see afterwards: its exit
// code, stdout and stderr, the CSV it wrote, the table it printed, and
// the node processes it left on the hosts.
//
// Every helper takes the test and fails it, with the program's stderr,
// when something does not come in time; none of them decides what the
// program should have done.
package clitest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Result is a finished run.
type Result struct {
	Code           int // the exit code; -1 when a signal killed it
	Stdout, Stderr string
}

// Run runs bin with args in dir, with env (nil: this process's), and
// waits at most timeout, then fails the test.
func Run(t testing.TB, bin, dir string, env []string, timeout time.Duration, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %s still running after %v\nstderr:\n%s", bin, strings.Join(args, " "), timeout, stderr.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return Result{code, stdout.String(), stderr.String()}
}

// Proc is a program started in the background, to be watched or hurt
// while it runs. The test's cleanup kills it if it is still running.
type Proc struct {
	cmd            *exec.Cmd
	stdout, stderr lockedBuffer
	done           chan struct{}
	code           int // valid once done is closed
}

// Start starts bin with args in dir, with env (nil: this process's).
func Start(t testing.TB, bin, dir string, env []string, args ...string) *Proc {
	t.Helper()
	p := &Proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Dir, p.cmd.Env = dir, env
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			p.code = ee.ExitCode()
		} else if err != nil {
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// Stdout and Stderr are what the program printed so far.
func (p *Proc) Stdout() string { return p.stdout.String() }
func (p *Proc) Stderr() string { return p.stderr.String() }

// Signal sends sig to the program.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill kills the program with SIGKILL and waits for it to be gone.
func (p *Proc) Kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// Exited reports whether the program has ended, and its exit code then.
func (p *Proc) Exited() (code int, exited bool) {
	select {
	case <-p.done:
		return p.code, true
	default:
		return 0, false
	}
}

// Wait returns the exit code, failing the test (and killing the program)
// if it runs past timeout.
func (p *Proc) Wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		p.Kill()
		t.Fatalf("still running after %v\nstderr:\n%s", timeout, p.Stderr())
		return 0
	}
}

// WaitStderr waits until the program's stderr holds s, and returns when.
func (p *Proc) WaitStderr(t testing.TB, s string, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.Stderr(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q on stderr within %v:\n%s", s, timeout, p.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Now()
}

// Until polls ok until it holds, failing the test when p exits first or
// timeout passes; what names what was awaited.
func (p *Proc) Until(t testing.TB, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		// ok is asked again after the exit is seen: the program may
		// have done what ok waits for, or exited as ok allows, after
		// the call above.
		if code, exited := p.Exited(); exited {
			if ok() {
				return
			}
			t.Fatalf("exited (%d) before %s\n%s", code, what, p.Stderr())
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v\n%s", what, timeout, p.Stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lockedBuffer collects a running program's output for polling.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// SSHEnv is this process's environment with a temporary HOME (so the ~/.ssh
// of whoever runs the tests is not read) and no ssh-agent.
func SSHEnv(t testing.TB) []string {
	t.Helper()
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "SSH_AUTH_SOCK=") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+home, "SSH_AUTH_SOCK=")
}
