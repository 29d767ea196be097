package procstat

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
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
