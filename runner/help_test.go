package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHelpNamesOnlyRealFlags checks that what each command's help says is
// so: every flag its usage line or its line in the runner's usage names
// exists, and its example parses with the command's own flags (a flag
// that is gone would fail both).
func TestHelpNamesOnlyRealFlags(t *testing.T) {
	flagRE := regexp.MustCompile(`(?:^|[\s\[|(])--?([a-z][a-z0-9-]*)`)
	for _, c := range commands {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.flags(fs)
		for _, m := range flagRE.FindAllStringSubmatch(c.args+"\n"+c.help, -1) {
			if fs.Lookup(m[1]) == nil {
				t.Errorf("runner %s: its help names --%s, which it does not take", c.name, m[1])
			}
		}
		prefix := "runner " + c.name + " "
		if !strings.HasPrefix(c.example, prefix) {
			t.Errorf("runner %s: example %q does not start with %q", c.name, c.example, prefix)
			continue
		}
		args := strings.Fields(strings.ReplaceAll(strings.TrimPrefix(c.example, prefix), "'", ""))
		if err := fs.Parse(args); err != nil {
			t.Errorf("runner %s: example %q: %v", c.name, c.example, err)
		}
	}
}

// TestDocsNameOnlyRealFlags holds the README and the docs to the binary:
// every `runner CMD …` they show, in backquotes or a fenced block, names
// a command the runner has and only flags that command takes.
func TestDocsNameOnlyRealFlags(t *testing.T) {
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../README.md", "../CONTRIBUTING.md")
	byName := map[string]*command{}
	for _, c := range commands {
		byName[c.name] = c
	}
	quoted := regexp.MustCompile("`(?:bin/)?runner ([a-z]+)([^`\n]*)")
	fenced := regexp.MustCompile(`^\s*(?:\$ )?(?:bin/)?runner ([a-z]+)(.*)`)
	flagRE := regexp.MustCompile(`(?:^|[\s\[|(])--?([a-z][a-z0-9-]*)`)
	seen := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		inBlock := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "```") {
				inBlock = !inBlock
				continue
			}
			uses := quoted.FindAllStringSubmatch(line, -1)
			if inBlock {
				uses = fenced.FindAllStringSubmatch(line, -1)
			}
			for _, m := range uses {
				name, rest := m[1], m[2]
				if name == "help" || name == "version" {
					continue
				}
				if name == "csv" { // csv upgrade: a command of two words
					sub, after, _ := strings.Cut(strings.TrimSpace(rest), " ")
					name, rest = "csv "+sub, after
				}
				c, ok := byName[name]
				if !ok {
					t.Errorf("%s:%d: runner %s: no such command", page, i+1, name)
					continue
				}
				seen++
				fs := flag.NewFlagSet(name, flag.ContinueOnError)
				fs.SetOutput(io.Discard)
				c.flags(fs)
				for _, f := range flagRE.FindAllStringSubmatch(rest, -1) {
					if fs.Lookup(f[1]) == nil {
						t.Errorf("%s:%d: runner %s --%s: the command takes no such flag", page, i+1, name, f[1])
					}
				}
			}
		}
	}
	if seen < 50 {
		t.Errorf("found %d runner commands in the docs; the pattern has likely stopped matching", seen)
	}
}

// TestSlurmDocPlanValidates: the plan docs/slurm.md's sbatch script
// writes is a valid slurm plan for a three-node job, checked as the page
// says to check it, outside an allocation with --nodes.
func TestSlurmDocPlanValidates(t *testing.T) {
	b, err := os.ReadFile("../docs/slurm.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "cat > sweep.yaml <<'EOF'\n")
	plan, _, ok2 := strings.Cut(after, "\nEOF\n")
	if !ok || !ok2 {
		t.Fatal("docs/slurm.md has no sbatch script writing sweep.yaml")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sweep.yaml"), []byte(plan+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runner(t, dir, "validate", "--nodes", "n[1-3]", "sweep.yaml")
	if r.Code != 0 || !strings.Contains(r.Stdout, "sweep.yaml: valid: 26 points") {
		t.Errorf("validate --nodes n[1-3] of docs/slurm.md's plan: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}
