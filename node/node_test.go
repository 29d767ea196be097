package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"rdmasweep/results"
	"rdmasweep/testbed/testenv"
)

// nodeBin is the real node binary, built once for every test here.
var nodeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "node-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	nodeBin = filepath.Join(dir, "node")
	build := exec.Command("go", "build", "-o", nodeBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build node:", err)
		os.Exit(1)
	}
	// Under go test -exec qemu-aarch64-static (make test-arm64) node is
	// built for the test's own architecture, which this kernel runs only
	// through the emulator (no binfmt is registered): nodeBin execs it so.
	if emu := os.Getenv("RDMASWEEP_NODE_EXEC"); emu != "" {
		script := fmt.Sprintf("#!/bin/sh\nexec %s %s.elf \"$@\"\n", emu, nodeBin)
		if err := errors.Join(os.Rename(nodeBin, nodeBin+".elf"), os.WriteFile(nodeBin, []byte(script), 0o755)); err != nil {
			fmt.Fprintln(os.Stderr, "wrap node:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running node whose stdout events arrive on events.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	events chan any
	lines  []string // every stdout line, once exited
	stderr bytes.Buffer
	exited chan struct{}
}

func start(t *testing.T, stdin string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, events: make(chan any, 100), exited: make(chan struct{})}
	p.cmd = exec.Command(nodeBin, args...)
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if stdin != "" {
		io.WriteString(p.stdin, stdin)
	}
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
	go func() {
		defer close(p.exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines = append(p.lines, sc.Text())
			ev, err := results.Decode(sc.Bytes())
			if err != nil {
				ev = fmt.Errorf("stdout line %q: %w", sc.Text(), err)
			}
			p.events <- ev
		}
		close(p.events)
		p.cmd.Wait()
	}()
	return p
}

// hangGuard is how long a test waits for node's next event or its exit
// before it calls node stuck: d, or emulatorSlowdown × d when node runs
// under an emulator (make test-arm64). These waits only bound a hang;
// the tests whose verdict is a time run natively alone (underEmulator).
func hangGuard(d time.Duration) time.Duration {
	if os.Getenv("RDMASWEEP_NODE_EXEC") != "" {
		return emulatorSlowdown * d
	}
	return d
}

// emulatorSlowdown is how much longer node takes under qemu-user on a
// loaded machine: from start to ready, 0.3 s natively, 1 s or so
// emulated on an idle machine, and up to 8.2 s (15 serves) at load 22,
// where TestControlStdinSecret took 15 s instead of 1.8. Its 30 s wait
// for ready once ran out there.
const emulatorSlowdown = 4

// next returns the next event that is not a warning, failing on timeout.
func (p *proc) next(d time.Duration) any {
	p.t.Helper()
	d = hangGuard(d)
	timeout := time.After(d)
	for {
		select {
		case ev, ok := <-p.events:
			if !ok {
				p.t.Fatalf("node exited early; stderr:\n%s", p.stderr.String())
			}
			if _, w := ev.(*results.Warning); w {
				continue
			}
			return ev
		case <-timeout:
			p.t.Fatalf("no event within %s (%s); %s", d, testenv.Load(), p.stacks())
		}
	}
}

// stacks ends a node that is stuck and returns what it said on stderr,
// with where each of its goroutines was: SIGQUIT makes Go's runtime
// print them and exit (under qemu-user too, which hands the signal to
// the program it runs).
func (p *proc) stacks() string {
	p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.exited:
		return "stderr, ending with its goroutines at SIGQUIT:\n" + p.stderr.String()
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
		return "no exit 10 s after SIGQUIT; stderr:\n" + p.stderr.String()
	}
}

// wait waits for exit and returns the exit code and the last stdout line's
// event.
func (p *proc) wait(d time.Duration) (int, any) {
	p.t.Helper()
	d = hangGuard(d)
	select {
	case <-p.exited:
	case <-time.After(d):
		p.t.Fatalf("node still running after %s (%s); %s", d, testenv.Load(), p.stacks())
	}
	var last any
	if n := len(p.lines); n > 0 {
		last, _ = results.Decode([]byte(p.lines[n-1]))
	}
	return p.cmd.ProcessState.ExitCode(), last
}

