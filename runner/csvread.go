package main

import (
	"flag"
	"fmt"

	"rdmasweep/results"
	"rdmasweep/runner/csvfile"
	"rdmasweep/runner/hint"
)

// csvOptions are the flags of the commands that read a CSV: summary and
// plot.
type csvOptions struct {
	run string
}

func (o *csvOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.run, "run", "", "only the rows of this `RUN_ID` (default: every row)")
}

// read reads a results CSV, keeping only run --run's rows unless it is
// empty.
func (o csvOptions) read(path string) ([]results.Row, error) {
	rows, err := csvfile.Read(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if o.run == "" {
		return rows, nil
	}
	var kept []results.Row
	for _, r := range rows {
		if r.RunID == o.run {
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		return nil, hint.Wrap(fmt.Errorf("%s has no rows of run %s", path, o.run), "the run_id column lists the runs")
	}
	return kept, nil
}
