// Package hosttest is the one test suite every remote.Host implementation
// passes (Local, SSH, Slurm), as restic's backends pass one suite: each
// implementation's _test.go calls Run with a Target.
//
// It checks what the runner relies on: Run's stdout and its *ExitError
// with stderr, Start's stdin reaching the process and its stdout and
// stderr streams, stdin EOF reaching the process, Signal to the process
// group (also of a process that printed nothing, and of a stopped one),
// Wait's results, cancellation of Run, Upload's atomic replacement and
// its up-to-date detection, and that nothing is left running afterwards.
//
// The commands need a POSIX sh with cat, sleep, printf, sha256sum, stat
// and ls on the target.
package hosttest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"rdmasweep/runner/hosts/remote"
)

// Target is one implementation under test.
type Target struct {
	// New returns a fresh Host; the suite closes it.
	New func(t *testing.T) remote.Host
	// Dir is an absolute directory on the target, private to the test,
	// that the suite may create and fill.
	Dir string
	// Leftovers describes, for a person, whatever the suite's commands
	// left running on the target (processes, job steps); nil when none.
	// The suite polls it after each case until it is empty.
	Leftovers func(t *testing.T) []string
	// Slack is what a timing assertion allows beyond its bound (0 =
	// 1.5 s): starting or cancelling a command costs more on some hosts.
	Slack time.Duration
}

// EnvKey is set, to a token of the run, in the test process's environment
// while the suite runs: a command Local starts inherits it, which is how
// LocalLeftovers finds what is left of them.
const EnvKey = "RDMASWEEP_HOSTTEST"

// Run runs every case against the target, each on a fresh Host.
func Run(t *testing.T, tg Target) {
	if tg.Slack == 0 {
		tg.Slack = 1500 * time.Millisecond
	}
	token := randomToken()
	t.Setenv(EnvKey, token)
	cases := []struct {
		name string
		fn   func(*testing.T, Target, remote.Host)
	}{
		{"RunStdout", testRunStdout},
		{"RunExitError", testRunExitError},
		{"RunNoStdin", testRunNoStdin},
		{"RunCancel", testRunCancel},
		{"StartStreams", testStartStreams},
		{"StartInteractive", testStartInteractive},
		{"StdinEOF", testStdinEOF},
		{"WaitExitZero", testWaitExitZero},
		{"SignalGroup", testSignalGroup},
		{"SignalSilent", testSignalSilent},
		{"SignalStopped", testSignalStopped},
		{"Upload", testUpload},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := tg.New(t)
			c.fn(t, tg, h)
			if err := h.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			WaitNoLeftovers(t, tg.Leftovers)
		})
	}
}

