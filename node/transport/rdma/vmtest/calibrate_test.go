package vmtest

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"rdmasweep/runner/files/manifest"
	"rdmasweep/runner/points/probe"
	"rdmasweep/testbed/guest"
)

// calibrateRE is a line of check --calibrate's table: server, client,
// block, pairs, each program's MB/s per pair, the ratio, the verdict.
var calibrateRE = regexp.MustCompile(`^(\S+)\s+(\S+)\s+(4KiB|64KiB|1MiB)\s+(\d+)\s+([0-9. ]+?)\s{2,}([0-9. ]+?)\s{2,}([0-9.]+)\s+(agree|DISAGREE: node [0-9.]+% (?:slower|faster))$`)

// calibrate is issue 43's check of runner check --calibrate on the wire:
// node and ib_read_bw (over rdma_cm, as the lab's plans connect) in
// turns at 4 KiB, 64 KiB and 1 MiB, on the guests' rxe and GID, each
// size with its ratio and a verdict that follows from it, exit 1 with a
// problem where a size disagrees, and the calibration kept beside the
// plan's CSV for exec. Then the same with node deliberately slowed, built
// from a scratch copy whose client sleeps after each batch of
// completions: its 4 KiB row must disagree, node the slower.
func (l *wireLab) calibrate(t *testing.T) {
	slowed := make(chan string, 1)
	go func() { slowed <- slowedNode(t, l.ctx) }()
	body := `server: {file: /tmp/rdmasweep-cal.dat, file_size: 4MiB, create: true, cache: warm}
`
	plan := l.plan(t, "wire-cal", body)
	sizes := l.checkCalibrate(t, plan, "2")
	for _, s := range sizes {
		t.Logf("node as built: %s: ratio %.3f, %s", s.block, s.ratio, s.verdict)
	}

	node := <-slowed
	if node == "" {
		t.Fatal("no slowed node built")
	}
	slow := strings.Replace(readFile(t, plan), "binary: "+strconv.Quote(l.node), "binary: "+strconv.Quote(node), 1)
	slowPlan := filepath.Join(l.dir, "wire-cal-slowed.yaml")
	if err := os.WriteFile(slowPlan, []byte(slow), 0o644); err != nil {
		t.Fatal(err)
	}
	sizes = l.checkCalibrate(t, slowPlan, "1")
	s4 := sizes[0]
	t.Logf("node slowed: 4KiB ratio %.3f, %s", s4.ratio, s4.verdict)
	if s4.block != "4KiB" || !strings.HasPrefix(s4.verdict, "DISAGREE: node") || !strings.HasSuffix(s4.verdict, "slower") {
		t.Errorf("node slowed: 4KiB verdict %q (ratio %.3f), want node slower", s4.verdict, s4.ratio)
	}
}

type calSize struct {
	block, verdict string
	ratio          float64
}

// checkCalibrate runs check --calibrate --pairs pairs on plan and holds
// its output together: a row per size, each verdict the rule's for its
// ratio, the exit status 1 exactly when one disagrees, and the file exec
// reads holding the same.
func (l *wireLab) checkCalibrate(t *testing.T, plan, pairs string) []calSize {
	t.Helper()
	stdout, stderr, err := runRunner(l.ctx, l.runner, l.dir, l.env, "check", "--calibrate", "--pairs", pairs, plan)
	t.Logf("check --calibrate %s:\n%s%s", filepath.Base(plan), stdout, lastLines(stderr, 12))
	var sizes []calSize
	disagree := false
	for _, line := range strings.Split(stdout, "\n") {
		m := calibrateRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		r, _ := strconv.ParseFloat(m[7], 64)
		s := calSize{block: m[3], ratio: r, verdict: m[8]}
		if n := len(strings.Fields(m[5])); m[4] != pairs || n != len(strings.Fields(m[6])) || strconv.Itoa(n) != pairs {
			t.Errorf("%s: %d pairs of figures (%q, %q), want %s", s.block, n, m[5], m[6], pairs)
		}
		if probe.Agrees(r) != (s.verdict == "agree") {
			t.Errorf("%s: ratio %.3f with verdict %q: the rule says otherwise", s.block, r, s.verdict)
		}
		disagree = disagree || s.verdict != "agree"
		sizes = append(sizes, s)
	}
	if len(sizes) != 3 {
		t.Fatalf("%d calibration rows, want 4KiB, 64KiB and 1MiB\nstderr:\n%s", len(sizes), stderr)
	}
	switch {
	case disagree && (err == nil || !strings.Contains(stderr, ": calibrate: at ")):
		t.Errorf("a size disagreed, and check exited %v with no calibrate problem", err)
	case !disagree && err != nil:
		t.Errorf("every size agreed, and check failed: %v", err)
	}
	cals, rerr := manifest.ReadCalibrations(manifest.CalibrationPathFor(filepath.Join(l.dir, "out", "wire-cal.csv")))
	if rerr != nil || len(cals) != 1 || len(cals[0].Sizes) != 3 || cals[0].Agree == disagree {
		t.Errorf("kept calibrations %+v (%v), want this run's one, agree %v", cals, rerr, !disagree)
	}
	return sizes
}

// slowedNode builds node from a scratch copy of the module in which the
// RDMA client sleeps 50 ms after every batch of completions it polls:
// node made slower than ib_read_bw on purpose. It returns "" after
// failing t; it may run in a goroutine of its own.
func slowedNode(t *testing.T, ctx context.Context) string {
	return patchedNode(t, ctx, "node-slowed", "\t\treturn -1;\n\t}\n\treturn n;\n}\n",
		"\t\treturn -1;\n\t}\n\tif (n > 0)\n\t\tusleep(50000);\n\treturn n;\n}\n")
}

// patchedNode builds node from a scratch copy of the module whose
// shim_loop.c has its one occurrence of old replaced by new (and
// unistd.h included), as name. It returns "" after failing t; it may run
// in a goroutine of its own.
func patchedNode(t *testing.T, ctx context.Context, name, old, new string) string {
	root, err := guest.ModuleRoot(ctx)
	if err != nil {
		t.Error(err)
		return ""
	}
	dst := t.TempDir()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && (rel == ".git" || rel == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Errorf("copy the module: %v", err)
		return ""
	}
	loop := filepath.Join(dst, "node/transport/rdma/shim_loop.c")
	b, err := os.ReadFile(loop)
	if err != nil {
		t.Error(err)
		return ""
	}
	src := string(b)
	if strings.Count(src, old) != 1 || !strings.Contains(src, "#include \"shim_impl.h\"\n") {
		t.Errorf("shim_loop.c has changed: %q is not there once, so %s has nowhere to go", old, name)
		return ""
	}
	src = strings.Replace(src, old, new, 1)
	src = strings.Replace(src, "#include \"shim_impl.h\"\n", "#include \"shim_impl.h\"\n#include <unistd.h>\n", 1)
	if err := os.WriteFile(loop, []byte(src), 0o644); err != nil {
		t.Error(err)
		return ""
	}
	out := filepath.Join(t.TempDir(), name)
	if err := guest.BuildNodeIn(ctx, dst, out); err != nil {
		t.Errorf("build %s: %v", name, err)
		return ""
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
