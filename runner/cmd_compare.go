package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"rdmasweep/internal/words"
	"rdmasweep/results"
	"rdmasweep/runner/reading/compare"
)

type compareOptions struct {
	between, by, format string
	metrics, failOn     listFlag
	alpha               float64
}

var compareCommand = &command{
	name: "compare", args: "[flags] OLD.csv NEW.csv | CSV --between name=old,name=new",
	help:    "  compare OLD NEW compare two CSVs point by point, or one CSV\n                  --between name=a,name=b; exit 3 on a --fail-on change",
	example: "runner compare --fail-on 'bandwidth_mb_s<-5%' before.csv after.csv",
	flags: func(fs *flag.FlagSet) func(context.Context, globals, []string) error {
		var o compareOptions
		fs.StringVar(&o.between, "between", "", "compare within one CSV: the rows at `name=old,name=new`, e.g. registration=pinned,registration=odp")
		fs.StringVar(&o.by, "by", "", "match points on these parameters only (`PARAM,…`; default: the point key)")
		fs.Var(&o.metrics, "metric", "a numeric result `column` to compare (repeatable; default bandwidth_mb_s, lat_p50_us, lat_p99_us)")
		fs.Float64Var(&o.alpha, "alpha", 0.05, "the significance level of the U test")
		fs.StringVar(&o.format, "format", "text", "text, csv or json (one object a line)")
		fs.Var(&o.failOn, "fail-on", "exit 3 on a significant change beyond `METRIC<PCT%` or METRIC>PCT%, e.g. 'bandwidth_mb_s<-5%' (repeatable)")
		return func(ctx context.Context, g globals, args []string) error { return runCompare(ctx, o, g, args) }
	},
}

// runCompare is `runner compare`: two CSVs, or one with --between, judged
// point by point and metric by metric.
func runCompare(ctx context.Context, o compareOptions, g globals, args []string) error {
	opts, gates, err := compareFlags(&o, len(args))
	if err != nil {
		g.fs.Usage()
		return err
	}
	old, new, err := compareRows(args)
	if err != nil {
		return err
	}
	res, err := compare.Compare(old, new, opts)
	if err != nil {
		return err
	}
	if err := compare.Write(g.stdout, res, o.format); err != nil {
		return err
	}
	compareWarnings(g.ui, res)
	return gateResult(res, gates)
}

// compareFlags checks the number of CSVs, then the flags against each
// other.
func compareFlags(o *compareOptions, nargs int) (compare.Options, []compare.Gate, error) {
	switch {
	case o.between == "" && nargs != 2:
		return compare.Options{}, nil, usageErrorf("compare takes OLD.csv NEW.csv, or one CSV with --between (got %d arguments)", nargs)
	case o.between != "" && nargs != 1:
		return compare.Options{}, nil, usageErrorf("compare --between takes one CSV (got %d arguments)", nargs)
	}
	opts, gates, err := compare.Setup(compare.Flags{
		Between: o.between, By: o.by, Format: o.format, Metrics: o.metrics, FailOn: o.failOn, Alpha: o.alpha,
	})
	if err != nil {
		return opts, nil, usageErrorf("%s", err)
	}
	return opts, gates, nil
}

func compareRows(paths []string) (old, new []results.Row, err error) {
	var all csvOptions
	if old, err = all.read(paths[0]); err != nil {
		return nil, nil, err
	}
	if len(paths) == 1 {
		return old, old, nil
	}
	new, err = all.read(paths[1])
	return old, new, err
}

// compareWarnings says, once per cause, how many comparisons it touches:
// too few samples for an interval, or for the test to find anything.
func compareWarnings(ui *voice, res compare.Result) {
	for _, w := range compare.Warnings(res) {
		ui.warnf("%d of %d comparisons: %s", w.Count, len(res.Points), w.Text)
	}
	if res.UnmatchedOld+res.UnmatchedNew > 0 {
		ui.warnf("%d old and %d new points have no partner and are left out", res.UnmatchedOld, res.UnmatchedNew)
	}
}

// gateResult is a verdict failure when any gate trips.
func gateResult(res compare.Result, gates []compare.Gate) error {
	var tripped []string
	for _, t := range compare.Tripped(res, gates) {
		tripped = append(tripped, fmt.Sprintf("%s at %s", t.Gate, words.Count(t.Points, "point")))
	}
	if len(tripped) == 0 {
		return nil
	}
	return &verdictFailed{msg: "significant change beyond --fail-on: " + strings.Join(tripped, ", ")}
}
