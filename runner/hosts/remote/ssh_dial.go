package remote

// Dialling, and keeping a host's connections alive:
//
//   - each hop is reached directly, through the hop before it (ProxyJump),
//     or through a ProxyCommand run as ssh runs it: $SHELL -c "exec CMD",
//     its stdin and stdout being the connection;
//   - a handshake the server closes before the key exchange (sshd does so
//     beyond MaxStartups) is tried again, with jittered backoff, until
//     connect_timeout is spent;
//   - a keepalive goes out every interval; after count intervals with no
//     answer the connection is closed and everything on it fails with a
//     *KeepaliveError;
//   - when the host refuses a session ("administratively prohibited":
//     sshd's MaxSessions), another connection is opened to it, up to
//     maxConns in all.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"rdmasweep/internal/sshname"
	"rdmasweep/results"
)

// DialSSH connects to the host cfg describes, through any jump hosts or
// ProxyCommand, and authenticates. ctx bounds the whole dial; the
// connection then lives until Close whatever happens to ctx.
func DialSSH(ctx context.Context, cfg SSHConfig) (*SSH, error) {
	r, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	tgt := r.target
	name := fmt.Sprintf("%s@%s:%d", tgt.user, cfg.Address, tgt.port)
	warn, debug := cfg.Warn, cfg.Debug
	if warn == nil {
		warn = func(string) {}
	}
	if debug == nil {
		debug = func(string) {}
	}
	hk, err := newHostKeys(r.userKnownHosts, r.globalKnownHosts, r.hostKeyPolicy, r.hashKnownHosts, warn, debug)
	if err != nil {
		return nil, err
	}
	hk.source, hk.sshConfigValue = r.policySource, r.strictHostKeyChecking
	if hk.policy == PolicyInsecure {
		warn(fmt.Sprintf("host key checking is OFF for %s (host_key_policy: insecure): anyone on the network path can impersonate it", name))
	}
	timeout := cfg.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	d := &dialer{hk: hk, timeout: timeout, ciphers: cfg.Ciphers, passphrase: cfg.Passphrase, debug: debug}

	s := &SSH{name: name, user: tgt.user, machine: machineOf(r), done: make(chan struct{})}
	var prev *ssh.Client
	for i, t := range append(r.jumps, tgt) {
		c, err := d.dialHop(ctx, prev, t)
		if err != nil {
			for j := len(s.hops) - 1; j >= 0; j-- {
				s.hops[j].Close()
			}
			if i < len(r.jumps) {
				return nil, fmt.Errorf("jump host %s@%s: %w", t.user, t.addr(), err)
			}
			return nil, err
		}
		if i < len(r.jumps) {
			s.hops = append(s.hops, c)
		} else {
			s.client = c
		}
		prev = c
	}
	// More connections to the host go the way the first went: through the
	// same last hop, or by running the ProxyCommand again.
	var via *ssh.Client
	if len(s.hops) > 0 {
		via = s.hops[len(s.hops)-1]
	}
	s.redial = func(ctx context.Context) (*ssh.Client, error) { return d.dialHop(ctx, via, tgt) }
	go func() {
		s.client.Wait()
		s.gone()
	}()
	if r.keepalive > 0 {
		go s.keepalive(r.keepalive, r.keepaliveMax)
	}
	return s, nil
}

// machineOf is SSH.Machine for a resolved dial: each hop's address, and
// its ProxyCommand when it has one, since one address behind two proxies
// may be two machines.
func machineOf(r resolved) string {
	var b strings.Builder
	for i, t := range append(r.jumps, r.target) {
		if i > 0 {
			b.WriteString(" > ")
		}
		if t.proxyCommand != "" && t.proxyCommand != "none" && i == 0 {
			fmt.Fprintf(&b, "[%s] ", t.proxyCommand)
		}
		b.WriteString(t.addr())
	}
	return b.String()
}

// dialer dials hops with one dial's settings.
type dialer struct {
	hk         *hostKeys
	timeout    time.Duration
	ciphers    []string
	passphrase func(string) ([]byte, error)
	debug      func(string)
}

