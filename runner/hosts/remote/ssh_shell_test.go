package remote_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
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
