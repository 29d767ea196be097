package main

import (
	"context"
	"flag"
	"fmt"

	"rdmasweep/runner/summary"
	"rdmasweep/runner/verdict"
)

// summaryOptions are runner summary's.
type summaryOptions struct {
	csvOptions
	baseline string
}

var summaryCommand = &command{
	name: "summary", args: "[--run RUN_ID] [--baseline name=value] CSV",
	help: "  summary CSV     print the summary table of an existing CSV",
	flags: func(fs *flag.FlagSet) func(context.Context, globals, []string) error {
		var o summaryOptions
		fs.StringVar(&o.baseline, "baseline", "", "also print every point's ratio to the point with this `name=value` (e.g. workload=ib_read_bw) and the same other parameters")
		o.addFlags(fs)
		return func(ctx context.Context, g globals, args []string) error { return runSummary(ctx, o, g, args) }
	},
}

// runSummary is `runner summary CSV`: the summary table of the CSV's rows,
// and with --baseline every point's ratio to its baseline.
func runSummary(ctx context.Context, o summaryOptions, g globals, args []string) error {
	path, err := oneArg(g, args, "CSV file")
	if err != nil {
		return err
	}
	var base summary.Baseline
	if o.baseline != "" {
		if base, err = summary.ParseBaseline(o.baseline); err != nil {
			return usageErrorf("%s", err)
		}
	}
	rows, err := o.read(path)
	if err != nil {
		return err
	}
	groups := summary.Build(rows)
	if err := summary.Write(g.stdout, groups); err != nil {
		return err
	}
	if err := verdict.WriteSummary(g.stdout, rows); err != nil {
		return err
	}
	if base.Param == "" {
		return nil
	}
	fmt.Fprintln(g.stdout)
	return summary.WriteRatios(g.stdout, groups, base)
}
