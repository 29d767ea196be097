package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/testbed/clitest"
)

// Two runners at once on one CSV. See faults_test.go for the table every fault joins and the
// harness it runs in.

// (h): two runners at once on one CSV: the second refuses while the first
// holds the lock for its whole exec, and the first is not disturbed.
func TestFaultTwoRunnersAtOnceOnOneCSV(t *testing.T) {
	dir := t.TempDir()
	plan := loopbackPlan(t, dir, "")
	first := startRunner(t, dir, os.Environ(), "exec", plan, "--only", "block_size=1MiB", "--set", "duration=2s", "--set", "total=0")
	first.Until(t, "the first runner's nodes", 30*time.Second, func() bool { return len(localNodes(t)) >= 2 })
	second := runner(t, dir, "exec", plan)
	if second.Code != 1 || !strings.Contains(second.Stderr, "another runner is appending to it") || strings.Contains(second.Stderr, "[1/") {
		t.Fatalf("second runner: exit %d\n%s", second.Code, second.Stderr)
	}
	if code := first.Wait(t, 60*time.Second); code != 0 {
		t.Fatalf("first runner: exit %d\n%s", code, first.Stderr())
	}
	if rows := clitest.WholeCSV(t, filepath.Join(dir, "out/test.csv")); len(rows) != 1 || rows[0].Status != results.StatusOK {
		t.Fatalf("rows: %+v", rows)
	}
}
