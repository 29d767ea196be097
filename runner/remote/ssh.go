package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// SSHConfig is how to reach one host, as a plan writes it. Zero values
// mean "not written": ssh_config then decides, then the defaults.
type SSHConfig struct {
	// Address is the host name, IP or ssh_config alias.
	Address, User, IdentityFile string
	// Jump is "[user@]host[:port]" (or a comma-separated chain), as
	// OpenSSH's ProxyJump; it may be an ssh_config alias.
	Jump string
	Port int
	// KnownHosts is the known_hosts file ("" = ~/.ssh/known_hosts).
	KnownHosts string
	// HostKeyPolicy is "strict", "accept-new" ("" means this) or "insecure".
	HostKeyPolicy string
	// ConnectTimeout bounds the TCP connect and the SSH handshake of each
	// hop (0 = DefaultConnectTimeout). KeepaliveInterval is the time
	// between keepalives (0 = none); a reply not come by the next one
	// closes the connection.
	ConnectTimeout, KeepaliveInterval time.Duration
	// ConfigFile is the ssh_config to read ("" = ~/.ssh/config; missing
	// is fine).
	ConfigFile string
	// Warn receives messages for a person (a host key added, checking
	// turned off). nil drops them.
	Warn func(msg string)
	// Ciphers overrides the cipher list (for benchmarks); nil = defaults.
	Ciphers []string
}

// DefaultConnectTimeout applies when SSHConfig.ConnectTimeout is 0.
const DefaultConnectTimeout = 30 * time.Second

// SSH is a host reached over one SSH connection, reused for every command
// and upload. It is safe for concurrent use.
type SSH struct {
	name   string
	user   string // the login user, resolved
	client *ssh.Client
	hops   []*ssh.Client // jump hosts, nearest first; closed after client

	closed atomic.Bool // Close was called
	lost   atomic.Bool // the connection died under us
	// noise is what the login shell printed on stdout before a command
	// ran (a string), if it ever did: it garbles SFTP, see Upload.
	noise    atomic.Value
	done     chan struct{}
	doneOnce sync.Once
}

var _ Host = (*SSH)(nil)

// target is one hop after ssh_config and the plan are merged.
type target struct {
	host       string // what to connect to
	port       int
	user       string
	identities []string
	proxyJump  string // its own ssh_config ProxyJump; followed for a first hop
}

func (t target) addr() string { return net.JoinHostPort(t.host, strconv.Itoa(t.port)) }

// DialSSH connects to the host cfg describes, through any jump hosts, and
// authenticates. ctx bounds the whole dial; the connection then lives
// until Close whatever happens to ctx.
func DialSSH(ctx context.Context, cfg SSHConfig) (*SSH, error) {
	if cfg.Address == "" {
		return nil, errors.New("ssh: no address")
	}
	e, err := lookupSSHConfig(cfg.Address, cfg.User, cfg.ConfigFile)
	if err != nil {
		return nil, err
	}
	tgt, err := resolveTarget(cfg.Address, cfg.User, cfg.Port, cfg.IdentityFile, e)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s@%s:%d", tgt.user, cfg.Address, tgt.port)
	warn := cfg.Warn
	if warn == nil {
		warn = func(string) {}
	}
	jump := cfg.Jump
	if jump == "" {
		jump = e.ProxyJump
	}
	hops, err := resolveJumps(jump, cfg.ConfigFile, tgt.identities, 0)
	if err != nil {
		return nil, err
	}

	known := cfg.KnownHosts
	if known == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("find known_hosts: %w", err)
		}
		known = home + "/.ssh/known_hosts"
	}
	known = expandTilde(known)
	hk, err := newHostKeys(known, cfg.HostKeyPolicy, warn)
	if err != nil {
		return nil, err
	}
	if hk.policy == PolicyInsecure {
		warn(fmt.Sprintf("host key checking is OFF for %s (host_key_policy: insecure): anyone on the network path can impersonate it", name))
	}
	timeout := cfg.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}

	s := &SSH{name: name, user: tgt.user, done: make(chan struct{})}
	var prev *ssh.Client
	for i, t := range append(hops, tgt) {
		c, err := dialHop(ctx, prev, t, hk, timeout, cfg.Ciphers)
		if err != nil {
			for j := len(s.hops) - 1; j >= 0; j-- {
				s.hops[j].Close()
			}
			if i < len(hops) {
				return nil, fmt.Errorf("jump host %s@%s: %w", t.user, t.addr(), err)
			}
			return nil, err
		}
		if i < len(hops) {
			s.hops = append(s.hops, c)
		} else {
			s.client = c
		}
		prev = c
	}
	go func() {
		s.client.Wait()
		s.gone()
	}()
	if cfg.KeepaliveInterval > 0 {
		go s.keepalive(cfg.KeepaliveInterval)
	}
	return s, nil
}