func mustType[T any](t *testing.T, ev any) T {
	t.Helper()
	v, ok := ev.(T)
	if !ok {
		t.Fatalf("event %#v, want %T", ev, v)
	}
	return v
}

// serveArgs are the argv the runner builds for a tcp server.
func serveArgs(file string, extra ...string) []string {
	return append([]string{"serve", "--transport", "tcp", "--file", file, "--file-size", "4MiB",
		"--cache", "cold", "--registration", "pinned", "--listen", "127.0.0.1", "--port", "0",
		"--accept-timeout", "20s"}, extra...)
}

func readArgs(port int, extra ...string) []string {
	return append([]string{"read", "--transport", "tcp", "--server", fmt.Sprintf("127.0.0.1:%d", port),
		"--block-size", "64KiB", "--queue-depth", "4", "--qps", "1", "--pattern", "random",
		"--total", "8MiB", "--duration", "0s", "--warmup", "0s"}, extra...)
}

// serveReady starts node serve and returns it with its ready event.
func serveReady(t *testing.T, stdin string, args ...string) (*proc, *results.Ready) {
	t.Helper()
	s := start(t, stdin, args...)
	st := mustType[*results.Started](t, s.next(10*time.Second))
	if st.Role != "serve" || st.PID != s.cmd.Process.Pid || st.PGID <= 0 {
		t.Fatalf("started %+v: want role serve, pid %d", st, s.cmd.Process.Pid)
	}
	if !strings.Contains(s.lines[0], `"type":"started"`) {
		t.Fatalf("first stdout line is %q, want the started event", s.lines[0])
	}
	return s, mustType[*results.Ready](t, s.next(30*time.Second))
}

func TestServeAndReadVerify(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data")
	s, ready := serveReady(t, "", serveArgs(file, "--create")...)
	if ready.Transport != "tcp" || ready.Port <= 0 || !ready.FileCreated || ready.RegistrationS != nil {
		t.Errorf("ready %+v: want tcp, a port, file_created, no registration", ready)
	}
	if ready.CachedFraction < 0 || ready.CachedFraction > 1 {
		t.Errorf("cached_fraction %v outside 0..1", ready.CachedFraction)
	}
	r := start(t, "", readArgs(ready.Port, "--verify")...)
	if st := mustType[*results.Started](t, r.next(10*time.Second)); st.Role != "read" {
		t.Errorf("reader started as %q", st.Role)
	}
	res := mustType[*results.Result](t, r.next(30*time.Second))
	if res.Bytes != 8<<20 || res.Reads != 128 || !res.Verified || res.BandwidthMBs <= 0 || res.IOPS <= 0 {
		t.Errorf("result %+v: want 8MiB in 128 verified reads with positive bandwidth", res)
	}
	if want := float64(res.Bytes) / res.Seconds / 1e6; res.BandwidthMBs < want*0.999 || res.BandwidthMBs > want*1.001 {
		t.Errorf("bandwidth %v MB/s, but bytes/seconds gives %v", res.BandwidthMBs, want)
	}
	// tcp's CPU covers the measured phase: its wall time is the result's
	// seconds, and a verified read costs the reader some CPU.
	if res.CPUWallS < res.Seconds*0.9 || res.CPUWallS > res.Seconds+0.5 || res.CPUUserS+res.CPUSysS <= 0 || res.CPUUserS < 0 || res.CPUSysS < 0 {
		t.Errorf("reader cpu user %v sys %v over %v s, for a measured phase of %v s", res.CPUUserS, res.CPUSysS, res.CPUWallS, res.Seconds)
	}
	// Its busiest thread used some of that, and no more than all of it
	// (getrusage and schedstat account apart: 20 ms of slack).
	if res.CPUThreadS <= 0 || res.CPUThreadS > res.CPUUserS+res.CPUSysS+0.02 {
		t.Errorf("reader's busiest thread %v s of the process's %v s", res.CPUThreadS, res.CPUUserS+res.CPUSysS)
	}
	if code, _ := r.wait(10 * time.Second); code != 0 {
		t.Fatalf("read exited %d: %s", code, r.stderr.String())
	}
	done := mustType[*results.Done](t, s.next(10*time.Second))
	if done.BytesServed != res.Bytes || done.Requests != res.Reads {
		t.Errorf("server served %d bytes in %d requests, reader read %d in %d", done.BytesServed, done.Requests, res.Bytes, res.Reads)
	}
	// The server's CPU window and its session are taken at points a few
	// ms apart; on a 25 ms session that is more than 10 %.
	if done.CPUWallS < done.Seconds*0.9-0.01 || done.CPUWallS > done.Seconds+0.5 || done.CPUUserS < 0 || done.CPUSysS < 0 || done.CPUUserS+done.CPUSysS <= 0 {
		t.Errorf("server cpu user %v sys %v over %v s, for a session of %v s", done.CPUUserS, done.CPUSysS, done.CPUWallS, done.Seconds)
	}
	if done.CPUThreadS <= 0 || done.CPUThreadS > done.CPUUserS+done.CPUSysS+0.02 {
		t.Errorf("server's busiest thread %v s of the process's %v s", done.CPUThreadS, done.CPUUserS+done.CPUSysS)
	}
	if code, _ := s.wait(10 * time.Second); code != 0 {
		t.Fatalf("serve exited %d: %s", code, s.stderr.String())
	}
}

