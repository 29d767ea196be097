package main

import (
	"context"
	"flag"
	"fmt"
	"slices"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/reading/fleet"
	"rdmasweep/runner/reading/summary"
	"rdmasweep/runner/reading/verdict"
)

// summaryOptions are runner summary's.
type summaryOptions struct {
	csvOptions
	baseline  string
	metric    string
	format    string
	slowBelow float64
	oldExpect float64 // --expect, slow-below's old name
	counters  bool
}

var summaryCommand = &command{
	name: "summary", args: "[--run RUN_ID] [--baseline name=value [--metric COLUMN]] [--format text|json] [--slow-below MB/s] [--counters] CSV",
	help:    "  summary CSV     print the summary table of an existing CSV",
	example: "runner summary --baseline workload=ib_read_bw out/loopback.csv",
	flags: func(fs *flag.FlagSet) func(context.Context, globals, []string) error {
		var o summaryOptions
		fs.StringVar(&o.baseline, "baseline", "", "also print every point's ratio to the point with this `name=value` (e.g. workload=ib_read_bw) and the same other parameters")
		fs.StringVar(&o.metric, "metric", "", "with --baseline, the numeric `COLUMN` to compare (default: end_to_end_mb_s where every row compared is cold and has it, else bandwidth_mb_s)")
		fs.StringVar(&o.format, "format", "text", "`text`, or json: a pairwise or ring CSV's judgment, a search CSV's knees, else every point's figures")
		fs.Float64Var(&o.slowBelow, "slow-below", 0, "pairwise and ring: a link is slow below this many `MB/s` (default: the lower of 0.8 × the median link and the median − 3 × MAD); not the plan's expect, which judges each row")
		fs.Float64Var(&o.oldExpect, "expect", 0, "the old name of --slow-below (`MB/s`)")
		fs.BoolVar(&o.counters, "counters", false, "print instead each run's counters that moved, per point and role, by their kernel names (from RUN_ID.counters.jsonl beside the CSV)")
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
	if o.format != "text" && o.format != "json" {
		return g.usageError("summary --format is text or json (got %q)", o.format)
	}
	if o.counters && o.format != "text" {
		return g.usageError("summary --counters prints text (got --format %s)", o.format)
	}
	if o.oldExpect != 0 {
		g.ui.warnf("summary --expect is now --slow-below: it sets the slow-link threshold of a pool, not the plan's expect")
		if o.slowBelow == 0 {
			o.slowBelow = o.oldExpect
		}
	}
	var base summary.Baseline
	if o.baseline != "" {
		if base, err = summary.ParseBaseline(o.baseline); err != nil {
			return usageErrorf("%s", err)
		}
		if o.metric != "" && !slices.Contains(results.MetricColumns(), o.metric) {
			return usageErrorf("summary --metric: %q is not a numeric column%s", o.metric, plan.Suggest(o.metric, results.MetricColumns()))
		}
		base.Metric = o.metric
	}
	rows, err := o.read(path)
	if err != nil {
		return err
	}
	if o.counters {
		byRun, err := summary.ReadRunCounters(path, rows)
		if err != nil {
			return err
		}
		return summary.WriteCounters(g.stdout, rows, byRun)
	}
	if pool := fleet.FromRows(rows, fleet.JudgeOptions{SlowBelow: o.slowBelow}); len(pool) > 0 {
		if o.format == "json" {
			return fleet.WriteJSON(g.stdout, pool)
		}
		return fleet.WriteText(g.stdout, pool)
	}
	knees := summary.Knees(rows)
	if o.format == "json" && len(knees) > 0 {
		return summary.WriteKneesJSON(g.stdout, knees)
	}
	groups := summary.Build(rows)
	if o.format == "json" {
		if base.Param != "" {
			return g.usageError("summary --format json has no --baseline: its points carry every figure, so divide those")
		}
		return summary.WriteJSON(g.stdout, groups)
	}
	if err := summary.Write(g.stdout, groups); err != nil {
		return err
	}
	if err := summary.WriteKnees(g.stdout, knees); err != nil {
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
