package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
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
