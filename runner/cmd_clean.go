package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"golang.org/x/term"

	"rdmasweep/runner/cleanup"
	"rdmasweep/runner/csvfile"
	"rdmasweep/runner/hint"
	"rdmasweep/runner/hostset"
	"rdmasweep/runner/leftover"
	"rdmasweep/runner/remote"
	"rdmasweep/runner/role"
)

// cleanOptions are runner clean's.
type cleanOptions struct {
	planOptions
	yes, dryRun bool
	out         string
}

var cleanCommand = &command{
	name: "clean", args: "[--yes | --dry-run] [flags] [PLAN]",
	help: "  clean [PLAN]    remove the created data file and sidecar, the deployed\n                  node and leftover state (--dry-run: only list them)",
	flags: func(fs *flag.FlagSet) func(context.Context, globals, []string) error {
		var o cleanOptions
		fs.BoolVar(&o.yes, "yes", false, "remove without asking")
		fs.BoolVar(&o.dryRun, "dry-run", false, "list what would be removed, and remove nothing")
		fs.StringVar(&o.out, "out", "", "the `CSV` whose state to clean (default: the plan's output.csv)")
		o.addFlags(fs)
		return func(ctx context.Context, g globals, args []string) error { return runClean(ctx, o, g, args) }
	},
}

// runClean is `runner clean PLAN`: it removes what the plan put on its
// hosts, the created data file with its sidecar, the deployed node, and
// the exec state beside the CSV after reaping the nodes it records. A data
// file without a sidecar is the user's own and is never removed; neither
// is the local node binary, which local roles run in place. With
// --dry-run it lists what it would remove, and removes and stops nothing.
func runClean(ctx context.Context, o cleanOptions, g globals, args []string) error {
	path, p, _, err := loadPlanArg(ctx, g, o.planOptions, args)
	if err != nil {
		return err
	}
	csvPath := o.out
	if csvPath == "" {
		csvPath = p.Output.CSV
	}
	// An exec appending to the CSV owns its nodes and its state: reaping
	// them would kill a live run. The lock is held until clean is done.
	csv, err := lockIdleCSV(csvPath)
	if err != nil {
		return err
	}
	if csv != nil {
		defer csv.Close()
	}
	// Dial, but deploy nothing: no point uploading what is about to go.
	set, err := hostset.Dial(ctx, p, hostOptions(p, g.ui))
	if err != nil {
		return err
	}
	defer set.Close()
	todo, err := cleanup.Find(ctx, p, set, g.ui.info)
	if err != nil {
		return err
	}
	stateFile := csvPath + ".state"
	if st, err := os.Stat(stateFile); err == nil {
		todo = append(todo, cleanup.Removal{Target: role.Target{Host: remote.Local{}, Label: "local"}, Path: stateFile, Size: st.Size(), What: cleanup.Leftovers})
	}
	if len(todo) == 0 {
		g.ui.infof("nothing to clean for %s", planName(path))
		return nil
	}
	if ok, err := listRemovals(o, g, todo); !ok || err != nil {
		return err
	}
	return removeAll(ctx, g.ui, set, todo, stateFile)
}

// lockIdleCSV takes the lock of the CSV at path, when it exists, so no
// exec starts on it while clean reaps; an exec holding it refuses the
// clean. A CSV that is not today's is locked all the same, and nil is a
// CSV that does not exist.
func lockIdleCSV(path string) (*csvfile.File, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, nil
	}
	csv, err := csvfile.Open(path)
	switch {
	case errors.Is(err, csvfile.ErrLocked):
		return nil, hint.Wrap(fmt.Errorf("%s: %w", path, err), "wait for the exec to finish, then clean")
	case err != nil && !errors.Is(err, csvfile.ErrForeignHeader) && !errors.Is(err, csvfile.ErrOlderHeader):
		return nil, fmt.Errorf("open %s: %w", path, err)
	case err != nil:
		return nil, nil
	}
	return csv, nil
}

// listRemovals prints what clean would remove, and says whether to go on:
// not on a dry run, and only when the user agrees (or passed --yes).
func listRemovals(o cleanOptions, g globals, todo []cleanup.Removal) (bool, error) {
	tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
	for _, x := range todo {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", x.Target.Label, x.What, x.Path, cleanup.SizeText(x.Size))
	}
	if err := tw.Flush(); err != nil {
		return false, err
	}
	if o.dryRun {
		g.ui.infof("dry run: %s would be removed; nothing was", plural(len(todo), "file"))
		return false, nil
	}
	if o.yes {
		return true, nil
	}
	ok, err := confirm(g.ui, fmt.Sprintf("remove these %s?", plural(len(todo), "file")))
	if err == nil && !ok {
		g.ui.infof("nothing removed")
	}
	return ok, err
}

// removeAll removes todo in order; the leftover state is removed by
// reaping the nodes it records.
func removeAll(ctx context.Context, ui *voice, set *hostset.Set, todo []cleanup.Removal, stateFile string) error {
	removed := 0
	for _, x := range todo {
		if x.What == cleanup.Leftovers {
			// Reaping rewrites the record; it is gone once nothing is left.
			if _, err := leftover.Open(ctx, stateFile, set.Targets(), ui.info); err != nil {
				return fmt.Errorf("reap leftovers: %w", err)
			}
			if _, err := os.Stat(stateFile); err == nil {
				ui.warnf("%s still lists nodes on hosts this plan does not reach; kept", stateFile)
				continue
			}
			removed++
			continue
		}
		if _, err := x.Target.Host.Run(ctx, []string{"rm", "-f", "--", x.Path}); err != nil {
			return fmt.Errorf("%s: remove %s: %w", x.Target.Label, x.Path, err)
		}
		removed++
	}
	ui.infof("removed %s", plural(removed, "file"))
	return nil
}

// confirm asks on the terminal; without one it refuses, since nobody
// could have read the list.
func confirm(ui *voice, question string) (bool, error) {
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		return false, hint.Wrap(errors.New("not removing without confirmation: stdin is not a terminal"), "pass --yes to remove what is listed above")
	}
	fmt.Fprintf(ui.w, "runner: %s [y/N] ", question)
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && line == "" {
		return false, nil
	}
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes", nil
}
