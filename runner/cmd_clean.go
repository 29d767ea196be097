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

	"rdmasweep/internal/words"
	"rdmasweep/runner/hint"
	"rdmasweep/runner/hosts/hostset"
	"rdmasweep/runner/points/cleanup"
)

// cleanOptions are runner clean's.
type cleanOptions struct {
	planOptions
	hostFlags
	yes, dryRun bool
	out         string
}

var cleanCommand = &command{
	name: "clean", args: "[--yes | --dry-run] [flags] [PLAN]",
	help:    "  clean [PLAN]    remove the created data file and sidecar, the deployed\n                  node and leftover state (--dry-run: only list them)",
	example: "runner clean --dry-run plans/loopback.yaml",
	flags: func(fs *flag.FlagSet) func(context.Context, globals, []string) error {
		var o cleanOptions
		fs.BoolVar(&o.yes, "yes", false, "remove without asking")
		fs.BoolVar(&o.dryRun, "dry-run", false, "list what would be removed, and remove nothing")
		fs.StringVar(&o.out, "out", "", "the `CSV` whose state to clean (default: the plan's output.csv)")
		o.addFlags(fs)
		o.addHostFlags(fs)
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
	// The lock is held until clean is done.
	csv, err := cleanup.LockCSV(csvPath)
	if err != nil {
		return err
	}
	if csv != nil {
		defer csv.Close()
	}
	// Dial, but deploy nothing: no point uploading what is about to go.
	set, err := hostset.Dial(ctx, p, hostOptions(p, g.ui, o.hostFlags))
	if err != nil {
		return err
	}
	defer set.Close()
	todo, err := cleanup.Find(ctx, p, set, g.ui.info)
	if err != nil {
		return err
	}
	if st, ok := cleanup.State(csvPath); ok {
		todo = append(todo, st)
	}
	if len(todo) == 0 {
		g.ui.infof("nothing to clean for %s", planName(path))
		return nil
	}
	if ok, err := listRemovals(o, g, todo); !ok || err != nil {
		return err
	}
	done, err := cleanup.Remove(ctx, set, todo, g.ui.info)
	for _, kept := range done.Kept {
		g.ui.warnf("%s still lists nodes on hosts this plan does not reach; kept", kept)
	}
	if err != nil {
		return err
	}
	g.ui.infof("removed %s", words.Count(done.Files, "file"))
	return nil
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
		g.ui.infof("dry run: %s would be removed; nothing was", words.Count(len(todo), "file"))
		return false, nil
	}
	if o.yes {
		return true, nil
	}
	ok, err := confirm(g.ui, fmt.Sprintf("remove these %s?", words.Count(len(todo), "file")))
	if err == nil && !ok {
		g.ui.infof("nothing removed")
	}
	return ok, err
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
