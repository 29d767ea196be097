package remote

// A host's login shell runs once per session, and a real account's can be
// slow: bash reads ~/.bashrc for every SSH command, and one that runs
// `pyenv init`, conda's hook or environment modules takes half a second
// or more. An exec runs a dozen short commands on each host before its
// points start (facts, the deploy check, the clock), and each used to
// open a session and pay that start-up again.
//
// So Run sends its commands to a shell kept for the connection: one
// session whose login shell execs /bin/sh, which reads command after
// command from the session's stdin. Each command runs in a subshell with
// /dev/null as its stdin, and after it the shell prints an end marker,
// with a fresh random token and the exit status, on stdout and on
// stderr; the runner reads each stream up to its marker. One command at
// a time per shell: a Run that finds every shell busy starts another.
//
// Nothing else changes: the argv is the one a session would run (quoted,
// guarded), the shell's environment is the one the login shell set up,
// and cancelling ctx kills the shell's process group (the command with
// it), as a session's Run kills its command's. A host where such a shell
// does not start (no working /bin/sh, a login shell that fails) runs each
// command in a session of its own, as before, so its errors read as
// they always did.
//
// A command that runs on for the rest of the connection, as a pool
// exec's agent does, takes an idle shell over instead of opening a
// session (StartInShell): the shell prints a marker and execs the
// command, guarded as Start guards it, so the shell's session becomes
// the command's. Its stdin, stdout and stderr are the session's from
// there on, its pid is the shell's (the group leader: Signal kills the
// group as for a session), and the session's end is its end. The shell
// leaves the pool for good, so a Run after it opens another; a pool exec
// runs nothing on a host after its agent starts (every command before it
// is the facts, the deploy check, the clock and the socket table), so
// the host's shell and its agent are one session, and an exec that
// deploys node adds only the upload's sftp session.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// shellEndMarker starts the line a kept shell prints after each command,
// on stdout and on stderr: the marker, the command's token, and on
// stdout ":" and its exit status.
const shellEndMarker = "\x1frdmasweep-end:"

// shellReady is what a kept shell prints first, once /bin/sh runs.
const shellReady = "\x1frdmasweep-ready\n"

// shellExec is what a kept shell prints just before it execs the command
// that takes it over (StartInShell).
const shellExec = "\x1frdmasweep-exec\n"

// shells are a connection's kept shells. The zero value is ready to use.
type shells struct {
	mu     sync.Mutex
	idle   []*keptShell
	broken bool // one failed to start: every command gets a session
	closed bool
}

// keptShell is one /bin/sh kept in a session.
type keptShell struct {
	sess   *ssh.Session
	stdin  io.WriteCloser
	stdout io.Reader
	stderr io.Reader
	pid    int // leads the session's process group
}

// run runs argv, guarded already, in an idle shell or a new one. ok is
// false when no shell could be had: the caller runs argv in a session.
func (sh *shells) run(ctx context.Context, s *SSH, argv []string) (out []byte, err error, ok bool) {
	k := sh.take()
	if k == nil {
		if sh.isBroken() {
			return nil, nil, false
		}
		if k, err = startShell(ctx, s); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err(), true
			}
			if s.lost.Load() {
				return nil, s.lostErr(), true
			}
			sh.mu.Lock()
			sh.broken = true
			sh.mu.Unlock()
			return nil, nil, false
		}
	}
	out, err, keep := k.run(ctx, s, argv)
	if keep {
		sh.put(k)
	} else {
		k.sess.Close()
	}
	return out, err, true
}

func (sh *shells) isBroken() bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.broken || sh.closed
}

func (sh *shells) take() *keptShell {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if n := len(sh.idle); n > 0 {
		k := sh.idle[n-1]
		sh.idle = sh.idle[:n-1]
		return k
	}
	return nil
}

func (sh *shells) put(k *keptShell) {
	sh.mu.Lock()
	closed := sh.closed
	if !closed {
		sh.idle = append(sh.idle, k)
	}
	sh.mu.Unlock()
	if closed {
		k.sess.Close()
	}
}

// closeIdle ends the idle shells: at Close, or to free their sessions for
// a host that limits them (MaxSessions). Closing the session ends the
// shell's stdin, on which it exits.
func (sh *shells) closeIdle() {
	sh.mu.Lock()
	idle := sh.idle
	sh.idle = nil
	sh.mu.Unlock()
	for _, k := range idle {
		k.sess.Close()
	}
}

