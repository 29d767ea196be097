// Package cleanup finds what a plan put on its hosts: the server's data
// file with its sidecar, and node on every remote host, at the path of
// each architecture the build has a node for. A data file without its
// sidecar is the user's own and is never listed; neither is the local
// node binary, which local roles run in place.
package cleanup

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/hosts/deploy"
	"rdmasweep/runner/hosts/hostset"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
)

// Kind is a kind of thing clean removes.
type Kind int

const (
	DataFile   Kind = iota // the server's file, only with its sidecar
	Sidecar                // FILE.rdmasweep: node made the file
	NodeBinary             // node.remote_path (and -linux-GOARCH) on a remote host
	Leftovers              // the CSV's leftover record, after its nodes are stopped
	NVMeOF                 // what node nvmet and nvmeof-read recorded making, and a kill left
)

func (w Kind) String() string {
	return [...]string{"data file", "sidecar", "node binary", "state (its leftover nodes are stopped first)",
		"NVMe-oF records (node nvmeof-clean removes what they list)"}[w]
}

// Removal is one file clean would remove.
type Removal struct {
	Target role.Target
	Path   string
	Size   int64 // bytes; -1 when unknown
	What   Kind
	// Node is the node that removes an NVMeOF removal (nvmeof-clean).
	Node string
}

// Find lists what each host of set holds of what plan p may have put
// there, host by host. A data file without its sidecar is kept, and info
// says so.
func Find(ctx context.Context, p *plan.Plan, set *hostset.Set, info func(msg string)) ([]Removal, error) {
	nodes, _ := deploy.FindNodes(p.Node.Binary)
	file := p.Base.Str(param.File)
	targets := set.Targets()
	found := make([][]Removal, len(targets))
	err := set.EachHost(func(i int, t role.Target) error {
		var wanted []Removal
		for _, rt := range set.Roles {
			if rt.Host == t.Host && rt.Role == "server" {
				wanted = append(wanted, Removal{Target: rt, Path: file, What: DataFile},
					Removal{Target: rt, Path: file + results.SidecarSuffix, What: Sidecar})
			}
		}
		if _, local := t.Host.(remote.Local); !local {
			base := set.NodeBase(t.Host)
			nodePaths := []string{base}
			if len(nodes) > 0 {
				nodePaths = nodePaths[:0]
				for _, n := range nodes {
					nodePaths = append(nodePaths, n.RemotePath(base))
				}
			}
			for _, np := range nodePaths {
				wanted = append(wanted, Removal{Target: t, Path: np, What: NodeBinary})
			}
		}
		var err error
		if found[i], err = present(ctx, t, wanted, file+results.SidecarSuffix, info); err != nil {
			return err
		}
		found[i], err = withNVMeOF(ctx, t, found[i], info)
		return err
	})
	if err != nil {
		return nil, err
	}
	var todo []Removal
	for _, f := range found {
		todo = append(todo, f...)
	}
	return todo, nil
}

// present is what of wanted exists on t's host, with its size; a data
// file without its sidecar there is the user's own, and kept.
func present(ctx context.Context, t role.Target, wanted []Removal, sidecarPath string, info func(string)) ([]Removal, error) {
	if len(wanted) == 0 {
		return nil, nil
	}
	var paths []string
	for _, w := range wanted {
		paths = append(paths, w.Path)
	}
	found, err := existing(ctx, t.Host, paths)
	if err != nil {
		return nil, fmt.Errorf("%s: list files: %w", t.Label, err)
	}
	_, hasSidecar := found[sidecarPath]
	var out []Removal
	for _, w := range wanted {
		size, ok := found[w.Path]
		switch {
		case !ok:
		case w.What == DataFile && !hasSidecar:
			info(fmt.Sprintf("%s: keeping %s: it has no %s sidecar, so rdmasweep did not make it", w.Target.Label, w.Path, results.SidecarSuffix))
		default:
			w.Size = size
			out = append(out, w)
		}
	}
	return out, nil
}

// existing returns which of paths exist on h, with their sizes, in one
// command.
func existing(ctx context.Context, h remote.Host, paths []string) (map[string]int64, error) {
	const script = `for f; do [ -e "$f" ] && printf '%s\t%s\n' "$(stat -c %s -- "$f" 2>/dev/null || echo -1)" "$f"; done; exit 0`
	out, err := h.Run(ctx, append([]string{"sh", "-c", script, "sh"}, paths...))
	if err != nil {
		return nil, err
	}
	found := map[string]int64{}
	for _, line := range strings.Split(string(out), "\n") {
		size, path, ok := strings.Cut(line, "\t")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(size, 10, 64)
		if err != nil {
			n = -1
		}
		found[path] = n
	}
	return found, nil
}

// SizeText is a size as clean lists it, "-" when unknown.
func SizeText(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// withNVMeOF puts first in found (before node goes) the NVMe-oF records on
// t's host that a killed node nvmet or nvmeof-read left, to be removed by
// the host's node (nvmeof-clean), which removes only what they list.
func withNVMeOF(ctx context.Context, t role.Target, found []Removal, info func(string)) ([]Removal, error) {
	const script = `n=0; for f in "$1"/*.json; do [ -e "$f" ] && n=$((n+1)); done; echo $n`
	out, err := t.Host.Run(ctx, []string{"sh", "-c", script, "sh", results.NVMeOFRecords})
	if err != nil {
		return nil, fmt.Errorf("%s: list NVMe-oF records: %w", t.Label, err)
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(string(out))); n == 0 {
		return found, nil
	}
	for _, f := range found {
		if f.What == NodeBinary {
			r := Removal{Target: t, Path: results.NVMeOFRecords, Size: -1, What: NVMeOF, Node: f.Path}
			return append([]Removal{r}, found...), nil
		}
	}
	info(fmt.Sprintf("%s: %s holds NVMe-oF records, and no deployed node is there to remove what they list (run node nvmeof-clean as root)", t.Label, results.NVMeOFRecords))
	return found, nil
}
