package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"rdmasweep/results"

	"golang.org/x/crypto/ssh"
)

// SSHConfig is how to reach one host, as a plan writes it. Zero values
// mean "not written": ssh_config then decides, then the defaults (see
// resolve.go and docs/ssh.md).
type SSHConfig struct {
	// Address is the host name, IP or ssh_config alias.
	Address, User, IdentityFile string
	// Jump is "[user@]host[:port]" (or a comma-separated chain), as
	// OpenSSH's ProxyJump; it may be an ssh_config alias. It replaces
	// ssh_config's ProxyJump and ProxyCommand.
	Jump string
	Port int
	// KnownHosts is the user known_hosts file; "" takes ssh_config's
	// UserKnownHostsFile, else ~/.ssh/known_hosts and known_hosts2. The
	// global files (GlobalKnownHostsFile) are read as well either way.
	KnownHosts string
	// HostKeyPolicy is "strict", "accept-new" or "insecure", as the plan
	// wrote it; "" is not written. It wins over AcceptNewHostKeys, which
	// wins over ssh_config's StrictHostKeyChecking; with none of them a
	// host not in known_hosts is refused, as OpenSSH refuses it in batch
	// mode (see resolve.go, hostKeyPolicy).
	HostKeyPolicy string
	// AcceptNewHostKeys is the runner's --accept-new-host-keys: the policy
	// is accept-new unless HostKeyPolicy says otherwise.
	AcceptNewHostKeys bool
	// ConnectTimeout bounds the TCP connect and the SSH handshake of each
	// hop, retries included (0 = DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// KeepaliveInterval is the time between keepalives: 0 takes
	// ssh_config's ServerAliveInterval, else DefaultKeepaliveInterval; < 0
	// sends none. ServerAliveCountMax unanswered intervals close the
	// connection.
	KeepaliveInterval time.Duration
	// ConfigFile is the one ssh_config to read, as ssh -F; "" reads
	// ~/.ssh/config and then /etc/ssh/ssh_config. Missing is fine.
	ConfigFile string
	// Warn receives messages for a person (a host key added, checking
	// turned off). nil drops them.
	Warn func(msg string)
	// Debug receives what ssh -v would say (an identity file skipped, a
	// retried handshake). nil drops it.
	Debug func(msg string)
	// Passphrase asks for a key's passphrase; nil means there is no
	// terminal, and protected keys ssh-agent lacks are not offered. See
	// TerminalPassphrase.
	Passphrase func(keyFile string) ([]byte, error)
	// Ciphers overrides the cipher list (for benchmarks); nil = defaults.
	Ciphers []string
}

// DefaultConnectTimeout applies when SSHConfig.ConnectTimeout is 0.
const DefaultConnectTimeout = 30 * time.Second

// SSH is a host reached over one SSH connection, reused for every command
// and upload (and more connections only when the host limits sessions per
// connection). It is safe for concurrent use.
type SSH struct {
	name    string
	user    string // the login user, resolved
	machine string // see Machine
	client  *ssh.Client
	hops    []*ssh.Client // jump hosts, nearest first; closed after client

	// redial opens another connection to the host; extras are those
	// opened because the others refused a session (MaxSessions).
	redial func(ctx context.Context) (*ssh.Client, error)
	mu     sync.Mutex // guards extras
	extras []*ssh.Client
	dialMu sync.Mutex // one redial at a time

	closed atomic.Bool // Close was called
	lost   atomic.Bool // the connection died under us
	cause  atomic.Pointer[error]
	// noise is what the login shell printed on stdout before a command
	// ran (a string), if it ever did: it garbles SFTP, see Upload.
	noise    atomic.Value
	done     chan struct{}
	doneOnce sync.Once

	// deployed are the files Upload put on the host, by path, with
	// their sha256: every command that names one is guarded (Guard).
	deployed Deployed
	// shells run Run's commands (ssh_shell.go).
	shells shells
}

var _ Host = (*SSH)(nil)

// gone records that the connection ended; unless Close ended it, it was
// lost, and the other connections to the host go with it.
func (s *SSH) gone() {
	if !s.closed.Load() {
		s.lose(ErrConnectionLost)
	}
	s.doneOnce.Do(func() { close(s.done) })
}