// resolveTarget merges the plan's fields over ssh_config's: a field the
// plan wrote wins, one it left out takes ssh_config's, then the default.
func resolveTarget(address, planUser string, planPort int, planIdentity string, e sshConfigEntry) (target, error) {
	t := target{host: address, port: 22, user: planUser}
	if e.HostName != "" {
		t.host = e.HostName
	}
	switch {
	case planPort != 0:
		t.port = planPort
	case e.Port != "":
		p, err := strconv.Atoi(e.Port)
		if err != nil || p <= 0 || p > 65535 {
			return t, fmt.Errorf("ssh_config Port %q for %s: not a port", e.Port, address)
		}
		t.port = p
	}
	if t.user == "" {
		t.user = e.User
	}
	if t.user == "" {
		u, err := user.Current()
		if err != nil {
			return t, fmt.Errorf("find the local user name: %w", err)
		}
		t.user = u.Username
	}
	if planIdentity != "" {
		t.identities = []string{expandTilde(planIdentity)}
	} else {
		for _, id := range e.IdentityFiles {
			t.identities = append(t.identities, expandIdentity(id, t, address))
		}
	}
	t.proxyJump = e.ProxyJump
	return t, nil
}

// maxJumpDepth bounds how deep first hops' own ProxyJumps are followed,
// so a loop in ssh_config ends in an error rather than forever.
const maxJumpDepth = 8

// resolveJumps turns a ProxyJump value (a comma-separated chain, or
// "none") into hops, in dialling order. As with OpenSSH, the first hop is
// reached by its own ssh_config ProxyJump, if it has one; the later hops
// are reached through the hop before them.
func resolveJumps(jump, configFile string, identities []string, depth int) ([]target, error) {
	if jump == "" || jump == "none" {
		return nil, nil
	}
	if depth >= maxJumpDepth {
		return nil, fmt.Errorf("jump host %q: ProxyJump nested more than %d deep; is there a loop in ssh_config?", jump, maxJumpDepth)
	}
	var hops []target
	for _, spec := range strings.Split(jump, ",") {
		h, err := resolveJump(strings.TrimSpace(spec), configFile, identities)
		if err != nil {
			return nil, fmt.Errorf("jump host %q: %w", spec, err)
		}
		hops = append(hops, h)
	}
	before, err := resolveJumps(hops[0].proxyJump, configFile, identities, depth+1)
	if err != nil {
		return nil, err
	}
	return append(before, hops...), nil
}

// resolveJump parses one ProxyJump hop, "[user@]host[:port]", looking the
// host up in ssh_config (resolveJumps follows its own ProxyJump). A hop
// with no identity file of its own uses the target's.
func resolveJump(spec, configFile string, identities []string) (target, error) {
	u, hp, ok := strings.Cut(spec, "@")
	if !ok {
		hp, u = u, ""
	}
	host, port := hp, 0
	if h, p, err := net.SplitHostPort(hp); err == nil {
		host = h
		n, err := strconv.Atoi(p)
		if err != nil {
			return target{}, fmt.Errorf("port %q: not a number", p)
		}
		port = n
	}
	if host == "" {
		return target{}, errors.New("no host")
	}
	e, err := lookupSSHConfig(host, u, configFile)
	if err != nil {
		return target{}, err
	}
	t, err := resolveTarget(host, u, port, "", e)
	if err != nil {
		return target{}, err
	}
	if len(t.identities) == 0 {
		t.identities = identities
	}
	return t, nil
}

