package remote_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"rdmasweep/runner/hosts/remote"
	"rdmasweep/testbed/testhosts"
)

// TestSSHKeptShell runs a dozen commands on a host whose ~/.bashrc takes
// half a second, as a cluster account's does: they share one session,
// counted in sshd's log, and each reads as in a session of its own: its
// output to the byte, its exit status and stderr, a death by signal, a
// guard's refusal, a cancel that kills it.
func TestSSHKeptShell(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a"}, SlowShell: 500 * time.Millisecond})
	t.Setenv("SSH_AUTH_SOCK", "")
	t.Setenv("HOME", t.TempDir())
	h := n.Hosts["a"]

	// The shell really is slow: OpenSSH's own command pays the ~/.bashrc.
	start := time.Now()
	raw := exec.Command("ssh", "-F", "none", "-i", n.KeyFile, "-o", "UserKnownHostsFile="+n.KnownHosts,
		"-o", "BatchMode=yes", n.User+"@"+h.Addr, "true")
	if out, err := raw.CombinedOutput(); err != nil {
		t.Fatalf("ssh true: %v\n%s", err, out)
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Fatalf("ssh true took %v: the account's ~/.bashrc did not run", d)
	}

	cfg := config(t, n, h)
	cfg.User = n.User
	s := dial(t, cfg)
	ctx := context.Background()
	before := sessions(t, h)

	// Output to the byte: no trailing newline, a marker-like prefix, NUL.
	for _, want := range []string{"", "no newline", "\x1frdmasweep-end:deadbeef:0\n", "two\n\n"} {
		out, err := s.Run(ctx, []string{"printf", "%s", want})
		if err != nil || string(out) != want {
			t.Errorf("printf %q = %q, %v", want, out, err)
		}
	}
	if out, err := s.Run(ctx, []string{"printf", `a\000b`}); err != nil || string(out) != "a\x00b" {
		t.Errorf("a NUL = %q, %v", out, err)
	}
	// A failure: its status and its stderr, and nothing of it in the next.
	_, err := s.Run(ctx, []string{"sh", "-c", "echo out; echo oops >&2; exit 3"})
	var ee *remote.ExitError
	if !errors.As(err, &ee) || ee.Status != 3 || string(ee.Stderr) != "oops\n" {
		t.Errorf("exit 3 = %v (stderr %q)", err, stderrOf(err))
	}
	if out, err := s.Run(ctx, []string{"echo", "next"}); err != nil || string(out) != "next\n" {
		t.Errorf("after a failure: %q, %v", out, err)
	}
	// A command killed by a signal, as a session would report it.
	_, err = s.Run(ctx, []string{"sh", "-c", "kill -KILL $$"})
	if !errors.As(err, &ee) || ee.Signal != "KILL" || ee.Status != -1 {
		t.Errorf("killed = %#v, want signal KILL", err)
	}
	// stdin is empty, as in a session of its own: the shell's own
	// commands are not read by the command.
	if out, err := s.Run(ctx, []string{"cat"}); err != nil || len(out) != 0 {
		t.Errorf("cat = %q, %v; want nothing read", out, err)
	}
	// The environment the login shell set up, the user's.
	if out, err := s.Run(ctx, []string{"id", "-un"}); err != nil || string(out) != n.User+"\n" {
		t.Errorf("id -un = %q, %v", out, err)
	}
	if got := sessions(t, h) - before; got != 1 {
		t.Errorf("%d sessions for 11 commands, want 1: each session runs the slow ~/.bashrc", got)
	}

	// Cancelled: it stops at once, with its shell, and the next runs.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = s.Run(cctx, []string{"sh", "-c", "echo $$ > /var/tmp/kept-shell.pid; exec sleep 60"})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Errorf("cancelled = %v after %v", err, time.Since(start))
	}
	pid, err := s.Run(ctx, []string{"cat", "/var/tmp/kept-shell.pid"})
	if err != nil {
		t.Fatal(err)
	}
	// Gone, or a zombie its parent, killed with it, left to init.
	for deadline := time.Now().Add(5 * time.Second); ; {
		state, err := s.Run(ctx, []string{"sh", "-c", `cut -d' ' -f3 /proc/$1/stat 2>/dev/null; :`, "sh", strings.TrimSpace(string(pid))})
		if err != nil {
			t.Fatal(err)
		}
		if st := strings.TrimSpace(string(state)); st == "" || st == "Z" {
			break
		} else if time.Now().After(deadline) {
			t.Errorf("the cancelled command (pid %s) is still there, state %s", strings.TrimSpace(string(pid)), st)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// agentScript stands in for node attach: it reads a token on stdin,
// prints its pid, its process group, what the deploy guard exported and
// the token, starts a child, and exits 7 on "exit", 8 at stdin's end.
const agentScript = `#!/bin/sh
IFS= read -r tok || exit 9
sleep 60 </dev/null >/dev/null 2>&1 &
printf '%s %s %s %s %s\n' "$$" "$(cut -d' ' -f5 /proc/$$/stat)" "$!" "$RDMASWEEP_NODE_SHA256" "$tok"
echo started >&2
while IFS= read -r line; do [ "$line" = exit ] && exit 7; done
exit 8
`

// TestSSHKeptShellTakenOver starts a long-lived command as a pool's agent
// is started: in the connection's idle kept shell, which it takes over,
// so that it opens no session of its own on a host whose ~/.bashrc
// takes half a second. It runs as in a session: through the deploy
// guard, the token on its stdin read by it and not by the shell, its
// stdout and stderr its own, its exit status from Wait, its end at
// stdin's end, its process group led by its pid (a root login's SIGKILL,
// which sshd does not deliver, kills its child by that group); and a
// Run after it opens another shell.
func TestSSHKeptShellTakenOver(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a"}, SlowShell: 500 * time.Millisecond})
	t.Setenv("SSH_AUTH_SOCK", "")
	t.Setenv("HOME", t.TempDir())
	h := n.Hosts["a"]
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(src, []byte(agentScript), 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(agentScript))

	for _, user := range []string{n.User, "root"} {
		cfg := config(t, n, h)
		cfg.User = user
		s := dial(t, cfg)
		// What hangs (a token the shell swallowed, a kill that missed)
		// fails, and the connection's end unblocks the rest.
		watchdog := time.AfterFunc(time.Minute, func() {
			t.Errorf("%s: no end within a minute: a read or Wait hung", user)
			s.Close()
		})
		prog := testhosts.DeployDir + "/taken-" + user + "/agent"
		if _, err := s.Upload(ctx, src, prog); err != nil {
			t.Fatalf("%s: upload: %v", user, err)
		}
		if _, err := s.Run(ctx, []string{"true"}); err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		before := sessions(t, h)
		p, err := s.StartInShell(ctx, []string{prog, "attach"})
		if err != nil {
			t.Fatalf("%s: start in the kept shell: %v", user, err)
		}
		if got := sessions(t, h) - before; got != 0 {
			t.Errorf("%s: the command opened %d sessions, want 0: it takes over the idle shell", user, got)
		}
		if _, err := io.WriteString(p.Stdin(), "tok-"+user+"\n"); err != nil {
			t.Fatalf("%s: token: %v", user, err)
		}
		br := bufio.NewReader(p.Stdout())
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: first line: %q, %v", user, line, err)
		}
		f := strings.Fields(line)
		if len(f) != 5 || f[0] != f[1] || f[3] != hex.EncodeToString(sum[:]) || f[4] != "tok-"+user {
			t.Errorf("%s: it said %q, want its pid twice (it leads its group), a child, the guard's sha256 %x and the token", user, line, sum)
		}
		errLine, err := bufio.NewReader(p.Stderr()).ReadString('\n')
		if err != nil || errLine != "started\n" {
			t.Errorf("%s: stderr %q, %v", user, errLine, err)
		}
		// A Run after it: another shell, one more session.
		if out, err := s.Run(ctx, []string{"echo", "after"}); err != nil || string(out) != "after\n" {
			t.Errorf("%s: a Run beside it: %q, %v", user, out, err)
		}
		if got := sessions(t, h) - before; got != 1 {
			t.Errorf("%s: %d sessions after a Run beside the taken shell, want 1 (a new shell)", user, got)
		}
		if len(f) < 3 {
			watchdog.Stop()
			continue
		}
		if user == "root" {
			// sshd drops a root session's signals: only the kill of the
			// group by the shell's pid reaches the child.
			if err := p.Signal(syscall.SIGKILL); err != nil {
				t.Errorf("root: SIGKILL: %v", err)
			}
			if err := p.Wait(); !isSignal(err, "KILL") {
				t.Errorf("root: killed: Wait = %v, want killed by KILL", err)
			}
			watchdog.Stop()
			childGone(t, s, f[2])
			continue
		}
		if _, err := io.WriteString(p.Stdin(), "exit\n"); err != nil {
			t.Fatal(err)
		}
		var ee *remote.ExitError
		if err := p.Wait(); !errors.As(err, &ee) || ee.Status != 7 {
			t.Errorf("%s: Wait = %v, want exit status 7", user, err)
		}
		// Its stdin's end ends it, as a session's does.
		p, err = s.StartInShell(ctx, []string{prog, "attach"})
		if err != nil {
			t.Fatalf("%s: start again: %v", user, err)
		}
		io.WriteString(p.Stdin(), "again\n")
		p.Stdin().Close()
		go io.Copy(io.Discard, p.Stdout())
		go io.Copy(io.Discard, p.Stderr())
		if err := p.Wait(); !errors.As(err, &ee) || ee.Status != 8 {
			t.Errorf("%s: after stdin's end: Wait = %v, want exit status 8", user, err)
		}
		watchdog.Stop()
	}
}

func isSignal(err error, sig string) bool {
	var ee *remote.ExitError
	return errors.As(err, &ee) && ee.Signal == sig
}

// childGone fails t unless pid is gone within 5 s (or a zombie).
func childGone(t *testing.T, s *remote.SSH, pid string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		state, err := s.Run(context.Background(), []string{"sh", "-c", `cut -d' ' -f3 /proc/$1/stat 2>/dev/null; :`, "sh", pid})
		if err != nil {
			t.Fatal(err)
		}
		if st := strings.TrimSpace(string(state)); st == "" || st == "Z" {
			return
		} else if time.Now().After(deadline) {
			t.Errorf("its child (pid %s) is still there, state %s: the kill missed its group", pid, st)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sessions counts the sessions h's sshd has started (LogLevel VERBOSE
// logs "Starting session: command …" for each).
func sessions(t *testing.T, h *testhosts.Host) int {
	t.Helper()
	b, err := os.ReadFile(h.Log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "Starting session: command ")
}

func stderrOf(err error) string {
	var ee *remote.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}