// runPoint runs one serve+read pair to completion and returns the ready
// event and the reader's last event.
func runPoint(t *testing.T, file string, serveExtra, readExtra []string) (*results.Ready, any, int) {
	t.Helper()
	s, ready := serveReady(t, "", serveArgs(file, serveExtra...)...)
	r := start(t, "", readArgs(ready.Port, readExtra...)...)
	code, last := r.wait(30 * time.Second)
	s.wait(10 * time.Second)
	return ready, last, code
}

func TestCreateReuseAndFlippedByte(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data")
	ready, _, code := runPoint(t, file, []string{"--create"}, []string{"--verify"})
	if code != 0 || !ready.FileCreated {
		t.Fatalf("first run: exit %d, file_created %v", code, ready.FileCreated)
	}
	st1, _ := os.Stat(file)
	time.Sleep(20 * time.Millisecond) // let a rewrite show in the mtime
	ready, last, code := runPoint(t, file, []string{"--create"}, []string{"--verify"})
	st2, _ := os.Stat(file)
	if code != 0 || ready.FileCreated || !st2.ModTime().Equal(st1.ModTime()) {
		t.Fatalf("second run: exit %d, file_created %v, mtime %v then %v: want the file reused", code, ready.FileCreated, st1.ModTime(), st2.ModTime())
	}
	if !mustType[*results.Result](t, last).Verified {
		t.Fatal("reused file did not verify")
	}

	// One flipped byte on disk must surface: the bytes come from the file.
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	const at = 3<<20 + 77
	b := []byte{0}
	f.ReadAt(b, at)
	b[0] ^= 1
	f.WriteAt(b, at)
	f.Close()
	_, last, code = runPoint(t, file, []string{"--create"}, []string{"--verify"})
	e := mustType[*results.Error](t, last)
	if code != 1 || !strings.Contains(e.Message, "mismatch") || !strings.Contains(e.Message, fmt.Sprint(at)) {
		t.Fatalf("read of a flipped byte: exit %d, %q; want exit 1 naming the mismatch at %d", code, e.Message, at)
	}
}

func TestCreateRefusesUserFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "mine")
	mine := bytes.Repeat([]byte("user data "), 1<<20)
	os.WriteFile(file, mine, 0o644)
	s := start(t, "", serveArgs(file, "--create")...)
	code, last := s.wait(10 * time.Second)
	e := mustType[*results.Error](t, last)
	if code != 1 || !strings.Contains(e.Message, "not made by node") {
		t.Fatalf("serve --create over a user's file: exit %d, %q", code, e.Message)
	}
	if got, _ := os.ReadFile(file); !bytes.Equal(got, mine) {
		t.Fatal("the user's file was changed")
	}
	if _, err := os.Stat(file + ".rdmasweep"); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a sidecar was written beside the user's file")
	}

	// Without --create the user's file is served, but cannot be verified.
	_, last, code = runPoint(t, file, nil, []string{"--verify"})
	if e := mustType[*results.Error](t, last); code != 1 || !strings.Contains(e.Message, "pattern") {
		t.Fatalf("verify against a user's file: exit %d, %q", code, e.Message)
	}
	_, last, code = runPoint(t, file, nil, nil)
	if r := mustType[*results.Result](t, last); code != 0 || r.Verified || r.Bytes != 8<<20 {
		t.Fatalf("plain read of a user's file: exit %d, %+v", code, r)
	}
}

func TestControlStdinSecret(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data")
	ctl := `{"secret":"00112233445566778899aabbccddeeff"}` + "\n"
	s, ready := serveReady(t, ctl, serveArgs(file, "--create", "--control-stdin")...)
	bad := start(t, `{"secret":"ffeeddccbbaa99887766554433221100"}`+"\n", readArgs(ready.Port, "--control-stdin")...)
	if code, last := bad.wait(10 * time.Second); code != 1 || !strings.Contains(mustType[*results.Error](t, last).Message, "authentication") {
		t.Fatalf("reader with the wrong secret: exit %d, %v", code, last)
	}
	good := start(t, ctl, readArgs(ready.Port, "--control-stdin", "--verify")...)
	mustType[*results.Started](t, good.next(10*time.Second))
	res := mustType[*results.Result](t, good.next(30*time.Second))
	if !res.Verified {
		t.Fatal("reader with the right secret did not verify")
	}
	good.stdin.Close()
	mustType[*results.Done](t, s.next(10*time.Second))
	warned := false
	for _, l := range s.lines {
		warned = warned || strings.Contains(l, `"type":"warning"`) && strings.Contains(l, "refused")
	}
	if !warned {
		t.Errorf("the refused reader left no warning event on the server's stdout:\n%s", strings.Join(s.lines, "\n"))
	}
}

// underEmulator skips a test whose verdict hangs on node's one second of
// grace to stop (stuckGrace) when node runs under qemu-user: there the
// first run of the stop path is translated, which on a loaded machine
// alone can take longer. make test-arm64 leaves these tests out (-skip),
// and every make test runs them natively.
func underEmulator(t *testing.T) {
	t.Helper()
	if emu := os.Getenv("RDMASWEEP_NODE_EXEC"); emu != "" {
		testenv.Skip(t, fmt.Sprintf("node runs under %s, where the %v stop grace times the emulator", emu, stuckGrace))
	}
}

func TestStopsOnStdinEOFAndDeadline(t *testing.T) {
	underEmulator(t)
	file := filepath.Join(t.TempDir(), "data")
	s, _ := serveReady(t, `{"secret":"abcd"}`+"\n", serveArgs(file, "--create", "--control-stdin")...)
	s.stdin.Close()
	start := time.Now()
	code, last := s.wait(3 * time.Second)
	if e := mustType[*results.Error](t, last); code != 1 || e.Message != "stdin closed: stopping" {
		t.Fatalf("serve after stdin EOF: exit %d, %q", code, e.Message)
	}
	t.Logf("stopped %v after stdin EOF", time.Since(start))

	s, _ = serveReady(t, "", serveArgs(file, "--create", "--deadline", "700ms")...)
	code, last = s.wait(5 * time.Second)
	if e := mustType[*results.Error](t, last); code != 1 || !strings.Contains(e.Message, "deadline") {
		t.Fatalf("serve at its deadline: exit %d, %q", code, e.Message)
	}
}