// Name is "user@address:port", the address as the plan wrote it.
func (s *SSH) Name() string { return s.name }

// Machine names the machine the connection reaches, whoever logs in: the
// jump hosts' and the host's resolved address:port (and a ProxyCommand as
// written), without the user. Two users' connections to one sshd have the
// same Machine, so their uploads to one path write one file.
func (s *SSH) Machine() string { return s.machine }

// Close ends the connections to the host and those to jump hosts.
func (s *SSH) Close() error {
	s.closed.Store(true)
	s.shells.shutDown()
	s.mu.Lock()
	for _, c := range s.extras {
		c.Close()
	}
	s.extras = nil
	s.mu.Unlock()
	err := s.client.Close()
	for i := len(s.hops) - 1; i >= 0; i-- {
		s.hops[i].Close()
	}
	s.doneOnce.Do(func() { close(s.done) })
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Run runs argv to completion. Cancelling ctx kills the command's process
// group and returns ctx's error. The shell first prints its pid (which exec
// hands to the command), so the kill works for root logins too, where
// OpenSSH ignores session signals; that line is not part of the output.
//
// Run goes through one of the connection's shells (ssh_shell.go): a
// /bin/sh started once through the login shell, which then runs command
// after command, so a slow login shell (~/.bashrc running pyenv, conda
// or modules) is paid once per connection, not once per command. Where
// no such shell starts, each command gets a session of its own.
func (s *SSH) Run(ctx context.Context, argv []string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	argv = s.deployed.Guard(argv)
	if out, err, ok := s.shells.run(ctx, s, argv); ok {
		return out, err
	}
	return s.runSession(ctx, argv)
}

// runSession runs argv, guarded already, in a session of its own.
func (s *SSH) runSession(ctx context.Context, argv []string) ([]byte, error) {
	sess, err := s.newSession(ctx)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	stdout := &pidWriter{}
	var stderr bytes.Buffer
	sess.Stdout, sess.Stderr = stdout, &stderr
	if err := sess.Start(withPid(argv)); err != nil {
		return nil, s.waitError(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- sess.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		sess.Signal(ssh.SIGKILL)
		if pid := stdout.pid(); pid > 0 {
			kctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			s.runSession(kctx, killGroup(syscall.SIGKILL, pid))
			cancel()
		}
		sess.Close()
		return nil, ctx.Err()
	}
	err = s.waitError(err)
	var ee *ExitError
	if errors.As(err, &ee) {
		ee.Stderr = stderr.Bytes()
		err = refusal(err)
	}
	if noise := stdout.noise(); len(noise) > 0 {
		s.noise.Store(string(noise))
	}
	return stdout.output(), err
}

// pidMarker starts the line the remote shell prints before it execs the
// command: the marker, then its pid, which the command keeps. Whatever the
// login shell's startup files print before it is not the command's output
// and is dropped.
const pidMarker = "\x1frdmasweep-pid:"

// withPid is the remote command line: print the marker and pid, then exec.
func withPid(argv []string) string {
	return `printf '\037rdmasweep-pid:%d\n' $$; ` + ShellCommand(argv)
}

// cutPid finds the marker line in b: the pid, and what follows the line.
// ok is false until the whole line is in.
func cutPid(b []byte) (pid int, rest []byte, ok bool) {
	i := bytes.Index(b, []byte(pidMarker))
	if i < 0 {
		return 0, nil, false
	}
	line, rest, ok := bytes.Cut(b[i+len(pidMarker):], []byte("\n"))
	if !ok {
		return 0, nil, false
	}
	pid, err := strconv.Atoi(string(line))
	if err != nil || pid <= 1 {
		return 0, nil, false
	}
	return pid, rest, true
}

// pidWriter collects a Run's stdout, which starts with the pid line.
type pidWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *pidWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// pid is the command's pid once its line is complete, else 0.
func (w *pidWriter) pid() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	pid, _, _ := cutPid(w.buf.Bytes())
	return pid
}

// noise is what came before the pid line: the login shell's own output.
func (w *pidWriter) noise() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.buf.Bytes()
	if i := bytes.Index(b, []byte(pidMarker)); i > 0 {
		return bytes.Clone(b[:i])
	}
	return nil
}

