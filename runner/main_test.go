package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"rdmasweep/testbed/clitest"
)

// The CLI is tested as a user runs it: the runner and node programs,
// driven through their command lines, judged by exit codes, stderr,
// stdout and the CSV they leave. The scripts in testdata/script are that
// and nothing else; the Go tests here add what a script cannot do, such as
// hurting a run while it goes.

// binDir holds the runner and node the tests run. The runner is this test
// binary, which testscript.Main runs as runMain when it is called by that
// name; node is built beside it, where the runner looks for it by default.
var binDir string

func TestMain(m *testing.M) {
	testscript.Main(withNode{m}, map[string]func(){
		"runner": func() { os.Exit(runMain()) },
	})
}

// withNode builds node beside the runner testscript put on PATH, then
// runs the tests.
type withNode struct{ m *testing.M }

func (w withNode) Run() int {
	runner, err := exec.LookPath("runner")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testscript put no runner on PATH:", err)
		return 1
	}
	binDir = filepath.Dir(runner)
	build := exec.Command("go", "build", "-o", filepath.Join(binDir, "node"), "../node")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build node: %v\n%s", err, out)
		return 1
	}
	return w.m.Run()
}

// runner runs the runner in dir, as this process's environment has it,
// for up to 2 minutes.
func runner(t *testing.T, dir string, args ...string) clitest.Result {
	t.Helper()
	return clitest.Run(t, filepath.Join(binDir, "runner"), dir, nil, 2*time.Minute, args...)
}

// runnerEnv runs the runner in dir with env (SSH hosts: clitest.SSHEnv),
// for up to 3 minutes.
func runnerEnv(t *testing.T, dir string, env []string, args ...string) clitest.Result {
	t.Helper()
	return clitest.Run(t, filepath.Join(binDir, "runner"), dir, env, 3*time.Minute, args...)
}

// startRunner starts the runner in the background, to hurt it mid-point.
func startRunner(t *testing.T, dir string, env []string, args ...string) *clitest.Proc {
	t.Helper()
	return clitest.Start(t, filepath.Join(binDir, "runner"), dir, env, args...)
}

// localNodes lists the node processes of the tests' node on this machine.
func localNodes(t *testing.T) []int {
	t.Helper()
	return clitest.LocalNodes(t, filepath.Join(binDir, "node"))
}