// dialHop connects to t, directly, through via, or through t's
// ProxyCommand, and completes the SSH handshake, all within the timeout
// and ctx. A handshake the server closes before the key exchange is tried
// again (see MaxStartupsError).
func (d *dialer) dialHop(ctx context.Context, via *ssh.Client, t target) (*ssh.Client, error) {
	deadline := time.Now().Add(d.timeout)
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		c, early, err := d.dialOnce(ctx, via, t, deadline)
		if err == nil {
			if attempt > 1 {
				d.debug(fmt.Sprintf("%s: handshake done on attempt %d", t.addr(), attempt))
			}
			return c, nil
		}
		if !early || ctx.Err() != nil {
			return nil, err
		}
		// Jittered (half to one and a half times the backoff): MaxStartups
		// drops whoever comes in a crowd, so retries must not come in one.
		wait := time.Duration(rand.Int64N(int64(backoff))) + backoff/2
		if time.Now().Add(wait).After(deadline) {
			return nil, &MaxStartupsError{Addr: t.addr(), Attempts: attempt, Timeout: d.timeout, Err: err}
		}
		d.debug(fmt.Sprintf("%s: closed before the key exchange (attempt %d); again in %v", t.addr(), attempt, wait.Round(time.Millisecond)))
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, fmt.Errorf("ssh handshake with %s: %w", t.addr(), ctx.Err())
		}
		backoff = min(2*backoff, time.Second)
	}
}

// dialOnce is one try. early reports a handshake the server closed (EOF
// or reset) before it showed its host key: what sshd does to connections
// beyond MaxStartups, and worth another try.
func (d *dialer) dialOnce(ctx context.Context, via *ssh.Client, t target, deadline time.Time) (c *ssh.Client, early bool, err error) {
	addr := t.addr()
	keys, err := loadKeys(keyOptions{identities: t.identities, certificates: t.certificates,
		identitiesOnly: t.identitiesOnly, passphrase: d.passphrase, debug: d.debug})
	if err != nil {
		return nil, false, err
	}
	defer keys.close()
	algos, err := d.hk.algorithms(addr)
	if err != nil {
		return nil, false, err
	}
	var sawHostKey atomic.Bool
	cc := &ssh.ClientConfig{
		User: t.user,
		Auth: []ssh.AuthMethod{
			ssh.PublicKeys(keys.signers...),
			ssh.GSSAPIWithMICAuthMethod(gssapiProbe{keys.trace}, t.host),
		},
		HostKeyCallback: func(host string, remote net.Addr, key ssh.PublicKey) error {
			sawHostKey.Store(true)
			return d.hk.check(host, remote, key)
		},
		HostKeyAlgorithms: algos,
		Timeout:           time.Until(deadline),
		Config:            ssh.Config{Ciphers: d.ciphers},
	}
	proxied := t.proxyCommand != "" && t.proxyCommand != "none" && via == nil
	conn, err := d.connect(ctx, via, t, proxied, deadline)
	if err != nil {
		return nil, false, err
	}
	c, err, stopped := d.handshake(ctx, conn, addr, cc, deadline)
	if stopped != nil {
		return nil, false, stopped
	}
	if err == nil {
		return c, false, nil
	}
	conn.Close()
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch e.(type) {
		case *UnknownHostError, *HostKeyChangedError, *RevokedHostKeyError, *HostCertError:
			return nil, false, e // the library's wrapping adds nothing
		}
	}
	if proxied {
		return nil, false, fmt.Errorf("ssh handshake with %s through ProxyCommand %q: %w%s", addr, t.proxyCommand, err, conn.(*proxyConn).stderrTail())
	}
	closed := errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
	if !sawHostKey.Load() {
		if closed {
			return nil, true, fmt.Errorf("ssh handshake with %s: the server closed the connection before the key exchange: %w", addr, err)
		}
		return nil, false, fmt.Errorf("ssh handshake with %s: %w", addr, err)
	}
	if ae := loginError(keys, t.user, closed); ae != nil {
		return nil, false, ae
	}
	return nil, false, fmt.Errorf("ssh handshake with %s: %w", addr, err)
}

