package testbed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

// mayImport is the layer order of the module's top-level directories:
// each layer and the layers its non-test packages may import, besides
// their own. Nothing imports testbed but tests; runner and node meet only
// in results; plans is the checked-in plans, data with no imports of its
// own; docs holds only the test that keeps the reference pages true to the
// tree. A new top-level directory with Go code needs its row here.
var mayImport = map[string][]string{
	"testbed":  {"runner", "node", "plan", "plans", "results", "internal"},
	"runner":   {"plan", "plans", "results", "internal"},
	"plan":     {"results", "internal"},
	"node":     {"results", "internal"},
	"results":  {"internal"},
	"plans":    {},
	"internal": {},
	"docs":     {},
}

// runnerWings is the order of runner/'s wings: each folder directly under
// runner/ and the wings its non-test packages may import, besides their
// own. points runs a plan (the sweep, a point and its peers, the probes,
// check's table, clean); reading reads results (summary, verdicts, compare,
// plot, the fleet's judgment, the knee search); files are what a run
// leaves (the CSV, manifest, series, leftover record, resume); hosts
// reaches them (remote, hostset, deploy, hostfacts, role); hint is the
// error with a hint every wing may attach. runner's own package (main)
// imports every wing. A new folder under runner/ needs its row here.
var runnerWings = map[string][]string{
	"points":  {"reading", "files", "hosts", "hint"},
	"reading": {"files", "hosts", "hint"},
	"files":   {"hosts", "hint"},
	"hosts":   {"hint"},
	"hint":    {},
}

// tagSets are the build tags whose files change what a package imports:
// the rdma transport's cgo files, and the stub that stands in for them.
var tagSets = []string{"", "rdma rdmaguest bench"}

// listedPackage is the part of go list -json that the layers need.
type listedPackage struct {
	ImportPath string
	Imports    []string // of the non-test files only
}

// TestLayers fails on every import, in the non-test files of the module,
// that runs back up the layer order or reaches into testbed from product
// code, and when go list fails (an import of a package main among its
// reasons).
func TestLayers(t *testing.T) {
	module := goList(t, "", "-m", "-f", "{{.Path}}")
	mod := strings.TrimSpace(string(module))
	for _, tags := range tagSets {
		pkgs := listPackages(t, tags)
		if err := checkSeen(mod, pkgs); err != nil {
			t.Fatalf("go list -tags %q: %v", tags, err)
		}
		for _, v := range layerViolations(mod, pkgs) {
			t.Errorf("built with tags %q: %s", tags, v)
		}
	}
}

// TestRunnerWings fails on every import, in the non-test files of
// runner's packages, that runs back up runnerWings's order, and on a
// folder under runner/ that has no row.
func TestRunnerWings(t *testing.T) {
	module := goList(t, "", "-m", "-f", "{{.Path}}")
	mod := strings.TrimSpace(string(module))
	for _, tags := range tagSets {
		for _, v := range wingViolations(mod, listPackages(t, tags)) {
			t.Errorf("built with tags %q: %s", tags, v)
		}
	}
}

// wing returns the folder directly under runner/ that holds path, "" for
// runner's own package, and false for a path outside runner/.
func wing(mod, path string) (string, bool) {
	if path == mod+"/runner" {
		return "", true
	}
	rest, ok := strings.CutPrefix(path, mod+"/runner/")
	if !ok {
		return "", false
	}
	w, _, _ := strings.Cut(rest, "/")
	return w, true
}

// wingViolations returns one line per import that runs back up the wings,
// or comes from a folder with no row, naming both packages and the rule.
func wingViolations(mod string, pkgs []listedPackage) []string {
	var bad []string
	for _, p := range pkgs {
		from, ok := wing(mod, p.ImportPath)
		if !ok || from == "" {
			continue // outside runner/, or its main package, which may import any wing
		}
		allowed, known := runnerWings[from]
		if !known {
			bad = append(bad, fmt.Sprintf("%s is in runner/%s/, which has no row in runnerWings: say which wings it may import", p.ImportPath, from))
			continue
		}
		for _, imp := range p.Imports {
			to, ok := wing(mod, imp)
			if !ok || to == from || slices.Contains(allowed, to) {
				continue
			}
			bad = append(bad, fmt.Sprintf("%s imports %s: runner/%s/ may import %s, so this import runs back up the wings", p.ImportPath, imp, from, layerList(allowed)))
		}
	}
	return bad
}

