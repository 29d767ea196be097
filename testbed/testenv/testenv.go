// Package testenv decides what a test does when the machine lacks what it
// needs (root, a tool, a kernel feature). Run by hand, the test skips and
// says why. Under CI=true the same skip is a failure, so nothing silently
// goes untested in CI.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// InCI reports whether the tests run under CI (CI=true).
func InCI() bool { return os.Getenv("CI") == "true" }

// Skip skips t with reason, or fails it under CI.
func Skip(t testing.TB, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("needed under CI=true, but: %s", reason)
	}
	t.Skip(reason)
}

// Unselected skips t because a developer's filter, the environment
// variable env, leaves it out of a run by hand. CI runs every test, so
// under CI=true a filter set at all is a failure, never a skip.
func Unselected(t testing.TB, env, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s narrows the tests, and CI=true runs them all: %s", env, reason)
	}
	t.Skip(reason)
}

// NeedRoot skips (or fails under CI) unless the test runs as root.
func NeedRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skip(t, "needs root (run as root, or under .ci/run)")
	}
}

// NeedTool skips (or fails under CI) unless name is on PATH, and returns
// its path.
func NeedTool(t testing.TB, name, debianPackage string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Skip(t, name+" not found (apt-get install "+debianPackage+")")
	}
	return p
}

// Load is the machine's load average (1, 5 and 15 minutes) and its CPU
// count, for a test to log beside a time or a rate it measured: a
// figure from a busy machine reads differently from an idle one's.
func Load() string {
	b, err := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if err != nil || len(f) < 3 {
		return fmt.Sprintf("load unknown (%d CPUs)", runtime.NumCPU())
	}
	return fmt.Sprintf("load %s %s %s (%d CPUs)", f[0], f[1], f[2], runtime.NumCPU())
}