// connect opens the connection the handshake runs on: t's ProxyCommand
// when proxied, else TCP directly or through via, within the deadline.
func (d *dialer) connect(ctx context.Context, via *ssh.Client, t target, proxied bool, deadline time.Time) (net.Conn, error) {
	addr := t.addr()
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var conn net.Conn
	var err error
	switch {
	case proxied:
		conn, err = startProxyCommand(t)
	case via == nil:
		conn, err = (&net.Dialer{}).DialContext(dctx, results.Network, addr)
	default:
		conn, err = via.DialContext(dctx, results.Network, addr)
	}
	if err == nil {
		return conn, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, ctx.Err())
	}
	var ne net.Error
	if dctx.Err() != nil || errors.As(err, &ne) && ne.Timeout() {
		return nil, fmt.Errorf("connect to %s: timed out after %v", addr, d.timeout)
	}
	return nil, fmt.Errorf("connect to %s: %w", addr, err)
}

// handshake runs the SSH handshake on conn with what is left of the
// timeout. Closing the conn is the one way to stop it that works for
// every kind of conn (an ssh channel and a pipe have no deadlines); when
// the deadline or ctx stopped it, stopped says which, first, and the
// conn is closed. Otherwise err is the handshake's.
func (d *dialer) handshake(ctx context.Context, conn net.Conn, addr string, cc *ssh.ClientConfig, deadline time.Time) (c *ssh.Client, err, stopped error) {
	var why atomic.Pointer[error]
	stopTimer := time.AfterFunc(time.Until(deadline), func() {
		e := fmt.Errorf("ssh handshake with %s: timed out after %v (no SSH server answering?)", addr, d.timeout)
		why.CompareAndSwap(nil, &e)
		conn.Close()
	})
	stopCtx := context.AfterFunc(ctx, func() {
		e := fmt.Errorf("ssh handshake with %s: %w", addr, ctx.Err())
		why.CompareAndSwap(nil, &e)
		conn.Close()
	})
	sc, chans, reqs, err := ssh.NewClientConn(conn, addr, cc)
	stopTimer.Stop()
	stopCtx()
	if w := why.Load(); w != nil {
		if err == nil {
			sc.Close()
		}
		return nil, nil, *w
	}
	if err != nil {
		return nil, err, nil
	}
	return ssh.NewClient(sc, chans, reqs), nil, nil
}

// loginError explains a handshake that failed after the host key was
// accepted, from what the keys' trace saw: a key that could not sign,
// a gssapi-only host, no key offered, a login cut short, or the keys
// refused. It is nil when the trace does not explain it.
func loginError(keys *keyring, user string, closed bool) error {
	tr := keys.trace
	tr.mu.Lock()
	offered, tried, gss, signErr := len(tr.offered), len(tr.offered) > 0, tr.gssapi, tr.signErr
	tr.mu.Unlock()
	ae := &AuthError{User: user, Tried: keys.tried, Protected: keys.protected, CertIssues: certIssues(keys.certs, user, time.Now())}
	switch {
	case signErr != nil:
		return signErr
	case gss && !tried:
		return &AuthError{User: user, GSSAPIOnly: true}
	case !tried && !closed:
		ae.NoPublicKey = true
		return ae
	case tried && offered < tr.total:
		// The server ended the login before every key was offered.
		ae.CutShort, ae.Offered, ae.Total = true, offered, tr.total
		return ae
	case tried && !closed:
		return ae
	}
	return nil
}

// MaxStartupsError is a host that kept closing the connection before the
// key exchange until connect_timeout was spent: what sshd does beyond its
// MaxStartups limit, when many connections arrive at once.
type MaxStartupsError struct {
	Addr     string
	Attempts int
	Timeout  time.Duration
	Err      error // the last attempt's
}

// ErrMaxStartups is wrapped by *MaxStartupsError.
var ErrMaxStartups = errors.New("server keeps closing the connection before the key exchange")