// WaitNoLeftovers polls leftovers for up to 15 s until it reports none,
// else fails the test with what is left.
func WaitNoLeftovers(t *testing.T, leftovers func(t *testing.T) []string) {
	t.Helper()
	if leftovers == nil {
		return
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		left := leftovers(t)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("left running:\n  %s", strings.Join(left, "\n  "))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// LocalLeftovers lists the processes, other than the test's own, whose
// environment holds the suite's token: what Local started and left
// running.
func LocalLeftovers(t *testing.T) []string {
	want := []byte(EnvKey + "=" + os.Getenv(EnvKey) + "\x00")
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var out []string
	for _, p := range procs {
		pid, _ := strconv.Atoi(filepath.Base(p))
		if pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(p + "/environ")
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		stat, _ := os.ReadFile(p + "/stat")
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "Z" {
			continue // a zombie runs nothing; its parent reaps it
		}
		cmd, _ := os.ReadFile(p + "/cmdline")
		out = append(out, fmt.Sprintf("pid %d: %s", pid, strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")))
	}
	return out
}

func randomToken() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Arguments with spaces, quotes and shell syntax reach the command as
// they are, and Run returns exactly its stdout.
func testRunStdout(t *testing.T, tg Target, h remote.Host) {
	out, err := h.Run(ctxFor(t), []string{"printf", "[%s]\n", "a b", `c'd"e`, "$HOME", "", "*"})
	if want := "[a b]\n[c'd\"e]\n[$HOME]\n[]\n[*]\n"; err != nil || string(out) != want {
		t.Errorf("Run printf = %q, %v; want %q", out, err, want)
	}
}

// A non-zero exit is an *ExitError with the status and exactly the
// command's stderr; stdout is still returned.
func testRunExitError(t *testing.T, tg Target, h remote.Host) {
	out, err := h.Run(ctxFor(t), []string{"sh", "-c", "echo out; echo oops >&2; exit 3"})
	var ee *remote.ExitError
	if !errors.As(err, &ee) || ee.Status != 3 || ee.Signal != "" || string(ee.Stderr) != "oops\n" {
		t.Errorf("Run exit 3 = %#v; want an ExitError, status 3, stderr %q", err, "oops\n")
	}
	if string(out) != "out\n" {
		t.Errorf("Run exit 3 stdout = %q, want %q", out, "out\n")
	}
}

// Run gives the command no stdin: a reader sees EOF at once.
func testRunNoStdin(t *testing.T, tg Target, h remote.Host) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := h.Run(ctx, []string{"sh", "-c", "cat; echo done"})
	if err != nil || string(out) != "done\n" {
		t.Errorf("Run cat = %q, %v; want EOF on stdin and %q", out, err, "done\n")
	}
}

// Cancelling Run's ctx returns ctx's error promptly and stops the
// command (the leftover check after the case sees to that).
func testRunCancel(t *testing.T, tg Target, h remote.Host) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := h.Run(ctx, []string{"sh", "-c", "sleep 60 & sleep 60; wait"})
	if el := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || el > 500*time.Millisecond+tg.Slack {
		t.Errorf("Run cancelled after 500ms = %v after %v; want the deadline error within %v", err, el, 500*time.Millisecond+tg.Slack)
	}
}

// readBoth reads a process's stdout and stderr to EOF, then waits.
func readBoth(p remote.Process) (stdout, stderr []byte, err error) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); stdout, _ = io.ReadAll(p.Stdout()) }()
	go func() { defer wg.Done(); stderr, _ = io.ReadAll(p.Stderr()) }()
	wg.Wait()
	return stdout, stderr, p.Wait()
}

