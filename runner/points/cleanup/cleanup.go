// Package cleanup finds what a plan put on its hosts: the server's data
// file with its sidecar, and node on every remote host, at the path of
// each architecture the build has a node for. A data file is listed only
// when it and its sidecar are regular files of the login user's (anyone
// may plant a sidecar beside a file in a shared directory), and node
// only when the deploy guard accepts its path (runner/hosts/remote,
// deploypath.go): a node path the guard refuses stops clean before
// anything is run or removed. The local node binary, which local roles
// run in place, is never listed.
//
// Nothing is removed by a path read twice: each removal is one command
// that opens the file's directory once and checks and removes the file
// through that descriptor. node itself runs only through the guard, with
// the sha256 of the build's node for the host: clean deploys that node
// first (the guarded upload, a no-op when it is there already), so a file
// it cannot vouch for never runs.
package cleanup

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/hosts/deploy"
	"rdmasweep/runner/hosts/hostfacts"
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
	// Node is the node that removes an NVMeOF removal (nvmeof-clean),
	// on the host; Binary is the build's node for the host's Arch,
	// deployed there before it runs.
	Node, Binary, Arch string
}

// Find lists what each host of set holds of what plan p may have put
// there, host by host. A data file or sidecar that is not the login
// user's own is kept, and info says so. A node path the guard refuses is
// an error (*remote.UnsafePathError), and nothing is listed.
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
		var err error
		if found[i], err = present(ctx, t, wanted, info); err != nil {
			return err
		}
		if _, local := t.Host.(remote.Local); local {
			found[i], err = withNVMeOF(ctx, t, found[i], "", nil, info)
			return err
		}
		base := set.NodeBase(t.Host)
		nodePaths := []string{base}
		if len(nodes) > 0 {
			nodePaths = nodePaths[:0]
			for _, n := range nodes {
				nodePaths = append(nodePaths, n.RemotePath(base))
			}
		}
		for _, np := range nodePaths {
			there, err := guardedNode(ctx, t, np)
			if err != nil {
				return err
			}
			if there {
				found[i] = append(found[i], Removal{Target: t, Path: np, Size: -1, What: NodeBinary})
			}
		}
		found[i], err = withNVMeOF(ctx, t, found[i], base, nodes, info)
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

// guardedNode says whether a node is at path on t's host, by the guard's
// look: the path is refused (*remote.UnsafePathError) when another user
// owns the file, its directory or a directory above, or could change
// them. It makes nothing and runs nothing.
func guardedNode(ctx context.Context, t role.Target, path string) (bool, error) {
	out, err := t.Host.Run(ctx, remote.GuardLookArgv(path))
	if err = remote.Refusal(err); err != nil {
		return false, fmt.Errorf("%s: check %s: %w", t.Label, path, err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return false, fmt.Errorf("%s: check %s: no answer", t.Label, path)
	}
	return f[0] != "-", nil
}

// present is what of wanted exists on t's host, with its size. A data
// file is listed only when it and its sidecar are the login user's
// regular files; a sidecar only when it is. What is kept, info says.
func present(ctx context.Context, t role.Target, wanted []Removal, info func(string)) ([]Removal, error) {
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
	var out []Removal
	for _, w := range wanted {
		f, ok := found[w.Path]
		switch {
		case !ok:
		case !f.mine:
			info(fmt.Sprintf("%s: keeping %s: it is not a regular file of yours (owner %s), so rdmasweep did not make it", w.Target.Label, w.Path, f.owner))
		case w.What == DataFile:
			sc, ok := found[w.Path+results.SidecarSuffix]
			switch {
			case !ok:
				info(fmt.Sprintf("%s: keeping %s: it has no %s sidecar, so rdmasweep did not make it", w.Target.Label, w.Path, results.SidecarSuffix))
			case !sc.mine:
				info(fmt.Sprintf("%s: keeping %s: its sidecar is not a regular file of yours (owner %s), so it vouches for nothing", w.Target.Label, w.Path, sc.owner))
			default:
				w.Size = f.size
				out = append(out, w)
			}
		default:
			w.Size = f.size
			out = append(out, w)
		}
	}
	return out, nil
}

// fileInfo is what existing learns of a path.
type fileInfo struct {
	size  int64  // -1 when unknown
	mine  bool   // a regular file (no link) of the login user's
	owner string // its owner's name
}

// existing returns which of paths exist on h, with their sizes and
// owners, in one command.
func existing(ctx context.Context, h remote.Host, paths []string) (map[string]fileInfo, error) {
	const script = `for f; do
  [ -e "$f" ] || [ -h "$f" ] || continue
  m=no; [ -f "$f" ] && [ ! -h "$f" ] && [ -O "$f" ] && m=yes
  printf '%s\t%s\t%s\t%s\n' "$(stat -c %s -- "$f" 2>/dev/null || echo -1)" "$m" "$(stat -c %U -- "$f" 2>/dev/null)" "$f"
done; exit 0`
	out, err := h.Run(ctx, append([]string{"sh", "-c", script, "sh"}, paths...))
	if err != nil {
		return nil, err
	}
	found := map[string]fileInfo{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.SplitN(line, "\t", 4)
		if len(f) != 4 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			n = -1
		}
		found[f[3]] = fileInfo{size: n, mine: f[1] == "yes", owner: f[2]}
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

// withNVMeOF puts first in found (before node goes) the NVMe-oF records
// on t's host that a killed node nvmet or nvmeof-read left, to be removed
// by node nvmeof-clean, which removes only what they list. The node that
// runs it is the build's for the host's architecture, at its path under
// base: Remove deploys it there through the guarded upload and runs it
// through the guard, then removes it (it is listed). On the local host,
// or with no node of the build for the host, info says what to run.
func withNVMeOF(ctx context.Context, t role.Target, found []Removal, base string, nodes deploy.Nodes, info func(string)) ([]Removal, error) {
	const script = `n=0; for f in "$1"/*.json; do [ -e "$f" ] && n=$((n+1)); done; echo $n`
	out, err := t.Host.Run(ctx, []string{"sh", "-c", script, "sh", results.NVMeOFRecords})
	if err != nil {
		return nil, fmt.Errorf("%s: list NVMe-oF records: %w", t.Label, err)
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(string(out))); n == 0 {
		return found, nil
	}
	manual := fmt.Sprintf("%s: %s holds NVMe-oF records, and clean has no node of this build to remove what they list (run node nvmeof-clean as root)", t.Label, results.NVMeOFRecords)
	if base == "" || len(nodes) == 0 {
		info(manual)
		return found, nil
	}
	facts, err := hostfacts.Collect(ctx, t.Host, hostfacts.Query{})
	if err != nil {
		return nil, t.Wrap(role.Facts, err)
	}
	n, err := nodes.For(facts.Arch)
	if err != nil {
		info(manual + ": " + err.Error())
		return found, nil
	}
	path := n.RemotePath(base)
	r := Removal{Target: t, Path: results.NVMeOFRecords, Size: -1, What: NVMeOF, Node: path, Binary: n.Path, Arch: facts.Arch}
	if !slices.ContainsFunc(found, func(f Removal) bool { return f.What == NodeBinary && f.Path == path }) {
		found = append(found, Removal{Target: t, Path: path, Size: -1, What: NodeBinary})
	}
	return append([]Removal{r}, found...), nil
}