func (e *MaxStartupsError) Error() string {
	return fmt.Sprintf("ssh handshake with %s: the server closed the connection before the key exchange %d times in %v (sshd's MaxStartups limit?): %v",
		e.Addr, e.Attempts, e.Timeout, e.Err)
}

func (e *MaxStartupsError) Unwrap() []error { return []error{ErrMaxStartups, e.Err} }

func (e *MaxStartupsError) Hint() string {
	return "the host's sshd drops unauthenticated connections beyond its MaxStartups (sshd_config, e.g. 10:30:100) when many arrive at once; dial fewer hosts at once, raise ssh.connect_timeout, or ask for a higher MaxStartups"
}

// KeepaliveError is a connection closed because keepalives went
// unanswered: the link or the host went silent.
type KeepaliveError struct {
	Interval time.Duration // ServerAliveInterval
	Count    int           // ServerAliveCountMax
	Silent   time.Duration // how long nothing was heard
}

func (e *KeepaliveError) Error() string {
	return fmt.Sprintf("connection lost: no answer to keepalives for %v (keepalive interval %v × count %d)",
		e.Silent.Round(100*time.Millisecond), e.Interval, e.Count)
}

func (e *KeepaliveError) Unwrap() error { return ErrConnectionLost }

// keepalive sends keepalive@openssh.com every interval and closes the
// host's connections once nothing has been heard for count intervals, so
// a link that goes silent is found within interval × count of its last
// answer. With count 1 the one keepalive gets half an interval more for
// its round trip, or every answer would race the deadline. SendRequest
// runs in its own goroutine: on a dead link it blocks for as long as TCP
// retries, which is minutes.
func (s *SSH) keepalive(interval time.Duration, count int) {
	limit := time.Duration(count) * interval
	if count == 1 {
		limit += interval / 2
	}
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	send := time.NewTicker(interval)
	defer send.Stop()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-send.C:
			go func() {
				// OpenSSH answers with a failure; any answer means alive.
				if _, _, err := s.client.SendRequest("keepalive@openssh.com", true, nil); err == nil {
					last.Store(time.Now().UnixNano())
				}
			}()
		case <-deadline.C:
			silent := time.Since(time.Unix(0, last.Load()))
			if silent >= limit {
				s.lose(&KeepaliveError{Interval: interval, Count: count, Silent: silent})
				return
			}
			deadline.Reset(limit - silent) // an answer came: wait from it
		}
	}
}

// lose ends every connection to the host for cause, which every later
// call, and every process still running on them, returns.
func (s *SSH) lose(cause error) {
	s.cause.CompareAndSwap(nil, &cause)
	s.lost.Store(true)
	s.client.Close()
	s.mu.Lock()
	for _, c := range s.extras {
		c.Close()
	}
	s.mu.Unlock()
}

// lostErr is why the connection was lost: ErrConnectionLost, or the
// *KeepaliveError that ended it.
func (s *SSH) lostErr() error {
	if p := s.cause.Load(); p != nil {
		return *p
	}
	return ErrConnectionLost
}

// maxConns bounds the connections to one host (MaxSessions, see
// newSession).
const maxConns = 8

// ErrSessionLimit is wrapped by *SessionLimitError.
var ErrSessionLimit = errors.New("the host refused a session on every connection")

// SessionLimitError is a session the host refused on every connection,
// even a new one: sshd's MaxSessions (sessions per connection) is lower
// than what the runner needs at once, and more connections did not help.
type SessionLimitError struct {
	Host  string
	Conns int
	Err   error
}

func (e *SessionLimitError) Error() string {
	return fmt.Sprintf("open ssh session: the host refused it on each of %d connections, a new one included (sshd's MaxSessions?): %v", e.Conns, e.Err)
}

func (e *SessionLimitError) Unwrap() []error { return []error{ErrSessionLimit, e.Err} }

func (e *SessionLimitError) Hint() string {
	return "the host's sshd limits sessions per connection (MaxSessions in sshd_config); the runner opens more connections when refused, but the host refused those too; ask its administrators for MaxSessions 10, the default"
}

