package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rdmasweep/results"
)

// runNode runs node with args to its end and returns its stdout, its
// stderr and how it exited.
func runNode(t *testing.T, args ...string) (string, string, *os.ProcessState) {
	t.Helper()
	cmd := exec.Command(nodeBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState
}

// cpuLine finds node run's cpu line in stderr, which must be there once.
func cpuLine(t *testing.T, stderr string) results.RunCPU {
	t.Helper()
	var got []results.RunCPU
	for _, l := range strings.Split(stderr, "\n") {
		_, c, ok, err := results.CutRunCPU([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			got = append(got, c)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d cpu lines in stderr, want 1:\n%s", len(got), stderr)
	}
	return got[0]
}

// node run passes the command's stdout and stderr through as they are,
// adds its cpu line last to stderr, and exits with the command's status.
func TestRunPassesOutputAndStatus(t *testing.T) {
	stdout, stderr, st := runNode(t, "run", "--", "sh", "-c", `printf 'data\n{"type":"x"}\n'; echo said >&2; exit 3`)
	if stdout != "data\n{\"type\":\"x\"}\n" || st.ExitCode() != 3 {
		t.Errorf("stdout %q, exit %d; want the command's data alone and its status 3", stdout, st.ExitCode())
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if len(lines) != 2 || lines[0] != "said" || !strings.HasPrefix(lines[1], results.RunCPUPrefix) {
		t.Errorf("stderr %q, want the command's line, then node's cpu line", stderr)
	}
	cpuLine(t, stderr)
}

// The cpu line is the command's own processes' CPU, its descendants
// included: the shell's own and its children's times, as its
// /proc/PID/stat gives them, and nothing of node's.
func TestRunCPUIsTheCommands(t *testing.T) {
	// A subshell burns CPU; then the shell prints its stat.
	script := `(i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done); cat /proc/$$/stat`
	start := time.Now()
	stdout, stderr, st := runNode(t, "run", "--", "sh", "-c", script)
	wall := time.Since(start).Seconds()
	if !st.Success() {
		t.Fatalf("exit %v: %s", st, stderr)
	}
	f := strings.Fields(stdout[strings.LastIndex(stdout, ")")+1:])
	var ticks float64
	for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime: fields 14-17
		n, err := strconv.Atoi(f[i])
		if err != nil {
			t.Fatalf("stat %q: %v", stdout, err)
		}
		ticks += float64(n)
	}
	own := ticks / 100 // USER_HZ
	c := cpuLine(t, stderr)
	got := c.CPUUserS + c.CPUSysS
	t.Logf("node run: %.3f s CPU over %.3f s; the shell's stat: %.2f s", got, c.CPUWallS, own)
	if own < 0.05 {
		t.Fatalf("the shell used %.2f s; the test needs a busy command", own)
	}
	// cat's own few ms come on top; ticks round down.
	if got < own-0.02 || got > own+0.1 {
		t.Errorf("node run's CPU %.3f s, want the command's %.2f s", got, own)
	}
	if c.CPUWallS <= 0 || c.CPUWallS > wall {
		t.Errorf("wall %.3f s, want within node's %.3f s", c.CPUWallS, wall)
	}
	if *c.PerSecond() > 1.05 {
		t.Errorf("%.2f CPU s per s from a single-threaded command", *c.PerSecond())
	}
}

// The command never outlives node: a deadline stops it, SIGKILL after
// SIGTERM when it ignores that; the end of stdin stops it under
// --stop-on-eof; node's own death kills it; and a command killed by a
// signal has node die of the same one.
func TestRunStopsTheCommand(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		start := time.Now()
		_, stderr, st := runNode(t, "run", "--deadline", "200ms", "--", "sh", "-c", `trap "" TERM; exec sleep 30`)
		took := time.Since(start)
		if st.ExitCode() != 1 || !strings.HasSuffix(stderr, "node: error: run: deadline of 200ms reached: stopped sh\n") {
			t.Errorf("exit %d, stderr %q; want 1 and the deadline named last", st.ExitCode(), stderr)
		}
		cpuLine(t, stderr)
		// It ignores SIGTERM: SIGKILL follows after runStopGrace.
		if took < runStopGrace || took > runStopGrace+5*time.Second {
			t.Errorf("took %s, want the grace %s and little more", took, runStopGrace)
		}
	})
	t.Run("eof", func(t *testing.T) {
		cmd := exec.Command(nodeBin, "run", "--stop-on-eof", "--", "sleep", "30")
		in, _ := cmd.StdinPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(200*time.Millisecond, func() { in.Close() })
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatal("node run still running 10s after stdin closed")
		}
		if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Errorf("node ended %v, want by SIGTERM, as its command", cmd.ProcessState)
		}
	})
	t.Run("node_killed", func(t *testing.T) {
		cmd := exec.Command(nodeBin, "run", "--", "sh", "-c", "echo $$; exec sleep 30")
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 32)
		n, _ := out.Read(buf)
		pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
		if err != nil {
			t.Fatalf("child pid %q: %v", buf[:n], err)
		}
		cmd.Process.Kill() // node alone, not its group
		cmd.Wait()
		deadline := time.Now().Add(5 * time.Second)
		for syscall.Kill(pid, 0) == nil {
			if stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); strings.Contains(string(stat), ") Z ") {
				break // dead, waiting for its reaper
			}
			if time.Now().After(deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("the command (pid %d) outlived node by 5s", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	t.Run("signalled", func(t *testing.T) {
		_, stderr, st := runNode(t, "run", "--", "sh", "-c", "kill -TERM $$")
		if ws := st.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Errorf("node ended %v, want by SIGTERM, as its command", st)
		}
		cpuLine(t, stderr)
	})
}

// A usage error and a command that cannot start leave stdout empty.
func TestRunRefuses(t *testing.T) {
	for _, args := range [][]string{{"run"}, {"run", "--", "/nonexistent/tool"}, {"run", "--bogus"}} {
		stdout, stderr, st := runNode(t, args...)
		if stdout != "" || st.ExitCode() == 0 || !strings.HasPrefix(stderr, "node: error: run: ") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want a failure said on stderr alone", args, st.ExitCode(), stdout, stderr)
		}
	}
}
