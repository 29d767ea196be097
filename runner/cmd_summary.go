package main

import (
	"context"
	"fmt"
	"io"

	"rdmasweep/results"
	"rdmasweep/runner/summary"
)

func runSummary(ctx context.Context, args []string, stdout io.Writer, ui *voice) error {
	fs := newFlagSet("summary", "[--run RUN_ID] CSV", ui.w)
	runID := fs.String("run", "", "only the rows of this `RUN_ID` (default: every row)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return errUsage
	}
	path, err := oneArg(fs, pos, "CSV file")
	if err != nil {
		return err
	}
	rows, err := readRunRows(path, *runID)
	if err != nil {
		return err
	}
	return summary.Write(stdout, summary.Build(rows))
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
