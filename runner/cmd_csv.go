package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"rdmasweep/results"
	"rdmasweep/runner/csvfile"
)

// runCSV is `runner csv upgrade FILE`: it gives a CSV written by an older
// rdmasweep today's header, the columns it lacked empty in every row. The
// rewrite is atomic and the old file is kept beside it.
func runCSV(ctx context.Context, args []string, stdout io.Writer, ui *voice) error {
	if len(args) == 0 || args[0] != "upgrade" {
		return usageErrorf("csv takes one subcommand: upgrade FILE")
	}
	fs := newFlagSet("csv upgrade", "FILE", ui.w)
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return errUsage
	}
	path, err := oneArg(fs, pos, "CSV file")
	if err != nil {
		return err
	}
	backup, err := csvfile.Upgrade(path)
	switch {
	case errors.Is(err, csvfile.ErrLocked):
		return withHint(fmt.Errorf("%s: %w", path, err), "wait for the exec to finish, then upgrade")
	case errors.Is(err, csvfile.ErrForeignHeader):
		return withHint(fmt.Errorf("upgrade %s: %w", path, err), "only a CSV written by rdmasweep can be upgraded; nothing was changed")
	case err != nil:
		return fmt.Errorf("upgrade %s: %w", path, err)
	case backup == "":
		ui.infof("%s already has the current header (%d columns)", path, len(results.Columns))
	default:
		ui.infof("upgraded %s to the current header (%d columns); the old file is %s", path, len(results.Columns), backup)
	}
	return nil
}
