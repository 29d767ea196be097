package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"rdmasweep/runner/plot"
)

func runPlot(ctx context.Context, args []string, stdout io.Writer, ui *voice) error {
	fs := newFlagSet("plot", "-o FILE.png|FILE.svg [--run RUN_ID] CSV", ui.w)
	out := fs.String("o", "", "write the chart to this `FILE` (.png or .svg)")
	runID := fs.String("run", "", "only the rows of this `RUN_ID` (default: every ok row)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return errUsage
	}
	path, err := oneArg(fs, pos, "CSV file")
	if err != nil {
		return err
	}
	switch strings.ToLower(filepath.Ext(*out)) {
	case ".png", ".svg":
	case "":
		fs.Usage()
		return usageErrorf("plot needs -o FILE.png or -o FILE.svg")
	default:
		return usageErrorf("plot writes .png or .svg (got -o %s)", *out)
	}
	rows, err := readRunRows(path, *runID)
	if err != nil {
		return err
	}
	series := plot.Build(rows)
	title := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	switch err := plot.WriteFile(*out, title, series); {
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
