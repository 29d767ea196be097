package remote

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"rdmasweep/internal/atomicfile"
)

// Local is this machine. Commands run directly, without a shell.
type Local struct{}

var _ Host = Local{}

// Name is "local".
func (Local) Name() string { return "local" }

// Run runs argv and returns its stdout. Cancelling ctx kills the
// command's whole process group, as SSH's Run does, so nothing it started
// outlives it.
func (Local) Run(ctx context.Context, argv []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out, exitError(ee.ProcessState, stderr.Bytes())
		}
		return out, err
	}
	return out, nil
}

// Start starts argv in its own process group, as sshd would, so the whole
// group can be killed by its pgid.
func (Local) Start(ctx context.Context, argv []string) (Process, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &localProcess{cmd: cmd, stdin: stdin, stdout: stdout, stderr: stderr}, nil
}

// Upload copies local to remote atomically; for a Local host this is only
// used by tests, since local roles run node.binary in place.
func (Local) Upload(ctx context.Context, local, remote string) (UploadResult, error) {
	if !filepath.IsAbs(remote) {
		return UploadResult{}, fmt.Errorf("remote path %q is not absolute", remote)
	}
	src, err := os.ReadFile(local)
	if err != nil {
		return UploadResult{}, err
	}
	if cur, err := os.ReadFile(remote); err == nil && sha256.Sum256(cur) == sha256.Sum256(src) {
		return UploadResult{UpToDate: true}, nil
	}
	if err := os.MkdirAll(filepath.Dir(remote), 0o755); err != nil {
		return UploadResult{}, err
	}
	err = atomicfile.Write(remote, 0o755, func(w io.Writer) error {
		_, err := w.Write(src)
		return err
	})
	if err != nil {
		return UploadResult{}, err
	}
	return UploadResult{BytesSent: int64(len(src))}, nil
}

// Close does nothing: there is no connection.
func (Local) Close() error { return nil }

type localProcess struct {
	waited atomic.Bool // Wait has reaped it: its pgid may be reused
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Reader
	stderr io.Reader
}

func (p *localProcess) Stdin() io.WriteCloser { return p.stdin }
func (p *localProcess) Stdout() io.Reader     { return p.stdout }
func (p *localProcess) Stderr() io.Reader     { return p.stderr }

// Signal signals the process group. After the process has ended it does
// nothing, as SSH's does: once reaped, its group id may be another's.
func (p *localProcess) Signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("signal %v: not a syscall.Signal", sig)
	}
	if p.waited.Load() {
		return nil
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, s); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}

func (p *localProcess) Wait() error {
	err := p.cmd.Wait()
	p.waited.Store(true)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return exitError(ee.ProcessState, nil)
	}
	return err
}

func exitError(ps *os.ProcessState, stderr []byte) *ExitError {
	e := &ExitError{Status: ps.ExitCode(), Stderr: stderr}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Status = -1
		e.Signal = signalName(ws.Signal())
	}
	return e
}

// signalName gives the name OpenSSH uses in exit-signal ("KILL", "TERM").
func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGKILL: "KILL", syscall.SIGTERM: "TERM", syscall.SIGINT: "INT",
		syscall.SIGHUP: "HUP", syscall.SIGSEGV: "SEGV", syscall.SIGABRT: "ABRT",
		syscall.SIGPIPE: "PIPE", syscall.SIGQUIT: "QUIT", syscall.SIGBUS: "BUS",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("%d", int(s))
}