// dialHop connects to t, directly or through via, and completes the SSH
// handshake, all within timeout and ctx.
func dialHop(ctx context.Context, via *ssh.Client, t target, hk *hostKeys, timeout time.Duration, ciphers []string) (*ssh.Client, error) {
	addr := t.addr()
	keys, err := loadKeys(t.identities)
	if err != nil {
		return nil, err
	}
	defer keys.close()
	algos, err := hk.algorithms(addr)
	if err != nil {
		return nil, err
	}
	cc := &ssh.ClientConfig{
		User:              t.user,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(keys.signers...)},
		HostKeyCallback:   hk.check,
		HostKeyAlgorithms: algos,
		Timeout:           timeout,
	}
	cc.Ciphers = ciphers

	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var conn net.Conn
	if via == nil {
		conn, err = (&net.Dialer{}).DialContext(dctx, "tcp", addr)
	} else {
		conn, err = via.DialContext(dctx, "tcp", addr)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("connect to %s: %w", addr, ctx.Err())
		}
		var ne net.Error
		if dctx.Err() != nil || errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("connect to %s: timed out after %v", addr, timeout)
		}
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}

	// The handshake gets what is left of the timeout. Closing the conn is
	// the one way to stop it that works for direct and jumped conns alike
	// (an ssh channel has no deadlines); why records the first reason.
	var why atomic.Pointer[error]
	stopTimer := time.AfterFunc(timeout-time.Since(start), func() {
		e := fmt.Errorf("ssh handshake with %s: timed out after %v (no SSH server answering?)", addr, timeout)
		why.CompareAndSwap(nil, &e)
		conn.Close()
	})
	stopCtx := context.AfterFunc(ctx, func() {
		e := fmt.Errorf("ssh handshake with %s: %w", addr, ctx.Err())
		why.CompareAndSwap(nil, &e)
		conn.Close()
	})
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cc)
	stopTimer.Stop()
	stopCtx()
	if w := why.Load(); w != nil {
		if err == nil {
			c.Close()
		}
		return nil, *w
	}
	if err != nil {
		conn.Close()
		var changed *HostKeyChangedError
		var unknown *UnknownHostError
		switch {
		case errors.As(err, &changed):
			return nil, changed
		case errors.As(err, &unknown):
			return nil, unknown
		case strings.Contains(err.Error(), "unable to authenticate"):
			return nil, fmt.Errorf("%w as %s: the host accepted none of the keys tried (%s)", ErrAuth, t.user, strings.Join(keys.tried, ", "))
		}
		return nil, fmt.Errorf("ssh handshake with %s: %w", addr, err)
	}
	return ssh.NewClient(c, chans, reqs), nil
}

// keepalive sends keepalive@openssh.com every interval and closes the
// connection when the previous one has not been answered by the next
// tick. SendRequest runs in its own goroutine: on a dead link it blocks for
// as long as TCP retries, which is minutes.
func (s *SSH) keepalive(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var waiting atomic.Bool
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		if waiting.Load() {
			s.lost.Store(true)
			s.client.Close()
			return
		}
		waiting.Store(true)
		go func() {
			// OpenSSH answers with a failure; any answer means alive.
			if _, _, err := s.client.SendRequest("keepalive@openssh.com", true, nil); err == nil {
				waiting.Store(false)
			}
		}()
	}
}

// gone records that the connection ended; unless Close ended it, it was lost.
func (s *SSH) gone() {
	if !s.closed.Load() {
		s.lost.Store(true)
	}
	s.doneOnce.Do(func() { close(s.done) })
}

// Name is "user@address:port", the address as the plan wrote it.
func (s *SSH) Name() string { return s.name }

// Close ends the connection and those to jump hosts.
func (s *SSH) Close() error {
	s.closed.Store(true)
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

func (s *SSH) newSession() (*ssh.Session, error) {
	if s.lost.Load() {
		return nil, ErrConnectionLost
	}
	sess, err := s.client.NewSession()
	if err != nil {
		if s.lost.Load() || errors.Is(err, io.EOF) {
			return nil, ErrConnectionLost
		}
		return nil, fmt.Errorf("open ssh session: %w", err)
	}
	return sess, nil
}

// Run runs argv to completion. Cancelling ctx kills the command's process
// group and returns ctx's error. The shell first prints its pid (which exec
// hands to the command), so the kill works for root logins too, where
// OpenSSH ignores session signals; that line is not part of the output.
func (s *SSH) Run(ctx context.Context, argv []string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sess, err := s.newSession()
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
			s.Run(kctx, []string{"kill", "-KILL", "--", "-" + strconv.Itoa(pid)})
			cancel()
		}
		sess.Close()
		return nil, ctx.Err()
	}
	err = s.waitError(err)
	var ee *ExitError
	if errors.As(err, &ee) {
		ee.Stderr = stderr.Bytes()
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
	sess, err := s.newSession()
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
			return nil, ErrConnectionLost
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
	case errors.As(err, &missing), s.lost.Load(), errors.Is(err, io.EOF):
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
	if _, err := p.s.Run(ctx, []string{"kill", "-" + string(name), "--", "-" + strconv.Itoa(p.pid)}); err != nil {
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