// shutDown closes the idle shells and keeps new ones from starting.
func (sh *shells) shutDown() {
	sh.mu.Lock()
	sh.closed = true
	sh.mu.Unlock()
	sh.closeIdle()
}

// startShell starts a kept shell in a new session, once its login shell
// has printed the pid line.
func startShell(ctx context.Context, s *SSH) (*keptShell, error) {
	sess, err := s.newSession(ctx)
	if err != nil {
		return nil, err
	}
	k := &keptShell{sess: sess}
	if k.stdin, err = sess.StdinPipe(); err == nil {
		if k.stdout, err = sess.StdoutPipe(); err == nil {
			k.stderr, err = sess.StderrPipe()
		}
	}
	if err == nil {
		err = sess.Start(withPid([]string{"/bin/sh"}))
	}
	if err == nil {
		// The login shell prints the pid line before its exec of
		// /bin/sh; the answer to this says /bin/sh runs.
		_, err = io.WriteString(k.stdin, "printf '\\037rdmasweep-ready\\n'\n")
	}
	if err != nil {
		sess.Close()
		return nil, err
	}
	got := make(chan error, 1)
	go func() {
		var seen []byte
		one := make([]byte, 1)
		for len(seen) < maxStartupNoise {
			if _, err := io.ReadFull(k.stdout, one); err != nil {
				got <- err
				return
			}
			seen = append(seen, one[0])
			if one[0] == '\n' {
				if pid, _, ok := cutPid(seen); ok {
					k.pid = pid
					if i := bytes.Index(seen, []byte(pidMarker)); i > 0 {
						s.noise.Store(string(seen[:i]))
					}
					_, err := readUntil(k.stdout, []byte(shellReady))
					got <- err
					return
				}
			}
		}
		got <- errors.New("no pid line")
	}()
	select {
	case err = <-got:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		sess.Close()
		return nil, err
	}
	return k, nil
}

// run runs argv in the shell and returns its stdout, and a Run's error.
// keep is false when the shell is no longer fit for another command: it
// was killed with its command, or its session ended.
func (k *keptShell) run(ctx context.Context, s *SSH, argv []string) (out []byte, err error, keep bool) {
	var rnd [12]byte
	rand.Read(rnd[:])
	token := hex.EncodeToString(rnd[:])
	end := shellEndMarker + token
	line := "(" + ShellCommand(argv) + ") </dev/null; printf '\\037rdmasweep-end:%s:%d\\n' " + token + " $?; printf '\\037rdmasweep-end:%s\\n' " + token + " >&2\n"
	type read struct {
		b   []byte
		err error
	}
	outc, errc := make(chan read, 1), make(chan read, 1)
	if _, err := io.WriteString(k.stdin, line); err != nil {
		return nil, s.shellLost(), false
	}
	go func() { b, err := readUntil(k.stdout, []byte(end+":")); outc <- read{b, err} }()
	go func() { b, err := readUntil(k.stderr, []byte(end+"\n")); errc <- read{b, err} }()
	var o, e read
	for got := 0; got < 2; got++ {
		select {
		case o = <-outc:
			outc = nil
		case e = <-errc:
			errc = nil
		case <-ctx.Done():
			k.kill(s)
			return nil, ctx.Err(), false
		}
	}
	if o.err != nil || e.err != nil {
		return nil, s.shellLost(), false
	}
	body, status, ok := cutStatus(o.b, end)
	if !ok {
		return nil, fmt.Errorf("run %s: the host's shell garbled the command's end", argv[0]), false
	}
	stderr := bytes.TrimSuffix(e.b, []byte(end+"\n"))
	if status == 0 {
		return body, nil, true
	}
	ee := &ExitError{Status: status, Stderr: stderr}
	// sh reports a command killed by signal N as 128+N.
	if status > 128 && status < 128+65 {
		if name := unix.SignalName(syscall.Signal(status - 128)); name != "" {
			ee = &ExitError{Status: -1, Signal: name[3:], Stderr: stderr}
		}
	}
	return body, refusal(ee), true
}