// A serve blocked where no context reaches (open(2) of a FIFO that no one
// writes) still exits soon after stdin closes.
func TestStopsWhenStuckInASystemCall(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, `{"secret":"abcd"}`+"\n", serveArgs(fifo, "--control-stdin")...)
	mustType[*results.Started](t, s.next(5*time.Second))
	time.Sleep(300 * time.Millisecond) // into open(2)
	s.stdin.Close()
	begun := time.Now()
	code, last := s.wait(stuckGrace + 5*time.Second)
	t.Logf("exited %v after stdin EOF", time.Since(begun).Round(time.Millisecond))
	e := mustType[*results.Error](t, last)
	if code != 1 || !strings.HasPrefix(e.Message, "stdin closed: stopping; still busy 1s later") {
		t.Fatalf("stuck serve after stdin EOF: exit %d, %q", code, e.Message)
	}
}

func TestColdOnTmpfsWarns(t *testing.T) {
	var st unix.Statfs_t
	if unix.Statfs("/dev/shm", &st) != nil || st.Type != unix.TMPFS_MAGIC {
		testenv.Skip(t, "needs a tmpfs at /dev/shm")
	}
	dir, err := os.MkdirTemp("/dev/shm", "node-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s := start(t, "", serveArgs(filepath.Join(dir, "data"), "--create", "--accept-timeout", "200ms")...)
	s.wait(10 * time.Second)
	for _, l := range s.lines {
		if strings.Contains(l, `"type":"warning"`) && strings.Contains(l, "tmpfs") {
			return
		}
	}
	t.Fatalf("cold cache on tmpfs gave no warning event:\n%s", strings.Join(s.lines, "\n"))
}

func TestSIGINT(t *testing.T) {
	underEmulator(t)
	file := filepath.Join(t.TempDir(), "data")
	s, _ := serveReady(t, "", serveArgs(file, "--create")...)
	s.cmd.Process.Signal(os.Interrupt)
	code, last := s.wait(3 * time.Second)
	if e := mustType[*results.Error](t, last); code != 130 || !strings.Contains(e.Message, "interrupted") {
		t.Fatalf("serve after SIGINT: exit %d, %q; want 130", code, e.Message)
	}
}

func TestAcceptTimeout(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data")
	args := serveArgs(file, "--create", "--accept-timeout", "400ms") // the later flag wins
	s, _ := serveReady(t, "", args...)
	code, last := s.wait(5 * time.Second)
	if e := mustType[*results.Error](t, last); code != 1 || !strings.Contains(e.Message, "accept timeout") {
		t.Fatalf("serve with no client: exit %d, %q", code, e.Message)
	}
}

func TestFormatText(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data")
	_, ready := serveReady(t, "", serveArgs(file, "--create")...)
	r := start(t, "", readArgs(ready.Port, "--format", "text")...)
	if code, _ := r.wait(30 * time.Second); code != 0 {
		t.Fatalf("read --format text exited %d: %s", code, r.stderr.String())
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`^Bandwidth: [0-9.]+ MB/s$`),
		regexp.MustCompile(`^latency per block: [0-9.]+ us$`),
		regexp.MustCompile(`^iops: [0-9]+$`),
	}
	if len(r.lines) != len(want) {
		t.Fatalf("text output:\n%s\nwant exactly the three classic lines", strings.Join(r.lines, "\n"))
	}
	for i, re := range want {
		if !re.MatchString(r.lines[i]) {
			t.Errorf("line %d %q does not match %s", i+1, r.lines[i], re)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"bogus"},
		{"serve", "--file", "x", "--file-size", "4kb"},
		{"read", "--server", "127.0.0.1:1", "--pattern", "zigzag"},
		{"read", "--server", "127.0.0.1:1", "stray"},
		{"read", "--server", "127.0.0.1:1", "--rdma-connect", "udp"},
		{"read", "--server", "127.0.0.1:1", "--cq-moderation", "-1"},
		{"read", "--server", "127.0.0.1:1", "--max-rd-atomic", "256"},
		{"read", "--server", "127.0.0.1:1", "--traffic-class", "256"},
		{"serve", "--file", "x", "--file-size", "1MiB", "--retry-cnt", "8"},
		{"serve", "--file", "x", "--file-size", "1MiB", "--odp-prefetch"},
	} {
		p := start(t, "", args...)
		code, last := p.wait(10 * time.Second)
		if e, ok := last.(*results.Error); code != 2 || !ok || e.Message == "" {
			t.Errorf("node %q: exit %d, last line %#v; want exit 2 and an error event", args, code, last)
		}
	}
}