// Start: arguments, stdin in, stdout and stderr apart, exit status out.
func testStartStreams(t *testing.T, tg Target, h remote.Host) {
	p, err := h.Start(ctxFor(t), []string{"sh", "-c", `echo "args: $*"; cat; echo "to stderr: $1" >&2; exit 7`, "sh", "a b", `c'd"e`, "$HOME"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	io.WriteString(p.Stdin(), "from stdin\n")
	p.Stdin().Close()
	stdout, stderr, err := readBoth(p)
	if want := "args: a b c'd\"e $HOME\nfrom stdin\n"; string(stdout) != want {
		t.Errorf("stdout = %q, want %q", stdout, want)
	}
	if want := "to stderr: a b\n"; string(stderr) != want {
		t.Errorf("stderr = %q, want %q", stderr, want)
	}
	var ee *remote.ExitError
	if !errors.As(err, &ee) || ee.Status != 7 || ee.Signal != "" {
		t.Errorf("Wait = %v, want exit status 7", err)
	}
}

// stdin and stdout stream both ways while the process runs: a line
// written is answered before the next is sent (the runner's "go" to
// waiting clients depends on it).
func testStartInteractive(t *testing.T, tg Target, h remote.Host) {
	p, err := h.Start(ctxFor(t), []string{"sh", "-c", `while read -r l; do echo "got $l"; echo "err $l" >&2; done; echo bye`})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	errs := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(p.Stderr()); errs <- b }()
	lines := make(chan string)
	go func() {
		buf := make([]byte, 0, 64)
		one := make([]byte, 1)
		for {
			if _, err := p.Stdout().Read(one); err != nil {
				close(lines)
				return
			}
			buf = append(buf, one[0])
			if one[0] == '\n' {
				lines <- string(buf)
				buf = buf[:0]
			}
		}
	}()
	for _, w := range []string{"one", "two"} {
		if _, err := io.WriteString(p.Stdin(), w+"\n"); err != nil {
			t.Fatalf("write %q: %v", w, err)
		}
		select {
		case got := <-lines:
			if got != "got "+w+"\n" {
				t.Errorf("answer to %q = %q", w, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no answer to %q within 10s: stdin or stdout does not stream", w)
		}
	}
	p.Stdin().Close()
	if got := <-lines; got != "bye\n" {
		t.Errorf("after stdin closed: %q, want %q", got, "bye\n")
	}
	for range lines {
	}
	if err := p.Wait(); err != nil {
		t.Errorf("Wait = %v", err)
	}
	if got := string(<-errs); got != "err one\nerr two\n" {
		t.Errorf("stderr = %q", got)
	}
}

// Closing stdin is seen by the process as EOF.
func testStdinEOF(t *testing.T, tg Target, h remote.Host) {
	p, err := h.Start(ctxFor(t), []string{"sh", "-c", "cat >/dev/null; echo saw EOF"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	io.WriteString(p.Stdin(), "some input\n")
	p.Stdin().Close()
	done := make(chan struct{})
	var stdout []byte
	go func() {
		stdout, _, err = readBoth(p)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		p.Signal(syscall.SIGKILL)
		<-done
		t.Fatalf("the process did not see EOF on stdin within 20s")
	}
	if err != nil || string(stdout) != "saw EOF\n" {
		t.Errorf("after stdin closed: %q, %v", stdout, err)
	}
}

func testWaitExitZero(t *testing.T, tg Target, h remote.Host) {
	p, err := h.Start(ctxFor(t), []string{"true"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	p.Stdin().Close()
	if stdout, stderr, err := readBoth(p); err != nil || len(stdout) != 0 || len(stderr) != 0 {
		t.Errorf("true: stdout %q, stderr %q, Wait %v; want nothing and nil", stdout, stderr, err)
	}
	// Signal after the end is not an error: there is nothing to stop.
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Errorf("Signal after exit = %v, want nil", err)
	}
}

// The process leads its process group, and SIGTERM reaches the whole
// group: a child in the background goes too (the leftover check). The
// leader execs sleep, so how it ends does not depend on which of the two
// the signal reaches first (Slurm signals a step's processes one by one).
func testSignalGroup(t *testing.T, tg Target, h remote.Host) {
	p, err := h.Start(ctxFor(t), []string{"sh", "-c", `sleep 60 & read -r _ _ _ _ pg _ < /proc/$$/stat; echo "$$ $pg"; exec sleep 61`})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	go io.Copy(io.Discard, p.Stderr())
	line := make([]byte, 64)
	n, _ := p.Stdout().Read(line)
	ids := strings.Fields(string(line[:n]))
	if len(ids) != 2 || ids[0] != ids[1] {
		t.Errorf("pid and process group = %q, want the process to lead its group", line[:n])
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal TERM: %v", err)
	}
	go io.Copy(io.Discard, p.Stdout())
	var ee *remote.ExitError
	if err := p.Wait(); !errors.As(err, &ee) || ee.Signal != "TERM" || ee.Status != -1 {
		t.Errorf("Wait after SIGTERM = %v, want killed by TERM", err)
	}
}

// A process that has printed nothing can be signalled.
func testSignalSilent(t *testing.T, tg Target, h remote.Host) {
	p, err := h.Start(ctxFor(t), []string{"sleep", "60"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal TERM: %v", err)
	}
	var ee *remote.ExitError
	if _, _, err := readBoth(p); !errors.As(err, &ee) || ee.Signal != "TERM" {
		t.Errorf("Wait after SIGTERM = %v, want killed by TERM", err)
	}
}

// A stopped process keeps SIGTERM pending, and SIGKILL ends it.
func testSignalStopped(t *testing.T, tg Target, h remote.Host) {
	ctx := ctxFor(t)
	p, err := h.Start(ctx, []string{"sh", "-c", `echo $$; kill -STOP $$; echo not reached`})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	go io.Copy(io.Discard, p.Stderr())
	line := make([]byte, 64)
	n, _ := p.Stdout().Read(line)
	pid := strings.TrimSpace(string(line[:n]))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out, _ := h.Run(ctx, []string{"cat", "/proc/" + pid + "/stat"})
		if f := strings.Fields(string(out[bytes.LastIndexByte(out, ')')+1:])); len(f) > 0 && f[0] == "T" {
			break
		}
		if time.Now().After(deadline) {
			p.Signal(syscall.SIGKILL)
			t.Fatalf("process %s never stopped: %q", pid, out)
		}
	}
	exited := make(chan error, 1)
	go func() {
		io.Copy(io.Discard, p.Stdout())
		exited <- p.Wait()
	}()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("Signal TERM: %v", err)
	}
	select {
	case err := <-exited:
		t.Fatalf("a stopped process ended on TERM: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("Signal KILL: %v", err)
	}
	var ee *remote.ExitError
	if err := <-exited; !errors.As(err, &ee) || ee.Signal != "KILL" {
		t.Errorf("Wait after SIGKILL = %v, want killed by KILL", err)
	}
}

// Upload creates directories, writes 0755 atomically (no temporary file
// left, a running old copy undisturbed), knows an up-to-date file, and
// sends a changed one again.
func testUpload(t *testing.T, tg Target, h remote.Host) {
	ctx := ctxFor(t)
	if _, err := h.Upload(ctx, os.Args[0], "relative/path"); err == nil {
		t.Errorf("Upload to a relative path succeeded")
	}
	local := filepath.Join(t.TempDir(), "node")
	v1 := "#!/bin/sh\necho v1 \"$1\"\nexec sleep \"${2:-0}\"\n"
	if err := os.WriteFile(local, []byte(v1), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := tg.Dir + "/dir with space"
	target := dir + "/it's node"
	res, err := h.Upload(ctx, local, target)
	if err != nil || res.UpToDate || res.BytesSent != int64(len(v1)) {
		t.Fatalf("first Upload = %+v, %v; want %d bytes sent", res, err, len(v1))
	}
	sum := sha256.Sum256([]byte(v1))
	out, err := h.Run(ctx, []string{"sh", "-c", `sha256sum < "$1" && stat -c %a "$1" && ls -A "$2"`, "sh", target, dir})
	if want := hex.EncodeToString(sum[:]) + "  -\n755\nit's node\n"; err != nil || string(out) != want {
		t.Errorf("on the host after Upload: %q, %v; want %q", out, err, want)
	}
	if out, err := h.Run(ctx, []string{target, "x"}); err != nil || string(out) != "v1 x\n" {
		t.Errorf("run the uploaded file: %q, %v", out, err)
	}
	res, err = h.Upload(ctx, local, target)
	if err != nil || !res.UpToDate || res.BytesSent != 0 {
		t.Errorf("second Upload = %+v, %v; want up to date, nothing sent", res, err)
	}

	// The old copy runs while the new one replaces it.
	old, err := h.Start(ctx, []string{target, "old", "60"})
	if err != nil {
		t.Fatalf("start the old copy: %v", err)
	}
	go io.Copy(io.Discard, old.Stderr())
	line := make([]byte, 64)
	n, _ := old.Stdout().Read(line)
	if string(line[:n]) != "v1 old\n" {
		t.Errorf("old copy printed %q", line[:n])
	}
	v2 := "#!/bin/sh\necho v2\n"
	os.WriteFile(local, []byte(v2), 0o644)
	res, err = h.Upload(ctx, local, target)
	if err != nil || res.UpToDate || res.BytesSent != int64(len(v2)) {
		t.Errorf("Upload of a changed file while the old one runs = %+v, %v", res, err)
	}
	if out, err := h.Run(ctx, []string{target}); err != nil || string(out) != "v2\n" {
		t.Errorf("run the replaced file: %q, %v", out, err)
	}
	if out, err := h.Run(ctx, []string{"ls", "-A", dir}); err != nil || string(out) != "it's node\n" {
		t.Errorf("directory after the uploads holds %q, %v; want only the file", out, err)
	}
	old.Signal(syscall.SIGKILL)
	go io.Copy(io.Discard, old.Stdout())
	old.Wait()
}
