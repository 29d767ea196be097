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

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/remote"
	"rdmasweep/runner/sweep"
)

// removal is one file clean would remove.
type removal struct {
	target sweep.Target
	path   string
	size   int64
	what   string // "data file", "sidecar", "node binary", "state"
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
	path, p, _, err := planCommand(fs, &o, args)
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
		csv, err := results.OpenCSV(csvPath)
		switch {
		case errors.Is(err, results.ErrLocked):
			return withHint(fmt.Errorf("%s: %w", csvPath, err), "wait for the exec to finish, then clean")
		case err != nil && !errors.Is(err, results.ErrForeignHeader):
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

	var todo []removal
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, t := range []sweep.Target{r.server, r.client} {
		var paths []string
		if i == 0 {
			paths = append(paths, p.Server.File, p.Server.File+results.SidecarSuffix)
		}
		if !isLocalRole(p, i) && (i == 0 || r.client.Host != r.server.Host) {
			paths = append(paths, p.Node.RemotePath)
		}
		if len(paths) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			found, err := existing(ctx, t.Host, paths)
			if err != nil {
				errs[i] = fmt.Errorf("%s: list files: %w", t.Label, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if i == 0 {
				data, hasData := found[p.Server.File]
				side, hasSide := found[p.Server.File+results.SidecarSuffix]
				switch {
				case hasSide:
					if hasData {
						todo = append(todo, removal{t, p.Server.File, data, "data file"})
					}
					todo = append(todo, removal{t, p.Server.File + results.SidecarSuffix, side, "sidecar"})
				case hasData:
					ui.infof("%s: keeping %s: it has no %s sidecar, so rdmasweep did not make it", t.Label, p.Server.File, results.SidecarSuffix)
				}
			}
			if size, ok := found[p.Node.RemotePath]; ok && !isLocalRole(p, i) {
				todo = append(todo, removal{t, p.Node.RemotePath, size, "node binary"})
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	stateFile := csvPath + ".state"
	if st, err := os.Stat(stateFile); err == nil {
		todo = append(todo, removal{sweep.Target{Host: remote.Local{}, Label: "local"}, stateFile, st.Size(), "state (its leftover nodes are stopped first)"})
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
		if strings.HasPrefix(x.what, "state") {
			// Reaping rewrites the state; it is gone once nothing is left.
			if _, err := sweep.OpenState(ctx, stateFile, r.targets(), func(msg string) { ui.infof("%s", msg) }); err != nil {
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

func isLocalRole(p *plan.Plan, i int) bool {
	if i == 0 {
		return p.Hosts.Server.IsLocal()
	}
	return p.Hosts.Client.IsLocal()
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