// refused reports a session open the server turned down on a live
// connection: sshd's MaxSessions answers "open failed" (connect failed),
// others "administratively prohibited"; a session channel connects to
// nothing, so either means "not on this connection".
func refused(err error) bool {
	var oce *ssh.OpenChannelError
	return errors.As(err, &oce)
}

// newSession opens a session on the first connection that takes one.
// When every connection refuses (MaxSessions), it opens another, so a
// host with MaxSessions 1 still runs both roles and their kills; one
// dial at a time, and a session freed meanwhile is taken instead.
func (s *SSH) newSession(ctx context.Context) (*ssh.Session, error) {
	if s.lost.Load() {
		return nil, s.lostErr()
	}
	try := func() (*ssh.Session, error) {
		s.mu.Lock()
		clients := append([]*ssh.Client{s.client}, s.extras...)
		s.mu.Unlock()
		var last error
		for _, c := range clients {
			sess, err := c.NewSession()
			if err == nil {
				return sess, nil
			}
			if s.lost.Load() {
				return nil, s.lostErr()
			}
			if c == s.client && !refused(err) {
				if errors.Is(err, io.EOF) {
					return nil, ErrConnectionLost
				}
				return nil, fmt.Errorf("open ssh session: %w", err)
			}
			if !refused(err) {
				s.dropExtra(c) // that extra connection died
			}
			last = err
		}
		return nil, last
	}
	sess, err := try()
	if sess != nil || !refused(err) {
		return sess, err
	}
	s.dialMu.Lock()
	defer s.dialMu.Unlock()
	if sess, err = try(); sess != nil || !refused(err) {
		return sess, err
	}
	// The idle kept shells (ssh_shell.go) hold sessions: free them
	// before another connection is opened.
	s.shells.closeIdle()
	if sess, err = try(); sess != nil || !refused(err) {
		return sess, err
	}
	s.mu.Lock()
	n := 1 + len(s.extras)
	s.mu.Unlock()
	if n >= maxConns || s.redial == nil {
		// Sessions close on their own time: wait for one to be freed.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; {
			time.Sleep(50 * time.Millisecond)
			if sess, err = try(); sess != nil || !refused(err) {
				return sess, err
			}
		}
		return nil, &SessionLimitError{Host: s.name, Conns: n, Err: err}
	}
	c, derr := s.redial(ctx)
	if derr != nil {
		return nil, &SessionLimitError{Host: s.name, Conns: n, Err: fmt.Errorf("%v; another connection: %w", err, derr)}
	}
	s.mu.Lock()
	s.extras = append(s.extras, c)
	s.mu.Unlock()
	go func() {
		c.Wait()
		s.dropExtra(c)
	}()
	sess, err = c.NewSession()
	if err != nil {
		return nil, &SessionLimitError{Host: s.name, Conns: n + 1, Err: err}
	}
	return sess, nil
}

func (s *SSH) dropExtra(c *ssh.Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.extras {
		if x == c {
			s.extras = append(s.extras[:i], s.extras[i+1:]...)
			c.Close()
			return
		}
	}
}

// Conns is how many connections the host has now: 1, more when it
// refused sessions (MaxSessions) and others were opened.
func (s *SSH) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return 1 + len(s.extras)
}

// proxyConn is a connection through a ProxyCommand: the command's stdin
// and stdout, the command in its own process group so Close ends it and
// whatever it started.
type proxyConn struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *tailBuffer
	once   sync.Once
}

var _ net.Conn = (*proxyConn)(nil)

// startProxyCommand runs t's ProxyCommand as ssh runs it: %h %p %r %n %%
// expanded, through $SHELL -c "exec …". A name it would paste in that a
// shell would read more into is refused first (proxyNames).
func startProxyCommand(t target) (*proxyConn, error) {
	if err := proxyNames(t); err != nil {
		return nil, err
	}
	line := expandTokens(t.proxyCommand, map[byte]string{'h': t.host, 'p': strconv.Itoa(t.port), 'r': t.user, 'n': t.alias})
	cmd := exec.Command(envShell(), "-c", "exec "+line)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &proxyConn{cmd: cmd, stderr: &tailBuffer{max: 2048}}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if p.stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("ProxyCommand %q: %w", t.proxyCommand, err)
	}
	return p, nil
}

