package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"rdmasweep/results"
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