// listPackages lists every package of the module, built with tags. cgo is
// on so that the rdma transport's cgo files are listed too.
func listPackages(t *testing.T, tags string) []listedPackage {
	t.Helper()
	out := goList(t, tags, "-json=ImportPath,Imports", "./...")
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decode go list -json -tags %q: %v", tags, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// goList runs go list in the module's root directory, this package's
// parent, and fails the test with go list's stderr if it fails.
func goList(t *testing.T, tags string, args ...string) []byte {
	t.Helper()
	argv := append([]string{"list"}, args...)
	if tags != "" {
		argv = append([]string{"list", "-tags", tags}, args...)
	}
	cmd := exec.Command("go", argv...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	return out
}

// checkSeen refuses a listing that cannot be the whole module: one that
// misses a layer of mayImport, or holds a directory it has no row for.
func checkSeen(mod string, pkgs []listedPackage) error {
	seen := map[string]bool{}
	for _, p := range pkgs {
		l, ok := layer(mod, p.ImportPath)
		if !ok {
			return fmt.Errorf("%s is not in module %s", p.ImportPath, mod)
		}
		if _, known := mayImport[l]; !known {
			return fmt.Errorf("%s is in top-level directory %s/, which has no row in mayImport: say which layers it may import", p.ImportPath, l)
		}
		seen[l] = true
	}
	var missing []string
	for l := range mayImport {
		if !seen[l] {
			missing = append(missing, l)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("listed %d packages and none in %s: the listing is not the whole module", len(pkgs), strings.Join(missing, ", "))
	}
	return nil
}

// layerViolations returns one line per offending import, naming both
// packages and the rule it breaks. An import of a package main needs no
// rule here: go list itself refuses it ("is a program, not an importable
// package"), and goList fails the test with that message.
func layerViolations(mod string, pkgs []listedPackage) []string {
	var bad []string
	for _, p := range pkgs {
		from, _ := layer(mod, p.ImportPath)
		for _, imp := range p.Imports {
			to, ok := layer(mod, imp)
			switch {
			case !ok, to == from:
				// the standard library, a dependency, or the same layer
			case to == "testbed":
				bad = append(bad, fmt.Sprintf("%s imports %s: product code must not import test support (only tests import testbed/)", p.ImportPath, imp))
			case !slices.Contains(mayImport[from], to):
				bad = append(bad, fmt.Sprintf("%s imports %s: %s/ may import %s, so this import runs back up the layers", p.ImportPath, imp, from, layerList(mayImport[from])))
			}
		}
	}
	return bad
}

func layerList(ls []string) string {
	if len(ls) == 0 {
		return "no other layer"
	}
	return "only " + strings.Join(ls, ", ")
}

// layer returns the top-level directory of path in module mod, and false
// for a path outside the module.
func layer(mod, path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, mod+"/")
	if !ok {
		return "", false
	}
	top, _, _ := strings.Cut(rest, "/")
	return top, true
}

// TestLayerViolations: the rules catch an import back up each chain and
// into testbed, name both packages, and let a layer import itself, the
// layers below it, and what is outside the module.
func TestLayerViolations(t *testing.T) {
	pkgs := []listedPackage{
		{ImportPath: "m/runner", Imports: []string{"fmt", "m/runner/remote", "m/plan", "m/results", "m/internal/atomicfile", "golang.org/x/crypto/ssh"}},
		{ImportPath: "m/testbed/clitest", Imports: []string{"m/testbed/testhosts", "m/runner/remote", "m/node/transport"}},
		{ImportPath: "m/results", Imports: []string{"m/testbed/testenv", "m/internal/atomicfile"}},
		{ImportPath: "m/node/region", Imports: []string{"m/runner/role", "m/results"}},
		{ImportPath: "m/runner/point", Imports: []string{"m/node/transport"}},
		{ImportPath: "m/internal/atomicfile", Imports: []string{"m/results"}},
	}
	got := layerViolations("m", pkgs)
	want := []string{
		"m/results imports m/testbed/testenv: product code must not import test support (only tests import testbed/)",
		"m/node/region imports m/runner/role: node/ may import only results, internal, so this import runs back up the layers",
		"m/runner/point imports m/node/transport: runner/ may import only plan, plans, results, internal, so this import runs back up the layers",
		"m/internal/atomicfile imports m/results: internal/ may import no other layer, so this import runs back up the layers",
	}
	if !slices.Equal(got, want) {
		t.Errorf("layerViolations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := checkSeen("m", pkgs); err == nil || !strings.Contains(err.Error(), "none in docs, plan, plans") {
		t.Errorf("checkSeen of a listing without plan/ and plans/: %v, want it refused", err)
	}
	if err := checkSeen("m", append(pkgs, listedPackage{ImportPath: "m/fleet"})); err == nil || !strings.Contains(err.Error(), "top-level directory fleet/") {
		t.Errorf("checkSeen of a directory with no row: %v, want it refused", err)
	}
}

// TestWingViolations: the wings' rules catch an import back up them and a
// folder with no row, and let a wing import itself and the wings below.
func TestWingViolations(t *testing.T) {
	pkgs := []listedPackage{
		{ImportPath: "m/runner", Imports: []string{"m/runner/points/sweep", "m/runner/hosts/remote"}},
		{ImportPath: "m/runner/points/sweep", Imports: []string{"m/runner/points/point", "m/runner/reading/summary", "m/runner/files/csvfile", "m/runner/hint"}},
		{ImportPath: "m/runner/reading/summary", Imports: []string{"m/runner/files/manifest", "m/plan"}},
		{ImportPath: "m/runner/files/manifest", Imports: []string{"m/runner/hosts/hostset", "m/runner/reading/verdict"}},
		{ImportPath: "m/runner/hosts/hostset", Imports: []string{"m/runner/points/point"}},
		{ImportPath: "m/runner/misc/x", Imports: []string{"fmt"}},
	}
	got := wingViolations("m", pkgs)
	want := []string{
		"m/runner/files/manifest imports m/runner/reading/verdict: runner/files/ may import only hosts, hint, so this import runs back up the wings",
		"m/runner/hosts/hostset imports m/runner/points/point: runner/hosts/ may import only hint, so this import runs back up the wings",
		"m/runner/misc/x is in runner/misc/, which has no row in runnerWings: say which wings it may import",
	}
	if !slices.Equal(got, want) {
		t.Errorf("wingViolations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
