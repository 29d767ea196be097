package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"rdmasweep/internal/words"
	"rdmasweep/results"
	"rdmasweep/runner/hint"
	"rdmasweep/runner/reading/fleet"
	"rdmasweep/runner/reading/plot"
)

// plotOptions are runner plot's.
type plotOptions struct {
	csvOptions
	out, x, y, scope string
	matrix           bool
}

var plotCommand = &command{
	name: "plot", args: "-o FILE.png|FILE.svg [--run RUN_ID] [--matrix] CSV",
	help:    "  plot CSV -o F   draw bandwidth and p50/p99 latency against block size\n                  (F ends in .png or .svg)",
	example: "runner plot -o bw.png out/loopback.csv",
	flags: func(fs *flag.FlagSet) func(context.Context, globals, []string) error {
		var o plotOptions
		fs.StringVar(&o.out, "o", "", "write the chart to this `FILE` (.png or .svg)")
		fs.StringVar(&o.x, "x", "", "the x axis: a numeric parameter `NAME` ("+strings.Join(plot.XParams(), ", ")+"); default block_size, or rate when the rows offer several loads")
		fs.StringVar(&o.y, "y", "bandwidth_mb_s", "the left panel's column `NAME`: any numeric column of the CSV (docs/csv.md)")
		fs.BoolVar(&o.matrix, "matrix", false, "draw a pairwise or ring CSV's server × client matrix as a heatmap")
		fs.StringVar(&o.scope, "scope", "", "only the rows of this `SCOPE`: client, or aggregate (several clients' together)")
		o.addFlags(fs)
		return func(ctx context.Context, g globals, args []string) error { return runPlot(ctx, o, g, args) }
	},
}

// runPlot is `runner plot -o FILE CSV`: bandwidth and latency against a
// parameter, one series per combination of the others.
func runPlot(ctx context.Context, o plotOptions, g globals, args []string) error {
	path, err := oneArg(g, args, "CSV file")
	if err != nil {
		return err
	}
	switch strings.ToLower(filepath.Ext(o.out)) {
	case ".png", ".svg":
	case "":
		return g.usageError("plot needs -o FILE.png or -o FILE.svg")
	default:
		return usageErrorf("plot writes .png or .svg (got -o %s)", o.out)
	}
	rows, err := o.read(path)
	if err != nil {
		return err
	}
	if o.matrix {
		return plotMatrix(g, path, o.out, rows)
	}
	if rows = plot.Scoped(rows, o.scope); o.scope != "" && len(rows) == 0 {
		return hint.Wrap(fmt.Errorf("%s has no rows of scope %q", path, o.scope), "the scope column says client or aggregate; a CSV of plans with one client has client rows only")
	}
	if o.x == "" {
		o.x = plot.DefaultX(rows)
	}
	series, err := plot.BuildRate(rows, o.x, o.y)
	switch {
	case errors.Is(err, plot.ErrY):
		return usageErrorf("plot -y %v", err)
	case errors.Is(err, plot.ErrConstantX):
		return fmt.Errorf("plot -x %w", err)
	case err != nil:
		return usageErrorf("plot -x %v", err)
	}
	title := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	switch err := plot.WriteFile(o.out, title, o.x, series); {
	case errors.Is(err, plot.ErrNoData):
		return hint.Wrap(fmt.Errorf("%s: %w", path, err), "runner summary shows the runs and their status; the error column says why runs failed")
	case err != nil:
		return fmt.Errorf("write %s: %w", o.out, err)
	}
	g.ui.infof("wrote %s: %d series, %s", o.out, len(series), words.Count(plot.Points(series), "point"))
	return nil
}

// plotMatrix draws the matrix of each pool point in rows.
func plotMatrix(g globals, path, out string, rows []results.Row) error {
	points := fleet.FromRows(rows, fleet.JudgeOptions{})
	if len(points) == 0 {
		return hint.Wrap(fmt.Errorf("%s has no pairwise or ring rows", path), "plot --matrix draws a pool sweep's links; its rows have a round")
	}
	title := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	switch err := plot.WriteMatrixFile(out, title, points); {
	case errors.Is(err, plot.ErrNoData):
		return hint.Wrap(fmt.Errorf("%s: no link was measured", path), "runner summary lists the unreachable hosts; the error column says why rows failed")
	case err != nil:
		return fmt.Errorf("write %s: %w", out, err)
	}
	g.ui.infof("wrote %s: %s", out, words.Count(len(points), "matrix"))
	return nil
}