// output is the command's stdout: what follows the pid line.
func (w *pidWriter) output() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, rest, _ := cutPid(w.buf.Bytes())
	return rest
}

// maxStartupNoise bounds what a login shell may print before the pid line.
const maxStartupNoise = 64 << 10

// Start starts argv in a new session, which makes it lead its own
// process group (sshd gives each session one, and exec keeps the shell's).
// The shell first prints its pid, which becomes the process's; Start
// returns once that line is in, so Signal can always reach the group.
// ctx only guards the start.
func (s *SSH) Start(ctx context.Context, argv []string) (Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	argv = s.deployed.Guard(argv)
	sess, err := s.newSession(ctx)
	if err != nil {
		return nil, err
	}
	p := &sshProcess{s: s, sess: sess}
	var stdout io.Reader
	if p.stdin, err = sess.StdinPipe(); err == nil {
		if stdout, err = sess.StdoutPipe(); err == nil {
			p.stderr, err = sess.StderrPipe()
		}
	}
	if err != nil {
		sess.Close()
		return nil, fmt.Errorf("open session pipes: %w", err)
	}
	if err := sess.Start(withPid(argv)); err != nil {
		sess.Close()
		return nil, s.waitError(err)
	}
	// Read up to the pid line, a byte at a time so nothing of the
	// command's own output is consumed.
	got := make(chan error, 1)
	go func() {
		var seen []byte
		one := make([]byte, 1)
		for len(seen) < maxStartupNoise {
			if _, err := io.ReadFull(stdout, one); err != nil {
				got <- err
				return
			}
			seen = append(seen, one[0])
			if one[0] == '\n' {
				if pid, _, ok := cutPid(seen); ok {
					p.pid = pid
					if i := bytes.Index(seen, []byte(pidMarker)); i > 0 {
						s.noise.Store(string(seen[:i]))
					}
					got <- nil
					return
				}
			}
		}
		got <- fmt.Errorf("the login shell printed %d bytes and no pid line; keep its startup files quiet", len(seen))
	}()
	select {
	case err = <-got:
	case <-ctx.Done():
		sess.Close()
		return nil, ctx.Err()
	}
	if err != nil {
		sess.Close()
		switch {
		case s.lost.Load():
			return nil, s.lostErr()
		case errors.Is(err, io.EOF):
			return nil, fmt.Errorf("start %s: the session ended before the command ran; does the login shell work?", argv[0])
		}
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	p.stdout = stdout
	return p, nil
}

// waitError maps the ssh library's errors to the Host contract's.
func (s *SSH) waitError(err error) error {
	var ee *ssh.ExitError
	var missing *ssh.ExitMissingError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		if sig := ee.Signal(); sig != "" {
			return &ExitError{Status: -1, Signal: strings.TrimPrefix(sig, "SIG")}
		}
		return &ExitError{Status: ee.ExitStatus()}
	case s.lost.Load():
		return s.lostErr()
	case errors.As(err, &missing), errors.Is(err, io.EOF):
		return ErrConnectionLost
	}
	return err
}

type sshProcess struct {
	waited atomic.Bool // Wait has returned
	s      *SSH
	sess   *ssh.Session
	pid    int // the remote process, which leads its process group
	stdin  io.WriteCloser
	stdout io.Reader
	stderr io.Reader
}

func (p *sshProcess) Stdin() io.WriteCloser { return p.stdin }
func (p *sshProcess) Stdout() io.Reader     { return p.stdout }
func (p *sshProcess) Stderr() io.Reader     { return p.stderr }

// signalTimeout bounds the kill(1) command Signal may run.
const signalTimeout = 10 * time.Second

