// Package docs holds the project's reference pages. Its test keeps them
// true to the tree: every repository path or package that README.md,
// CONTRIBUTING.md and docs/*.md name in backquotes exists, and a number of
// CSV columns the README states is the header's; every test they name is
// defined.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"rdmasweep/results"
)

// topLevel are the repository's own roots: a backquoted span that starts
// with one of them names a path in the tree. Anything else in backquotes
// (a plan field, a command, a path on a remote host) is left alone.
var topLevel = []string{
	"runner/", "node/", "plan/", "results/", "plans/", "internal/", "testbed/",
	"docs/", "examples/", ".ci/",
}

// topFiles are the files at the root that the docs name bare.
var topFiles = map[string]bool{
	"go.mod": true, "go.sum": true, "Makefile": true, "README.md": true,
	"CONTRIBUTING.md": true, ".ci/run": true,
}

var (
	span    = regexp.MustCompile("`([^`\n]+)`")
	columns = regexp.MustCompile(`\b(\d+) columns\b`)
	// placeholder is a word in capitals within a path, such as PEER or
	// NAME.
	placeholder = regexp.MustCompile(`([/_-])[A-Z][A-Z0-9]+([/_.-]|$)`)
)

// pages are the documents under test, relative to the repository root.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("list docs/*.md: %v (found %d)", err, len(docs))
	}
	out := []string{"../README.md", "../CONTRIBUTING.md"}
	for _, d := range docs {
		out = append(out, filepath.Join("..", "docs", d))
	}
	return out
}

// repoPath returns the path a backquoted span names in the tree, or "" when
// it names none: a leading "../", a trailing ":line", "#anchor" or "/" and
// a trailing "/..." package pattern are dropped.
func repoPath(s string) string {
	s = strings.TrimSpace(s)
	if strings.ContainsAny(s, " \t$=<>|{}") {
		return ""
	}
	s = strings.TrimPrefix(s, "./")
	if i := strings.IndexAny(s, "#"); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, ":"); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSuffix(s, "/...")
	s = strings.TrimSuffix(s, "/")
	// `node/transport.Transport` names the package node/transport.
	if dot := strings.LastIndex(s, "."); dot > strings.LastIndex(s, "/") && dot+1 < len(s) &&
		s[dot+1] >= 'A' && s[dot+1] <= 'Z' {
		s = s[:dot]
	}
	if topFiles[s] {
		return s
	}
	for _, top := range topLevel {
		if strings.HasPrefix(s+"/", top) {
			// An upper-case placeholder (`runner/points/peer/testdata/PEER/*.json`,
			// `runner/cmd_NAME.go`) stands for any name there.
			return placeholder.ReplaceAllString(s, "$1*$2")
		}
	}
	return ""
}

func TestNamedPathsExist(t *testing.T) {
	checked := 0
	for _, page := range pages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(b), "\n") {
			for _, m := range span.FindAllStringSubmatch(line, -1) {
				p := repoPath(m[1])
				if p == "" {
					continue
				}
				checked++
				matches, err := filepath.Glob(filepath.Join("..", p))
				if err != nil || len(matches) == 0 {
					t.Errorf("%s:%d: `%s` names %s, which is not in the tree", strings.TrimPrefix(page, "../"), n+1, m[1], p)
				}
			}
		}
	}
	// The docs name dozens of paths; none found means the scan broke.
	if checked < 20 {
		t.Fatalf("checked only %d backquoted paths; the scan is broken", checked)
	}
}

func TestRepoPath(t *testing.T) {
	for in, want := range map[string]string{
		"runner/points/point":                     "runner/points/point",
		"./node/transport/rdma/...":               "node/transport/rdma",
		"plans/bench-*.yaml":                      "plans/bench-*.yaml",
		"results/schema.go:172":                   "results/schema.go",
		"docs/scale.md#under-slurm":               "docs/scale.md",
		"Makefile":                                "Makefile",
		"/srv/t/node":                             "",
		"runner exec plans/x.yaml":                "",
		"block_size":                              "",
		"node/transport.Transport":                "node/transport",
		"runner/points/peer/testdata/PEER/*.json": "runner/points/peer/testdata/*/*.json",
		"runner/cmd_NAME.go":                      "runner/cmd_*.go",
		"README.md":                               "README.md",
	} {
		if got := repoPath(in); got != want {
			t.Errorf("repoPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestREADMEColumnCount holds every "N columns" the README states to the
// CSV header of today's schema.
func TestREADMEColumnCount(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	header := 0
	for _, f := range results.Schema() {
		if f.Column != "" {
			header++
		}
	}
	found := columns.FindAllStringSubmatch(string(b), -1)
	if len(found) == 0 {
		t.Fatal("README.md states no number of columns; say how many the CSV has")
	}
	for _, m := range found {
		if n, _ := strconv.Atoi(m[1]); n != header {
			t.Errorf("README.md says %q; the header has %d columns", m[0], header)
		}
	}
}

// testName is a test or benchmark named in backquotes, optionally with a
// subtest: `TestPoolSixHosts/Unshaped`.
var testName = regexp.MustCompile("`((?:Test|Benchmark)[A-Z][A-Za-z0-9_]*)(?:/[^`]*)?`")

// TestNamedTestsExist holds every test and benchmark the pages name (the
// security model's table says which test defends each mechanism) to a
// function of that name in some _test.go file of the tree.
func TestNamedTestsExist(t *testing.T) {
	defined := map[string]bool{}
	funcs := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark)[A-Za-z0-9_]*)\(`)
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range funcs.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil || len(defined) < 100 {
		t.Fatalf("scan the tree's tests: %v (found %d)", err, len(defined))
	}
	for _, page := range pages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(b), "\n") {
			for _, m := range testName.FindAllStringSubmatch(line, -1) {
				if !defined[m[1]] {
					t.Errorf("%s:%d: names %s, which no _test.go defines", strings.TrimPrefix(page, "../"), n+1, m[1])
				}
			}
		}
	}
}

// The docs are a reference to read, not a notebook: docs/*.md total at
// most 160 KB (160,000 bytes), and no page is over 25 KB. A change that
// adds a section tightens another.
func TestDocsBudget(t *testing.T) {
	const total, page = 160_000, 25_000
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, p := range pages {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		sum += int(st.Size())
		if st.Size() > page {
			t.Errorf("docs/%s is %d bytes, over %d: split it or tighten it", p, st.Size(), page)
		}
	}
	if sum > total {
		t.Errorf("docs/*.md total %d bytes, over %d by %d: tighten a page for what you added", sum, total, sum-total)
	}
}
