package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"rdmasweep/results"
	"rdmasweep/runner/files/csvfile"
	"rdmasweep/runner/hint"
)

// csvUpgradeOptions are runner csv upgrade's: none.
type csvUpgradeOptions struct{}

var csvUpgradeCommand = &command{
	name: "csv upgrade", args: "FILE",
	help:    "  csv upgrade CSV give a CSV written by an older rdmasweep today's columns",
	example: "runner csv upgrade out/loopback.csv",
	flags: func(fs *flag.FlagSet) func(context.Context, globals, []string) error {
		var o csvUpgradeOptions
		return func(ctx context.Context, g globals, args []string) error { return runCSVUpgrade(ctx, o, g, args) }
	},
}

// runCSVUpgrade is `runner csv upgrade FILE`: it gives a CSV written by an
// older rdmasweep today's header, the columns it lacked empty in every
// row. The rewrite is atomic and the old file is kept beside it.
func runCSVUpgrade(ctx context.Context, o csvUpgradeOptions, g globals, args []string) error {
	path, err := oneArg(g, args, "CSV file")
	if err != nil {
		return err
	}
	backup, err := csvfile.Upgrade(path)
	switch {
	case errors.Is(err, csvfile.ErrLocked):
		return hint.Wrap(fmt.Errorf("%s: %w", path, err), "wait for the exec to finish, then upgrade")
	case errors.Is(err, csvfile.ErrForeignHeader):
		return hint.Wrap(fmt.Errorf("upgrade %s: %w", path, err), "only a CSV written by rdmasweep can be upgraded; nothing was changed")
	case err != nil:
		return fmt.Errorf("upgrade %s: %w", path, err)
	case backup == "":
		g.ui.infof("%s already has the current header (%d columns)", path, len(results.Columns))
	default:
		g.ui.infof("upgraded %s to the current header (%d columns); the old file is %s", path, len(results.Columns), backup)
	}
	return nil
}