// StartInShell starts argv as Start does, in one of the connection's idle
// kept shells, which execs it: the session and the pid are the shell's,
// and the shell is no longer the connection's. A connection with no idle
// shell (all busy, none started yet, or none that works on the host)
// starts argv in a session of its own, as Start. It suits a command that
// is started after the connection's Runs and lives as long as the
// connection (a pool's agent): a Run after it opens another shell, and
// so another session.
func (s *SSH) StartInShell(ctx context.Context, argv []string) (Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k := s.shells.take()
	if k == nil {
		return s.Start(ctx, argv)
	}
	p, err := k.exec(ctx, s, s.deployed.Guard(argv))
	switch {
	case err == nil:
		return p, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case s.lost.Load():
		return nil, s.lostErr()
	}
	// The shell died idle: a session of its own, as a Run's fallback.
	return s.Start(ctx, argv)
}

// exec hands the shell over to argv, guarded already: the shell prints
// shellExec and execs argv, which keeps the shell's pid, stdin, stdout
// and stderr. It returns once the marker is in, so that nothing written
// on stdin after it (an agent's token) can be read by the shell, which
// has read the whole line before it printed it. The marker is read a
// byte at a time, so none of argv's own output is taken.
func (k *keptShell) exec(ctx context.Context, s *SSH, argv []string) (Process, error) {
	if _, err := io.WriteString(k.stdin, "printf '\\037rdmasweep-exec\\n'; "+ShellCommand(argv)+"\n"); err != nil {
		k.sess.Close()
		return nil, err
	}
	got := make(chan error, 1)
	go func() { got <- readThrough(k.stdout, []byte(shellExec)) }()
	var err error
	select {
	case err = <-got:
	case <-ctx.Done():
		k.kill(s)
		return nil, ctx.Err()
	}
	if err != nil {
		k.sess.Close()
		return nil, err
	}
	return &sshProcess{s: s, sess: k.sess, pid: k.pid, stdin: k.stdin, stdout: k.stdout, stderr: k.stderr}, nil
}

// readThrough reads r a byte at a time until what it has read ends with
// mark, so nothing after mark is consumed.
func readThrough(r io.Reader, mark []byte) error {
	var seen []byte
	one := make([]byte, 1)
	for len(seen) < maxStartupNoise {
		if _, err := io.ReadFull(r, one); err != nil {
			return err
		}
		if seen = append(seen, one[0]); bytes.HasSuffix(seen, mark) {
			return nil
		}
	}
	return fmt.Errorf("no %q within %d bytes", mark, len(seen))
}

// kill ends the shell with its command: its process group, over a
// session of its own (sshd drops session signals for root), then by a
// session signal, then the session. The command comes first: once the
// shell is dead, its children are init's and cannot be told apart.
func (k *keptShell) kill(s *SSH) {
	kctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	s.runSession(kctx, killShell(k.pid))
	cancel()
	k.sess.Signal(ssh.SIGKILL)
	k.sess.Close()
}

// killShell is the remote command that kills the process group a kept
// shell leads, or, where the server made it no group leader (Dropbear),
// the shell and its children, one of which is the command it runs.
func killShell(pid int) []string {
	p := strconv.Itoa(pid)
	return []string{"sh", "-c", "kill -9 -" + p + " 2>/dev/null || kill -9 $(cat /proc/" + p + "/task/" + p + "/children 2>/dev/null) " + p + " 2>/dev/null"}
}

// shellLost is the error of a command whose shell went away under it.
func (s *SSH) shellLost() error {
	if s.lost.Load() {
		return s.lostErr()
	}
	return ErrConnectionLost
}

// readUntil reads r until what it has read ends with mark, and returns
// all of it. The shell writes nothing after the marker until it is sent
// the next command, so nothing past it is taken.
func readUntil(r io.Reader, mark []byte) ([]byte, error) {
	var b []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		b = append(b, buf[:n]...)
		if i := bytes.Index(b, mark); i >= 0 {
			if mark[len(mark)-1] == '\n' || bytes.IndexByte(b[i:], '\n') >= 0 {
				return b, nil
			}
		}
		if err != nil {
			return b, err
		}
	}
}

// cutStatus splits a command's stdout, end marker included, into its
// output and its exit status.
func cutStatus(b []byte, end string) ([]byte, int, bool) {
	i := bytes.Index(b, []byte(end+":"))
	if i < 0 {
		return nil, 0, false
	}
	rest, _, ok := bytes.Cut(b[i+len(end)+1:], []byte("\n"))
	if !ok {
		return nil, 0, false
	}
	status, err := strconv.Atoi(string(rest))
	if err != nil {
		return nil, 0, false
	}
	return b[:i], status, true
}
