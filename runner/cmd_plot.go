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
	"rdmasweep/runner/files/manifest"
	"rdmasweep/runner/hint"
	"rdmasweep/runner/reading/fleet"
	"rdmasweep/runner/reading/plot"
)

// plotOptions are runner plot's.
type plotOptions struct {
	csvOptions
	out, x, y, scope, point string
	matrix, timeline        bool
}

var plotCommand = &command{
	name: "plot", args: "-o FILE.png|FILE.svg [--run RUN_ID] [--matrix | --timeline [--point KEY]] CSV",
	help:    "  plot CSV -o F   draw bandwidth and p50/p99 latency against block size\n                  (F ends in .png or .svg)",
	example: "runner plot -o bw.png out/loopback.csv",
	flags: func(fs *flag.FlagSet) func(context.Context, globals, []string) error {
		var o plotOptions
		fs.StringVar(&o.out, "o", "", "write the chart to this `FILE` (.png or .svg)")
		fs.StringVar(&o.x, "x", "", "the x axis: a numeric parameter `NAME` ("+strings.Join(plot.XParams(), ", ")+"); default block_size, or rate when the rows offer several loads")
		fs.StringVar(&o.y, "y", "bandwidth_mb_s", "the left panel's column `NAME`: any numeric column of the CSV (docs/csv.md)")
		fs.BoolVar(&o.matrix, "matrix", false, "draw a pairwise or ring CSV's server × client matrix as a heatmap")
		fs.BoolVar(&o.timeline, "timeline", false, "draw the pipelined points' stages, region by region (the run's timeline sidecar; --run picks the run, default the last)")
		fs.StringVar(&o.point, "point", "", "with --timeline, only this `KEY`'s runs (the point_key column)")
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
	if o.timeline {
		return plotTimeline(g, path, o, rows)
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

// plotTimeline draws the timeline sidecar of a run (--run, else the
// last run of rows with a streamed point, pipelined or io direct): one
// panel per such server run, or --point's alone.
func plotTimeline(g globals, path string, o plotOptions, rows []results.Row) error {
	var runs []string // those with a streamed row, in order
	for _, r := range rows {
		if r.Streamed() && (len(runs) == 0 || runs[len(runs)-1] != r.RunID) {
			runs = append(runs, r.RunID)
		}
	}
	if len(runs) == 0 {
		what := path
		if o.runID != "" {
			what = "run " + o.runID + " of " + path
		}
		return hint.Wrap(fmt.Errorf("%s has no pipelined rows", what), "a timeline is drawn for points with server.pipeline: true")
	}
	var runID string
	var lines []manifest.TimelineLine
	for i := len(runs) - 1; i >= 0 && len(lines) == 0; i-- {
		runID = runs[i]
		var err error
		if lines, err = manifest.ReadTimelines(manifest.TimelinePathFor(path, runID)); err != nil {
			return err
		}
	}
	if len(lines) == 0 {
		err := fmt.Errorf("%s: run %s has no timeline (%s)", path, runID, filepath.Base(manifest.TimelinePathFor(path, runID)))
		if len(runs) > 1 {
			err = fmt.Errorf("%s: none of its %d runs with pipelined points has a timeline (RUN_ID.timeline.jsonl)", path, len(runs))
		}
		return hint.Wrap(err, "exec writes one beside the CSV for each pipelined point a node of this version serves")
	}
	var tls []plot.Timeline
	for _, l := range lines {
		if o.point == "" || l.PointKey == o.point {
			tls = append(tls, plot.Timeline{Title: fmt.Sprintf("point %s r%d on %s", l.PointKey, l.Repetition, l.Host), DiskIdlePct: l.DiskIdlePct, Regions: l.Regions})
		}
	}
	switch {
	case len(tls) == 0:
		return hint.Wrap(fmt.Errorf("run %s has no timeline of point %s", runID, o.point), "the point_key column names the points")
	case len(tls) > plot.MaxTimelines:
		return hint.Wrap(fmt.Errorf("run %s has %d timelines; a chart holds %d", runID, len(tls), plot.MaxTimelines), "pick a point with --point KEY")
	}
	if err := plot.WriteTimelineFile(o.out, tls); err != nil {
		return fmt.Errorf("write %s: %w", o.out, err)
	}
	g.ui.infof("wrote %s: %s of run %s", o.out, words.Count(len(tls), "timeline"), runID)
	return nil
}
