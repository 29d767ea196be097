package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"rdmasweep/results"
	"rdmasweep/runner/fleet"
	"rdmasweep/runner/plot"
)

func runPlot(ctx context.Context, args []string, stdout io.Writer, ui *voice) error {
	fs := newFlagSet("plot", "-o FILE.png|FILE.svg [--run RUN_ID] [--matrix] CSV", ui.w)
	out := fs.String("o", "", "write the chart to this `FILE` (.png or .svg)")
	matrix := fs.Bool("matrix", false, "draw a pairwise or ring CSV's server × client matrix as a heatmap")
	x := fs.String("x", "block_size", "the x axis: a numeric parameter `NAME` ("+strings.Join(plot.XParams(), ", ")+")")
	scope := fs.String("scope", "", "only the rows of this `SCOPE`: client, or aggregate (several clients' together)")
	path, rows, err := csvCommand(fs, args, func() error {
		switch strings.ToLower(filepath.Ext(*out)) {
		case ".png", ".svg":
			return nil
		case "":
			fs.Usage()
			return usageErrorf("plot needs -o FILE.png or -o FILE.svg")
		}
		return usageErrorf("plot writes .png or .svg (got -o %s)", *out)
	})
	if err != nil {
		return err
	}
	if *matrix {
		return plotMatrix(path, *out, rows, ui)
	}
	if *scope != "" {
		var kept []results.Row
		for _, r := range rows {
			if r.Scope == *scope {
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 {
			return withHint(fmt.Errorf("%s has no rows of scope %q", path, *scope), "the scope column says client or aggregate; a CSV of plans with one client has client rows only")
		}
		rows = kept
	}
	series, err := plot.Build(rows, *x)
	if err != nil {
		return usageErrorf("plot -x %v", err)
	}
	title := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	switch err := plot.WriteFile(*out, title, *x, series); {
	case errors.Is(err, plot.ErrNoData):
		return withHint(fmt.Errorf("%s: %w", path, err), "runner summary shows the runs and their status; the error column says why runs failed")
	case err != nil:
		return fmt.Errorf("write %s: %w", *out, err)
	}
	points := 0
	for _, s := range series {
		points += len(s.Points)
	}
	ui.infof("wrote %s: %d series, %s", *out, len(series), plural(points, "point"))
	return nil
}

// plotMatrix draws the matrix of each pool point in rows.
func plotMatrix(path, out string, rows []results.Row, ui *voice) error {
	points := fleet.FromRows(rows, fleet.JudgeOptions{})
	if len(points) == 0 {
		return withHint(fmt.Errorf("%s has no pairwise or ring rows", path), "plot --matrix draws a pool sweep's links; its rows have a round")
	}
	title := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	switch err := plot.WriteMatrixFile(out, title, points); {
	case errors.Is(err, plot.ErrNoData):
		return withHint(fmt.Errorf("%s: no link was measured", path), "runner summary lists the unreachable hosts; the error column says why rows failed")
	case err != nil:
		return fmt.Errorf("write %s: %w", out, err)
	}
	ui.infof("wrote %s: %s", out, plural(len(points), "matrix"))
	return nil
}
