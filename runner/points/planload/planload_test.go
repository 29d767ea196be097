package planload

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/plan"
)

// TestCheckedInPlansPassPeerChecks: the checked-in plans are valid as the
// runner loads them, peer refusals included (package plan cannot ask the
// peers).
func TestCheckedInPlansPassPeerChecks(t *testing.T) {
	files, _ := filepath.Glob("../../../plans/*.yaml")
	if len(files) == 0 {
		t.Fatal("no plans in ../../../plans")
	}
	for _, f := range files {
		if _, _, err := Load(context.Background(), f, Options{MaxPoints: 10000}); err != nil {
			t.Errorf("%s:\n%v", f, err)
		}
	}
}

// TestBuiltInAndLauncher: no path is the built-in loopback plan, and
// --launcher is checked as the plan's own field, at its flag.
func TestBuiltInAndLauncher(t *testing.T) {
	p, pts, err := Load(context.Background(), "", Options{MaxPoints: 10000})
	if err != nil || p.Name != "loopback" || len(pts) == 0 {
		t.Fatalf("built-in plan: %v, %d points, %v", p, len(pts), err)
	}
	_, _, err = Load(context.Background(), "", Options{MaxPoints: 10000, Launcher: "pigeon"})
	var errs plan.ErrorList
	if !errors.As(err, &errs) || !strings.Contains(err.Error(), "launcher") {
		t.Fatalf("--launcher pigeon: %v", err)
	}
}