// TestHelp checks -h as a person uses it: the help once, on stdout, with
// the flags' defaults, nothing on stderr, exit 0. No args at all is still a
// usage error (TestUsageErrors).
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // a line the help must hold
	}{
		{[]string{"-h"}, "usage: node serve|read|"},
		{[]string{"--help"}, "usage: node serve|read|"},
		{[]string{"help"}, "usage: node serve|read|"},
		{[]string{"read", "-h"}, "(default -1)"}, // --gid-index
		{[]string{"serve", "--help"}, "(default tcp)"},
		{[]string{"run", "-h"}, "usage: node run "},
		{[]string{"version", "-h"}, "  --json"},
	} {
		cmd := exec.Command(nodeBin, tc.args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		out := stdout.String()
		switch {
		case err != nil:
			t.Errorf("node %q: %v (stderr %q)", tc.args, err, stderr.String())
		case stderr.Len() > 0:
			t.Errorf("node %q wrote to stderr: %q", tc.args, stderr.String())
		case strings.Count(out, "usage: node") != 1 || strings.Contains(out, `"type"`):
			t.Errorf("node %q: want the usage once and no event, got %q", tc.args, out)
		case !strings.Contains(out, tc.want):
			t.Errorf("node %q: help lacks %q:\n%s", tc.args, tc.want, out)
		}
	}
}

func TestVersionJSON(t *testing.T) {
	out, err := exec.Command(nodeBin, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v results.Version
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("version --json printed %q: %v", out, err)
	}
	if v.Version == "" || !strings.HasPrefix(v.Go, "go") || v.Arch == "" || len(v.Transports) == 0 || v.Transports[0] == "" {
		t.Errorf("version %+v lacks a field", v)
	}
	found := false
	for _, tr := range v.Transports {
		found = found || tr == "tcp"
	}
	if !found {
		t.Errorf("transports %v lack tcp", v.Transports)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "4096": 4096, "4KiB": 4096, "1MiB": 1 << 20, "2GiB": 2 << 30, "1TiB": 1 << 40, "4KB": 4000, "3MB": 3e6, "1GB": 1e9} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "4kb", "4K", "-1", "1.5GiB", "KiB", "99999999999TiB"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) accepted", in)
		}
	}
}

// TestPrepare holds node prepare to serve's preparation: it creates the
// file with its sidecar (so a later serve reuses it), leaves it warm or
// cold as asked, reports that in a ready event with nothing listening,
// and exits 0 on its own.
func TestPrepare(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f.dat")
	for i, cache := range []string{"warm", "cold"} {
		p := start(t, "", "prepare", "--transport", "tcp", "--file", file, "--file-size", "4MiB", "--create", "--cache", cache)
		st := mustType[*results.Started](t, p.next(10*time.Second))
		rd := mustType[*results.Ready](t, p.next(10*time.Second))
		code, _ := p.wait(10 * time.Second)
		if code != 0 || st.Role != "prepare" || rd.Port != 0 || rd.Address != "" || rd.FileCreated != (i == 0) {
			t.Fatalf("prepare --cache %s: exit %d, started %+v, ready %+v\n%s", cache, code, st, rd, p.stderr.String())
		}
		if cache == "warm" && rd.CachedFraction != 1 {
			t.Errorf("warm: cached_fraction %v, want 1", rd.CachedFraction)
		}
	}
	if st, err := os.Stat(file); err != nil || st.Size() != 4<<20 {
		t.Fatalf("prepared file: %v %v", st, err)
	}
	if _, err := os.Stat(file + ".rdmasweep"); err != nil {
		t.Fatalf("no sidecar: %v", err)
	}
}

