package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
)

// docCommand is one `runner …` line of a fenced block in the docs, and
// the output the block shows under it when it is written `$ runner …`.
type docCommand struct {
	where  string // page:line
	args   []string
	output string
}

// fencedCommands are the `runner …` lines of the README's and docs'
// fenced blocks.
func fencedCommands(t *testing.T) []docCommand {
	t.Helper()
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../README.md", "../CONTRIBUTING.md")
	line := regexp.MustCompile(`^\s*(\$ )?(?:bin/)?runner ([a-z].*)$`)
	var out []docCommand
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		inBlock := false
		for i := 0; i < len(lines); i++ {
			if strings.HasPrefix(lines[i], "```") {
				inBlock = !inBlock
				continue
			}
			m := line.FindStringSubmatch(lines[i])
			if !inBlock || m == nil {
				continue
			}
			c := docCommand{where: fmt.Sprintf("%s:%d", filepath.Base(page), i+1), args: strings.Fields(m[2])}
			if m[1] != "" { // a prompt: what follows, to the block's end, is its output
				j := i + 1
				for ; j < len(lines) && !strings.HasPrefix(lines[j], "```"); j++ {
				}
				c.output = strings.Join(lines[i+1:j], "\n") + "\n"
			}
			out = append(out, c)
		}
	}
	return out
}

// docsNeedHosts are the fenced commands that reach hosts this machine
// does not have, and what the test runs in their place.
var docsNeedHosts = map[string]string{
	"exec plans/ssd-sweep.yaml": "dry-run", // two SSH hosts with an SSD: its --dry-run plans it here
	"exec sweep.yaml":           "",        // slurm.md's, inside an sbatch allocation: TestSlurmDocPlanValidates
}

// TestDocsFencedCommandsRun runs every `runner …` command that the README
// and docs show in a fenced block, as written, in a directory holding the
// files they name: compare.txtar's real loopback CSVs (OLD.csv, NEW.csv,
// qd.csv), and CSV, a cold and warm sweep run here. Each must exit 0, and
// where the page shows its output (`$ runner …`), print it (but for
// the spaces that end a line). A command
// that needs remote hosts is in docsNeedHosts, run with --dry-run or
// left to the test named there; any other fails here until it runs.
func TestDocsFencedCommandsRun(t *testing.T) {
	dir := t.TempDir()
	ar, err := txtar.ParseFile("testdata/script/compare.txtar")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ar.Files {
		name := map[string]string{"old.csv": "OLD.csv", "new.csv": "NEW.csv", "qd.csv": "qd.csv"}[f.Name]
		if name != "" {
			if err := os.WriteFile(filepath.Join(dir, name), f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	abs, err := filepath.Abs("../plans")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, filepath.Join(dir, "plans")); err != nil {
		t.Fatal(err)
	}
	plan := fmt.Sprintf(`name: docs
hosts: {server: {address: local}, client: {address: local}}
node: {binary: %q}
server: {file: %s/f.dat, file_size: 4MiB, create: true}
client: {block_size: 256KiB}
sweep: {matrix: {cache: [cold, warm]}}
repeat: 4
output: {csv: CSV, logs: logs}
`, filepath.Join(binDir, "node"), dir)
	if err := os.WriteFile(filepath.Join(dir, "cache.yaml"), []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runner(t, dir, "exec", "cache.yaml"); r.Code != 0 {
		t.Fatalf("make CSV: exit %d\n%s", r.Code, r.Stderr)
	}
	cmds := fencedCommands(t)
	if len(cmds) < 4 {
		t.Fatalf("found %d fenced runner commands; the pattern has likely stopped matching", len(cmds))
	}
	for _, c := range cmds {
		args := c.args
		switch how, listed := docsNeedHosts[strings.Join(args, " ")]; {
		case listed && how == "":
			t.Logf("%s: runner %s: needs hosts, left to its own test", c.where, strings.Join(args, " "))
			continue
		case listed:
			args = append([]string{args[0], "--" + how}, args[1:]...)
		}
		r := runner(t, dir, args...)
		if r.Code != 0 {
			t.Errorf("%s: runner %s: exit %d\n%s%s", c.where, strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
			continue
		}
		if c.output != "" && trimLines(r.Stdout) != trimLines(c.output) {
			t.Errorf("%s: runner %s prints\n%s\nthe page shows\n%s", c.where, strings.Join(args, " "), r.Stdout, c.output)
		}
	}
}

// trimLines is s without the spaces that end its lines, which a page
// does not keep.
func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}
