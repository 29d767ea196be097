package main

import (
	"errors"
	"flag"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

var updateScripts = flag.Bool("update-scripts", false, "rewrite the expected output in testdata/script from what the runner now prints")

// TestScripts runs testdata/script/*.txtar: each is what a user types, and
// the stdout, stderr and exit code they get, with the files it needs
// inline. `runner` is this test binary (see TestMain); node is beside it,
// as $NODE. Run with -update-scripts to rewrite what `cmp` expects.
//
// Besides testscript's own commands, a script has
//
//	exits N CMD [ARGS...]   run CMD as exec does, and want exit code N
//	png FILE                FILE decodes as a PNG image
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       *updateScripts,
		Setup: func(e *testscript.Env) error {
			// No one's ~/.ssh, ssh-agent or terminal is read.
			e.Setenv("HOME", e.WorkDir)
			e.Setenv("SSH_AUTH_SOCK", "")
			// The node the runner uses when a plan names none.
			e.Setenv("NODE", filepath.Join(binDir, "node"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits": exits,
			"png":   decodesPNG,
		},
	})
}

// exits runs a command and checks its exit code: `! exec` only says it
// was not 0, and the runner's codes mean different things (1 failure, 2
// usage or plan, 130 interrupted).
func exits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits N command [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: %q is not an exit code", args[0])
	}
	got := 0
	var ee *exec.ExitError
	switch err := ts.Exec(args[1], args[2:]...); {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("%s: %v", args[1], err)
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// decodesPNG checks a file is a PNG image a viewer would open.
func decodesPNG(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: png FILE")
	}
	f, err := os.Open(ts.MkAbs(args[0]))
	ts.Check(err)
	defer f.Close()
	img, err := png.Decode(f)
	switch {
	case err != nil && !neg:
		ts.Fatalf("%s: %v", args[0], err)
	case err == nil && neg:
		ts.Fatalf("%s decodes as a PNG image", args[0])
	case err == nil:
		ts.Logf("%s: %v PNG", args[0], img.Bounds().Size())
	}
}
