package procstat

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStartTime: a child whose comm holds ") " has a start time at or after
// this process's and within minutes of it (a field counted from the first
// ')' would be another, vsize's bytes), and a pid with no process has none.
func TestStartTime(t *testing.T) {
	self, err := strconv.ParseInt(StartTime(os.Getpid()), 10, 64)
	if err != nil {
		t.Fatalf("this process's start time: %v", err)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	odd := filepath.Join(t.TempDir(), "x) y")
	if err := os.Symlink(sleep, odd); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(odd, "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	child, err := strconv.ParseInt(StartTime(cmd.Process.Pid), 10, 64)
	if err != nil || child < self || child-self > 100*600 {
		t.Errorf("the child %q's start time %d (%v); want at or after this process's %d, within 10 minutes of clock ticks", filepath.Base(odd), child, err, self)
	}
	if got := StartTime(1 << 22); got != "" {
		t.Errorf("start time %q for a pid with no process", got)
	}
}

// TestThreadCPU: a thread that spins until it has used 200 ms of its own
// CPU (its thread clock, so a loaded machine only makes it take longer)
// is the busiest between two readings, by at least 150 ms (stat's 10 ms
// ticks where schedstat is missing), and at most what the whole process
// used.
func TestThreadCPU(t *testing.T) {
	before := ThreadCPU(os.Getpid())
	if len(before) == 0 {
		t.Fatal("no threads read from /proc/self/task")
	}
	var ru0, ru1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	tid := make(chan int)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		// The thread may be one the runtime made earlier, with CPU time
		// of its own already: spin for 200 ms more than it had.
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
		for had := time.Duration(ts.Nano()); time.Duration(ts.Nano())-had < 200*time.Millisecond; {
			unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
		}
		tid <- unix.Gettid()
	}()
	spinner := <-tid
	after := ThreadCPU(os.Getpid())
	unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	busiest := Busiest(before, after)
	whole := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	t.Logf("busiest thread %s (spinner %d: %s), the process %s", busiest, spinner, after[spinner]-before[spinner], whole)
	if after[spinner]-before[spinner] < 150*time.Millisecond || busiest < after[spinner]-before[spinner] {
		t.Errorf("spinner %d used %s, busiest %s; want the spinner at 150 ms or more, and busiest at least that", spinner, after[spinner]-before[spinner], busiest)
	}
	if busiest > whole+20*time.Millisecond {
		t.Errorf("busiest thread %s, more than the whole process's %s", busiest, whole)
	}
}

// TestStatCPU: utime and stime are counted after comm's last ')', whatever
// comm holds; a line cut short gives nothing.
func TestStatCPU(t *testing.T) {
	line := "4242 (a) b (c) S 1 4242 4242 0 -1 4194304 100 0 0 0 30 12 0 0 20 0 1 0 5000 0 0\n"
	if d, ok := statCPU([]byte(line)); !ok || d != 420*time.Millisecond {
		t.Errorf("statCPU = %s, %v; want 42 ticks, 420ms", d, ok)
	}
	if _, ok := statCPU([]byte("4242 (a) S 1 4242")); ok {
		t.Error("statCPU took a line cut short")
	}
}
