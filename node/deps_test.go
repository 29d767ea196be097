package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNodeLinksNoCSV holds the line between node and the results file:
// node speaks the wire events of results, and the CSV (its reader, its
// lock, its upgrade) is the runner's (runner/files/csvfile). A CSV library in
// node's dependencies means that line was crossed.
func TestNodeLinksNoCSV(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list -deps ./node: %v\n%s", err, msg)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps ./node named %d packages, so it did not list node's:\n%s", len(deps), out)
	}
	for _, d := range deps {
		if d == "encoding/csv" || strings.Contains(d, "gocsv") || strings.HasPrefix(d, "rdmasweep/runner/") {
			t.Errorf("node depends on %s", d)
		}
	}
}
