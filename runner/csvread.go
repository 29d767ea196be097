package main

import (
	"errors"
	"flag"
	"fmt"

	"rdmasweep/results"
	"rdmasweep/runner/files/csvfile"
	"rdmasweep/runner/hint"
)

// csvOptions are the flags of the commands that read a CSV: summary and
// plot.
type csvOptions struct {
	runID string
}

func (o *csvOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.runID, "run", "", "only the rows of this `RUN_ID` (default: every row)")
}

// read reads a results CSV, keeping only run --run's rows unless it is
// empty.
func (o csvOptions) read(path string) ([]results.Row, error) {
	rows, err := csvfile.ReadRun(path, o.runID)
	if errors.Is(err, csvfile.ErrForeignHeader) && hint.Of(err) == "" {
		// Not exec's "pass another --out": a reader names the CSV it reads.
		return nil, hint.Wrap(err, "name a CSV that runner exec wrote: its header begins run_id,plan,point_key")
	}
	if err == nil && o.runID != "" && len(rows) == 0 {
		return nil, hint.Wrap(fmt.Errorf("%s has no rows of run %s", path, o.runID), "the run_id column lists the runs")
	}
	return rows, err
}
