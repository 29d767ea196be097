package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/results"
	"rdmasweep/testbed/testenv"
)

// node, told its sha256 by the runner's guard, checks its own executable
// before any command: a replaced file (the same user's other build
// renamed over it) is refused before it serves anything; the right one
// runs, and the variable is gone for its children.
func TestSelfCheck(t *testing.T) {
	exe, err := os.ReadFile(selfExe)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(exe)
	sum := hex.EncodeToString(h[:])
	runWith := func(want string) (string, error) {
		t.Setenv(results.NodeSHA256Env, want)
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), []string{"version", "--json"}, strings.NewReader(""), &stdout, &stderr)
		if v, ok := os.LookupEnv(results.NodeSHA256Env); ok {
			t.Errorf("%s is still set (%q) after the check", results.NodeSHA256Env, v)
		}
		return stdout.String(), err
	}
	other := strings.Repeat("0", 64)
	out, err := runWith(other)
	if err == nil || !strings.Contains(err.Error(), "not the node the runner deployed") || strings.Contains(out, `"version"`) {
		t.Errorf("with another sha256: %v, printed %q; want a refusal before the command", err, out)
	}
	if !strings.Contains(out, `"type":"error"`) {
		t.Errorf("the refusal is not node's error event: %q", out)
	}
	fi, err := os.Stat(selfExe)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		t.Logf("the test binary is group- or other-writable (%v): the right sha256 would be refused for that, so it is not tried", fi.Mode())
		return
	}
	if out, err := runWith(sum); err != nil || !strings.Contains(out, "version") {
		t.Errorf("with its own sha256: %v, printed %q", err, out)
	}
}

// checkExe's rules on a copy of an executable: besides its sha256, the
// file and its directory must be this uid's and not writable by group or
// others, whatever the mode of the rest. Each case refuses with why, or
// passes.
func TestSelfCheckRules(t *testing.T) {
	body := []byte("#!/bin/sh\nexit 0\n")
	h := sha256.Sum256(body)
	sum := hex.EncodeToString(h[:])
	for _, c := range []struct {
		name  string
		root  bool // needs root: chown to another user
		setup func(t *testing.T, dir, file string)
		why   string // "" passes
	}{
		{"own 0755 file in an own 0700 directory", false, func(t *testing.T, dir, file string) {}, ""},
		{"file group-writable", false, func(t *testing.T, dir, file string) { mustChmod(t, file, 0o775) }, "group or others may write"},
		{"file other-writable", false, func(t *testing.T, dir, file string) { mustChmod(t, file, 0o757) }, "group or others may write"},
		{"directory group-writable", false, func(t *testing.T, dir, file string) { mustChmod(t, dir, 0o770) }, "group or others may write"},
		{"directory other-writable", false, func(t *testing.T, dir, file string) { mustChmod(t, dir, 0o703) }, "group or others may write"},
		{"file another user's", true, func(t *testing.T, dir, file string) { mustChown(t, file, 65534) }, "belongs to uid 65534"},
		{"directory another user's", true, func(t *testing.T, dir, file string) { mustChown(t, dir, 65534) }, "belongs to uid 65534"},
		{"another build", false, func(t *testing.T, dir, file string) {
			if err := os.WriteFile(file, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "not the node the runner deployed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.root && os.Geteuid() != 0 {
				testenv.NeedRoot(t)
			}
			dir := filepath.Join(t.TempDir(), "d")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, "node")
			if err := os.WriteFile(file, body, 0o755); err != nil {
				t.Fatal(err)
			}
			mustChmod(t, file, 0o755) // whatever the umask
			c.setup(t, dir, file)
			err := checkExe(file, file, sum)
			switch {
			case c.why == "" && err != nil:
				t.Errorf("checkExe = %v; want it to pass", err)
			case c.why != "" && (err == nil || !strings.Contains(err.Error(), c.why)):
				t.Errorf("checkExe = %v; want a refusal: %s", err, c.why)
			}
		})
	}
}

func mustChmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func mustChown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, -1); err != nil {
		t.Fatal(err)
	}
}
