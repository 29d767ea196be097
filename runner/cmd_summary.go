package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"rdmasweep/results"
	"rdmasweep/runner/fleet"
	"rdmasweep/runner/summary"
)

func runSummary(ctx context.Context, args []string, stdout io.Writer, ui *voice) error {
	fs := newFlagSet("summary", "[--run RUN_ID] [--baseline name=value] [--format text|json] [--expect MB/s] CSV", ui.w)
	baseFlag := fs.String("baseline", "", "also print every point's ratio to the point with this `name=value` (e.g. workload=ib_read_bw) and the same other parameters")
	format := fs.String("format", "text", "`text`, or json for a pairwise or ring CSV's judgment")
	expect := fs.Float64("expect", 0, "pairwise and ring: a link is slow below this many `MB/s` (default: the lower of 0.8 × the median link and the median − 3 × MAD)")
	var base summary.Baseline
	_, rows, err := csvCommand(fs, args, func() error {
		if *format != "text" && *format != "json" {
			return usageErrorf("summary --format is text or json (got %q)", *format)
		}
		if *baseFlag == "" {
			return nil
		}
		var err error
		if base, err = summary.ParseBaseline(*baseFlag); err != nil {
			return usageErrorf("%s", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if pool := fleet.FromRows(rows, fleet.JudgeOptions{Expect: *expect}); len(pool) > 0 {
		if *format == "json" {
			return fleet.WriteJSON(stdout, pool)
		}
		return fleet.WriteText(stdout, pool)
	} else if *format == "json" {
		return withHint(errors.New("summary --format json judges pairwise and ring sweeps, and this CSV has none of their rows"), "its rows have no round; the table is summary without --format")
	}
	groups := summary.Build(rows)
	if err := summary.Write(stdout, groups); err != nil {
		return err
	}
	if base.Param == "" {
		return nil
	}
	fmt.Fprintln(stdout)
	return summary.WriteRatios(stdout, groups, base)
}

// csvCommand adds --run to fs (which holds the command's own flags),
// parses args, runs check (the command's own checks of its flags; may be
// nil), and reads the rows of the one CSV argument: all of them, or run
// --run's.
func csvCommand(fs *flag.FlagSet, args []string, check func() error) (path string, rows []results.Row, err error) {
	runID := fs.String("run", "", "only the rows of this `RUN_ID` (default: every row)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return "", nil, errUsage
	}
	if path, err = oneArg(fs, pos, "CSV file"); err != nil {
		return "", nil, err
	}
	if check != nil {
		if err := check(); err != nil {
			return "", nil, err
		}
	}
	rows, err = readRunRows(path, *runID)
	return path, rows, err
}

// readRunRows reads a results CSV, keeping only run runID's rows unless it
// is empty.
func readRunRows(path, runID string) ([]results.Row, error) {
	rows, err := results.ReadCSV(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if runID == "" {
		return rows, nil
	}
	var kept []results.Row
	for _, r := range rows {
		if r.RunID == runID {
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		return nil, withHint(fmt.Errorf("%s has no rows of run %s", path, runID), "the run_id column lists the runs")
	}
	return kept, nil
}