// TestGoAt checks a go that names a start time: the two clients are told
// at once but at different moments, and both start reading at the time
// named, not when their go arrived (what makes srun's late stdin harmless).
func TestGoAt(t *testing.T) {
	// The second go arrives a second after the first, both well before
	// the time they name: a client that started on its go's arrival
	// would start before that time, and a second apart. A client is
	// never early; how late it may be is a loaded machine's (or the
	// emulator's) wake-up, so its bound has margin: 500 ms, where
	// TestBenchGoAt (-tags bench) holds the idle machine's 150 ms.
	at, starts := goAt(t, 2*time.Second, time.Second)
	for i, st := range starts {
		if st.Before(at) || st.After(at.Add(500*time.Millisecond)) {
			t.Errorf("client %d started reading at %s, %v after the time the go named; want 0 to 500 ms", i+1, st.Format(time.StampMicro), st.Sub(at))
		}
	}
	if d := starts[1].Sub(starts[0]).Abs(); d > 500*time.Millisecond {
		t.Errorf("the clients started %v apart, though their go arrived 1 s apart with one start time", d)
	}
}

// goAt serves two clients waiting at a barrier, tells each to go at a
// time ahead from now, the second go apart after the first, and returns
// that time and when each client started reading, by its result.
func goAt(t *testing.T, ahead, apart time.Duration) (time.Time, []time.Time) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "data")
	ctl := `{"secret":"00112233445566778899aabbccddeeff"}` + "\n"
	s, ready := serveReady(t, ctl, serveArgs(file, "--create", "--cache", "warm", "--control-stdin", "--clients", "2")...)
	var clients []*proc
	for range 2 {
		c := start(t, ctl, readArgs(ready.Port, "--control-stdin", "--barrier", "--total", "0", "--duration", "200ms")...)
		mustType[*results.Started](t, c.next(10*time.Second))
		mustType[*results.Ready](t, c.next(10*time.Second))
		clients = append(clients, c)
	}
	at := time.Now().Add(ahead)
	line := fmt.Sprintf(`{"go":true,"at_unix_ns":%d}`+"\n", at.UnixNano())
	io.WriteString(clients[0].stdin, line)
	time.Sleep(apart) // the second go arrives late
	io.WriteString(clients[1].stdin, line)
	var starts []time.Time
	for _, c := range clients {
		res := mustType[*results.Result](t, c.next(20*time.Second))
		starts = append(starts, time.Unix(0, res.StartUnixNs))
		c.stdin.Close()
	}
	mustType[*results.Done](t, s.next(10*time.Second))
	t.Logf("started %v and %v after the named time, %v apart; %s", starts[0].Sub(at), starts[1].Sub(at), starts[1].Sub(starts[0]).Abs(), testenv.Load())
	return at, starts
}

