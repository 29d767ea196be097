package preflight

import (
	"context"
	"fmt"
	"strings"

	"rdmasweep/runner/hosts/remote"
)

// Program is one program a role's host must have on its PATH for a
// workload, and the packages that ship it.
type Program struct {
	Workload     string // the workload that needs it ("iperf3")
	Binary       string // "iperf3", or a helper: "ss"
	Debian, RHEL string
	Version      bool // report its `--version` (the tool itself, not a helper)
}

// Install is the hint for a missing program.
func (p Program) Install() string {
	return fmt.Sprintf("install it: apt-get install %s (Debian, Ubuntu) or dnf install %s (RHEL)", p.Debian, p.RHEL)
}

// ProgramFact is what the host has of one program.
type ProgramFact struct {
	Path    string // "" when it is not on the PATH
	Version string // the first line of `--version`, when asked
}

// programsScript prints "name<TAB>path<TAB>version" for each program;
// $1 is "v" or "-" for each, then the names.
const programsScript = `for a in "$@"; do
  want=${a%%:*} b=${a#*:}
  p=$(command -v "$b" 2>/dev/null)
  v=
  [ -n "$p" ] && [ "$want" = v ] && v=$("$b" --version 2>&1 | head -n 1)
  printf '%s\t%s\t%s\n' "$b" "$p" "$v"
done
`

// Programs looks the programs up on h's PATH with one command, and asks
// the tools among them their version.
func Programs(ctx context.Context, h remote.Host, progs []Program) (map[string]ProgramFact, error) {
	args := []string{"sh", "-c", programsScript, "sh"}
	for _, p := range progs {
		want := "-"
		if p.Version {
			want = "v"
		}
		args = append(args, want+":"+p.Binary)
	}
	out, err := h.Run(ctx, args)
	if err != nil {
		return nil, fmt.Errorf("look for %s: %w", names(progs), err)
	}
	facts := map[string]ProgramFact{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) == 3 {
			facts[f[0]] = ProgramFact{Path: f[1], Version: strings.TrimSpace(f[2])}
		}
	}
	return facts, nil
}

// Missing lists the programs that facts lack.
func Missing(progs []Program, facts map[string]ProgramFact) []Program {
	var out []Program
	for _, p := range progs {
		if facts[p.Binary].Path == "" {
			out = append(out, p)
		}
	}
	return out
}

func names(progs []Program) string {
	var n []string
	for _, p := range progs {
		n = append(n, p.Binary)
	}
	return strings.Join(n, ", ")
}