// Signal delivers sig to the process group. OpenSSH 7.9 and later deliver
// a session signal to the group (killpg), but not for root logins: sshd
// skips post-auth privilege separation for root and then drops the
// request ("session signalling requires privilege separation") without
// telling the client. For root, and for SIGKILL always, the group is
// signalled by pid over a second session; that also works before the
// process has said anything.
func (p *sshProcess) Signal(sig os.Signal) error {
	name, ok := sshSignals[sig]
	if !ok {
		return fmt.Errorf("signal %v: cannot be sent over ssh", sig)
	}
	if p.waited.Load() {
		return nil // ended: nothing to signal, and its pid may be reused
	}
	if p.s.user != "root" {
		if err := p.sess.Signal(name); err != nil {
			if errors.Is(err, io.EOF) && !p.s.lost.Load() {
				return nil // the session has ended with its process
			}
			return p.s.waitError(err)
		}
		if sig != syscall.SIGKILL {
			return nil
		}
		// SIGKILL is the last resort: also over a second session, which
		// does not depend on this one's channel or on sshd's signalling.
	}
	ctx, cancel := context.WithTimeout(context.Background(), signalTimeout)
	defer cancel()
	if _, err := p.s.Run(ctx, killGroup(sig.(syscall.Signal), p.pid)); err != nil {
		var ee *ExitError
		if errors.As(err, &ee) && ee.Status == 1 {
			return nil // already gone: kill(1) found no such group
		}
		return fmt.Errorf("kill -%s process group %d: %w", name, p.pid, err)
	}
	return nil
}

func (p *sshProcess) Wait() error {
	err := p.sess.Wait()
	p.waited.Store(true)
	p.sess.Close()
	return p.s.waitError(err)
}

// killGroup is the remote command that sends sig to the process group pid
// leads, or to pid alone where the server did not make it a group leader
// (Dropbear runs a command without setsid). It exits 1 when neither exists.
func killGroup(sig syscall.Signal, pid int) []string {
	// Numbers, and no "--": dash's builtin kill, /bin/sh on Debian,
	// refuses "kill -KILL -- -PID" ("Illegal number: -"), and a fallback
	// to the pid alone would then leave the group's other processes.
	n, p := strconv.Itoa(int(sig)), strconv.Itoa(pid)
	return []string{"sh", "-c", "kill -" + n + " -" + p + " 2>/dev/null || kill -" + n + " " + p + " 2>/dev/null"}
}

var sshSignals = map[os.Signal]ssh.Signal{
	syscall.SIGABRT: ssh.SIGABRT, syscall.SIGALRM: ssh.SIGALRM, syscall.SIGFPE: ssh.SIGFPE,
	syscall.SIGHUP: ssh.SIGHUP, syscall.SIGILL: ssh.SIGILL, syscall.SIGINT: ssh.SIGINT,
	syscall.SIGKILL: ssh.SIGKILL, syscall.SIGPIPE: ssh.SIGPIPE, syscall.SIGQUIT: ssh.SIGQUIT,
	syscall.SIGSEGV: ssh.SIGSEGV, syscall.SIGTERM: ssh.SIGTERM, syscall.SIGUSR1: ssh.SIGUSR1,
	syscall.SIGUSR2: ssh.SIGUSR2,
}

// ShellCommand is the remote command line for argv: "exec" and every
// argument single-quoted where needed, so the login shell neither splits
// nor expands anything and the program replaces it (keeping its pid and
// process group).
func ShellCommand(argv []string) string {
	var b strings.Builder
	b.WriteString("exec")
	for _, a := range argv {
		b.WriteByte(' ')
		b.WriteString(shellQuote(a))
	}
	return b.String()
}

func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ListenLoopback listens on the host's loopback, on a port its sshd picks,
// and hands the runner each connection made to it there (a remote
// forward, ssh -R 0:…). A process on the host reaches the runner so with
// no route back to it, through jump hosts too. It needs the host's sshd
// to allow TCP forwarding (AllowTcpForwarding, on by default).
func (s *SSH) ListenLoopback() (net.Listener, error) {
	ln, err := s.client.Listen(results.Network, "127.0.0.1:0")
	if err != nil {
		if s.lost.Load() {
			return nil, s.lostErr()
		}
		return nil, fmt.Errorf("listen on the host's loopback through ssh (sshd's AllowTcpForwarding?): %w", err)
	}
	return ln, nil
}