// TestFanInWithBarrier is issue 13's node side: one server serving two
// clients at once (--clients 2), each client connected and registered and
// waiting (--barrier) until its control stdin says go, then reading; each
// reports its measured phase's start on the wall clock, its intervals and
// its latency histogram, and the server each client's session.
func TestFanInWithBarrier(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data")
	ctl := `{"secret":"00112233445566778899aabbccddeeff"}` + "\n"
	s, ready := serveReady(t, ctl, serveArgs(file, "--create", "--cache", "warm", "--control-stdin", "--clients", "2")...)
	var clients []*proc
	for range 2 {
		c := start(t, ctl, readArgs(ready.Port, "--control-stdin", "--verify", "--barrier", "--interval", "50ms",
			"--total", "0", "--duration", "500ms")...)
		mustType[*results.Started](t, c.next(10*time.Second))
		mustType[*results.Ready](t, c.next(10*time.Second))
		clients = append(clients, c)
	}
	// Connected and held: no client reads before go.
	time.Sleep(300 * time.Millisecond)
	for _, c := range clients {
		select {
		case ev := <-c.events:
			t.Fatalf("a client said %v before go", ev)
		default:
		}
	}
	released := time.Now()
	for _, c := range clients {
		io.WriteString(c.stdin, `{"go":true}`+"\n")
	}
	for _, c := range clients {
		var intervals []*results.Interval
		var res *results.Result
		for res == nil {
			switch ev := c.next(20 * time.Second).(type) {
			case *results.Interval:
				intervals = append(intervals, ev)
			case *results.Result:
				res = ev
			default:
				t.Fatalf("unexpected %#v", ev)
			}
		}
		if !res.Verified || res.Histogram == nil || res.Histogram.N != uint64(res.Reads) {
			t.Fatalf("result %+v: want verified, with a histogram of every read", res)
		}
		if start := time.Unix(0, res.StartUnixNs); start.Before(released.Add(-time.Second)) || start.After(released.Add(5*time.Second)) {
			t.Errorf("measured phase started at %v; go was sent at %v", start, released)
		}
		var reads int64
		for i, iv := range intervals {
			reads += iv.Reads
			if iv.Seconds != 0.05 || iv.StartUnixNs != res.StartUnixNs+int64(i)*50e6 || iv.Bytes != iv.Reads*64<<10 {
				t.Errorf("interval %d: %+v", i, iv)
			}
		}
		if len(intervals) < 9 || reads != res.Reads {
			t.Errorf("%d intervals of %d reads in all; want about 10 adding up to the result's %d", len(intervals), reads, res.Reads)
		}
		c.stdin.Close()
	}
	done := mustType[*results.Done](t, s.next(10*time.Second))
	if len(done.Connections) != 2 || done.Connections[0].BytesServed+done.Connections[1].BytesServed != done.BytesServed {
		t.Fatalf("done %+v: want two sessions adding up to the total", done)
	}
}

// TestHostJSON: node host --json reports what runner check judges memory
// by, read from this very host.
func TestHostJSON(t *testing.T) {
	out, err := exec.Command(nodeBin, "host", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var h results.Host
	if err := json.Unmarshal(out, &h); err != nil {
		t.Fatalf("host --json printed %q: %v", out, err)
	}
	var u unix.Utsname
	unix.Uname(&u)
	if h.Type != results.TypeHost || h.Kernel != unix.ByteSliceToString(u.Release[:]) || h.MemTotalBytes <= 0 ||
		h.MemAvailableBytes <= 0 || h.MemAvailableBytes > h.MemTotalBytes || h.NUMANodes < 1 || h.PageSize < 4096 {
		t.Errorf("host %+v: want this kernel, memory figures with available ≤ total, NUMA nodes and a page size", h)
	}
}

// TestMakeNodeRDMAMissingLibs: where the static libraries are missing,
// make node-rdma fails before compiling and says what to install, and how
// to build where no distribution ships them.
func TestMakeNodeRDMAMissingLibs(t *testing.T) {
	testenv.NeedTool(t, "make", "make")
	out, err := exec.Command("make", "-C", "..", "node-rdma", "RDMA_LIBDIR=/nonexistent").CombinedOutput()
	for _, want := range []string{"libibverbs.a", "librdmacm.a", "apt-get install libibverbs-dev librdmacm-dev", "RHEL", "container"} {
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("make node-rdma without the static libraries: %v, output lacks %q:\n%s", err, want, out)
		}
	}
	if strings.Contains(string(out), "go build") {
		t.Errorf("make node-rdma compiled although the libraries are missing:\n%s", out)
	}
}
