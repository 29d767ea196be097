package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"golang.org/x/term"

	"rdmasweep/results"
	"rdmasweep/runner/csvfile"
	"rdmasweep/runner/deploy"
	"rdmasweep/runner/remote"
	"rdmasweep/runner/role"
)

// removable is a kind of thing clean removes.
type removable int

const (
	dataFile   removable = iota // the server's file, only with its sidecar
	sidecar                     // FILE.rdmasweep: node made the file
	nodeBinary                  // node.remote_path (and -linux-GOARCH) on a remote host
	leftovers                   // the CSV's leftover record, after its nodes are stopped
)

func (w removable) String() string {
	return [...]string{"data file", "sidecar", "node binary", "state (its leftover nodes are stopped first)"}[w]
}

// removal is one file clean would remove.
type removal struct {
	target role.Target
	path   string
	size   int64
	what   removable
}

// runClean is `runner clean PLAN`: it removes what the plan put on its
// hosts, the created data file with its sidecar, the deployed node, and
// the exec state beside the CSV after reaping the nodes it records. A data
// file without a sidecar is the user's own and is never removed; neither
// is the local node binary, which local roles run in place. With
// --dry-run it lists what it would remove, and removes and stops nothing.
func runClean(ctx context.Context, args []string, stdout io.Writer, ui *voice) error {
	fs := newFlagSet("clean", "[--yes | --dry-run] [flags] [PLAN]", ui.w)
	var o planOptions
	yes := fs.Bool("yes", false, "remove without asking")
	dryRun := fs.Bool("dry-run", false, "list what would be removed, and remove nothing")
	out := fs.String("out", "", "the `CSV` whose state to clean (default: the plan's output.csv)")
	path, p, _, err := planCommand(ctx, fs, &o, args)
	if err != nil {
		return err
	}
	csvPath := *out
	if csvPath == "" {
		csvPath = p.Output.CSV
	}
	// An exec appending to the CSV owns its nodes and its state: reaping
	// them would kill a live run.
	if _, err := os.Stat(csvPath); err == nil {
		csv, err := csvfile.Open(csvPath)
		switch {
		case errors.Is(err, csvfile.ErrLocked):
			return withHint(fmt.Errorf("%s: %w", csvPath, err), "wait for the exec to finish, then clean")
		case err != nil && !errors.Is(err, csvfile.ErrForeignHeader) && !errors.Is(err, csvfile.ErrOlderHeader):
			return fmt.Errorf("open %s: %w", csvPath, err)
		case err == nil:
			defer csv.Close()
		}
	}

	// Dial, but deploy nothing: no point uploading what is about to go.
	r, err := dialRoles(ctx, p, ui)
	if err != nil {
		return err
	}
	defer r.close()

	// What each host may hold: the server's data file and sidecar, and
	// node on every remote host (once per host), at the path of each
	// architecture the build has a node for.
	nodePaths := []string{p.Node.RemotePath}
	if nodes, err := deploy.FindNodes(p.Node.Binary); err == nil {
		nodePaths = nodePaths[:0]
		for _, n := range nodes {
			nodePaths = append(nodePaths, n.RemotePath(p.Node.RemotePath))
		}
	}
	file := p.Base.Str("file")
	targets := r.targets()
	wanted := make([][]removal, len(targets))
	for i, t := range targets {
		for _, rt := range r.list {
			if rt.Host == t.Host && rt.Role == "server" {
				wanted[i] = append(wanted[i], removal{target: rt, path: file, what: dataFile},
					removal{target: rt, path: file + results.SidecarSuffix, what: sidecar})
			}
		}
		if _, local := t.Host.(remote.Local); !local {
			for _, np := range nodePaths {
				wanted[i] = append(wanted[i], removal{target: t, path: np, what: nodeBinary})
			}
		}
	}
	var todo []removal
	var mu sync.Mutex
	err = parallel(len(targets), func(i int) error {
		if len(wanted[i]) == 0 {
			return nil
		}
		t := targets[i]
		var paths []string
		for _, w := range wanted[i] {
			paths = append(paths, w.path)
		}
		found, err := existing(ctx, t.Host, paths)
		if err != nil {
			return fmt.Errorf("%s: list files: %w", t.Label, err)
		}
		mu.Lock()
		defer mu.Unlock()
		_, hasSidecar := found[file+results.SidecarSuffix]
		for _, w := range wanted[i] {
			size, ok := found[w.path]
			switch {
			case !ok:
			case w.what == dataFile && !hasSidecar:
				ui.infof("%s: keeping %s: it has no %s sidecar, so rdmasweep did not make it", w.target.Label, w.path, results.SidecarSuffix)
			default:
				w.size = size
				todo = append(todo, w)
			}
		}
		return nil
	})
	if err != nil {
		return firstError(err)
	}
	stateFile := csvPath + ".state"
	if st, err := os.Stat(stateFile); err == nil {
		todo = append(todo, removal{role.Target{Host: remote.Local{}, Label: "local"}, stateFile, st.Size(), leftovers})
	}

	if len(todo) == 0 {
		ui.infof("nothing to clean for %s", planName(path))
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for _, x := range todo {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", x.target.Label, x.what, x.path, sizeOrDash(x.size))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if *dryRun {
		ui.infof("dry run: %s would be removed; nothing was", plural(len(todo), "file"))
		return nil
	}
	if !*yes {
		ok, err := confirm(ui, fmt.Sprintf("remove these %s?", plural(len(todo), "file")))
		if err != nil {
			return err
		}
		if !ok {
			ui.infof("nothing removed")
			return nil
		}
	}

	removed := 0
	for _, x := range todo {
		if x.what == leftovers {
			// Reaping rewrites the record; it is gone once nothing is left.
			if _, err := openLeftovers(ctx, stateFile, r, ui); err != nil {
				return fmt.Errorf("reap leftovers: %w", err)
			}
			if _, err := os.Stat(stateFile); err == nil {
				ui.warnf("%s still lists nodes on hosts this plan does not reach; kept", stateFile)
				continue
			}
			removed++
			continue
		}
		if _, err := x.target.Host.Run(ctx, []string{"rm", "-f", "--", x.path}); err != nil {
			return fmt.Errorf("%s: remove %s: %w", x.target.Label, x.path, err)
		}
		removed++
	}
	ui.infof("removed %s", plural(removed, "file"))
	return nil
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

func sizeOrDash(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// confirm asks on the terminal; without one it refuses, since nobody
// could have read the list.
func confirm(ui *voice, question string) (bool, error) {
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		return false, withHint(errors.New("not removing without confirmation: stdin is not a terminal"), "pass --yes to remove what is listed above")
	}
	fmt.Fprintf(ui.w, "runner: %s [y/N] ", question)
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && line == "" {
		return false, nil
	}
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes", nil
}