// proxyNames refuses the names t's ProxyCommand would paste into its
// shell line, %h, %n and %r, when OpenSSH's rule (internal/sshname) does.
// The plan loader refuses such an address or user already; this catches
// what reaches the dial another way: ssh_config's HostName or User, a
// ProxyJump hop, a caller that skipped the loader. Only the tokens the
// command uses are checked, so a name it never sees cannot stop it.
func proxyNames(t target) error {
	for _, c := range []struct {
		token byte
		name  string
		rule  func(string) error
	}{
		{'h', t.host, sshname.Host},
		{'n', t.alias, sshname.Host},
		{'r', t.user, sshname.User},
	} {
		if !usesToken(t.proxyCommand, c.token) {
			continue
		}
		if err := c.rule(c.name); err != nil {
			return &UnsafeNameError{Command: t.proxyCommand, Token: "%" + string(c.token), Name: c.name, Err: err}
		}
	}
	return nil
}

// usesToken reports whether s has %tok, as expandTokens reads it (%%
// is a literal %).
func usesToken(s string, tok byte) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		i++
		if s[i] == tok {
			return true
		}
	}
	return false
}

// ErrUnsafeName is wrapped by *UnsafeNameError.
var ErrUnsafeName = errors.New("a name a shell would interpret")

// UnsafeNameError is a ProxyCommand not run because a name it would
// paste into its shell line holds what a shell would interpret.
type UnsafeNameError struct {
	Command string // the ProxyCommand as written
	Token   string // "%h", "%n" or "%r"
	Name    string
	Err     error // what OpenSSH's rule found, e.g. "'$' at byte 2"
}

func (e *UnsafeNameError) Error() string {
	what := map[string]string{"%h": "host name", "%n": "host alias", "%r": "user name"}[e.Token]
	return fmt.Sprintf("ProxyCommand %q not run: its %s, the %s %q, holds what a shell would interpret: %v", e.Command, e.Token, what, e.Name, e.Err)
}

func (e *UnsafeNameError) Unwrap() []error { return []error{ErrUnsafeName, e.Err} }

func (e *UnsafeNameError) Hint() string {
	return "OpenSSH refuses such names too; fix it where it comes from: the plan's address, user or jump, --set, or ssh_config's HostName or User"
}

func (p *proxyConn) Read(b []byte) (int, error)  { return p.stdout.Read(b) }
func (p *proxyConn) Write(b []byte) (int, error) { return p.stdin.Write(b) }

// Close ends the command: its stdin closes, and its group gets SIGHUP
// (what ssh sends it), then SIGKILL if it lingers.
func (p *proxyConn) Close() error {
	p.once.Do(func() {
		p.stdin.Close()
		pid := p.cmd.Process.Pid
		syscall.Kill(-pid, syscall.SIGHUP)
		done := make(chan struct{})
		go func() {
			p.cmd.Wait()
			close(done)
		}()
		go func() {
			select {
			case <-done:
			case <-time.After(2 * time.Second):
				syscall.Kill(-pid, syscall.SIGKILL)
			}
		}()
	})
	return nil
}

func (p *proxyConn) LocalAddr() net.Addr              { return proxyAddr{} }
func (p *proxyConn) RemoteAddr() net.Addr             { return proxyAddr{} }
func (p *proxyConn) SetDeadline(time.Time) error      { return nil }
func (p *proxyConn) SetReadDeadline(time.Time) error  { return nil }
func (p *proxyConn) SetWriteDeadline(time.Time) error { return nil }

// stderrTail is what the command said on stderr, for an error message.
func (p *proxyConn) stderrTail() string {
	if s := p.stderr.String(); s != "" {
		return " (the command said: " + s + ")"
	}
	return ""
}

type proxyAddr struct{}

func (proxyAddr) Network() string { return "proxycommand" }
func (proxyAddr) String() string  { return "proxycommand" }

// tailBuffer keeps the last max bytes written, trimmed of space.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(trimSpace(t.b))
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\r' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}
