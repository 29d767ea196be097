package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"

	"rdmasweep/plan"
	"rdmasweep/plans"
	"rdmasweep/results"
	"rdmasweep/runner/csvfile"
	"rdmasweep/runner/fleet"
	"rdmasweep/runner/manifest"
	"rdmasweep/runner/point"
	"rdmasweep/runner/progress"
	"rdmasweep/runner/resume"
	"rdmasweep/runner/search"
	"rdmasweep/runner/summary"
	"rdmasweep/runner/sweep"
	"rdmasweep/runner/verdict"
)

// execOptions are runner exec's.
type execOptions struct {
	planOptions
	hostFlags
	out                     string
	dryRun, rerun, failFast bool
}

var execCommand = &command{
	name: "exec", args: "[flags] [PLAN]",
	help: "  exec [PLAN]     run the plan's points and append rows to its CSV",
	flags: func(fs *flag.FlagSet) func(context.Context, globals, []string) error {
		var o execOptions
		fs.StringVar(&o.out, "out", "", "append rows to this `CSV` instead of the plan's output.csv")
		fs.BoolVar(&o.dryRun, "dry-run", false, "print the runs that would happen, and run nothing")
		fs.BoolVar(&o.rerun, "rerun", false, "run points again even when the CSV already has them ok")
		fs.BoolVar(&o.failFast, "fail-fast", false, "stop at the first failed point")
		o.addFlags(fs)
		o.addHostFlags(fs)
		return func(ctx context.Context, g globals, args []string) error { return runExec(ctx, o, g, args) }
	},
}

// execRun is one exec once its hosts are ready: what its steps share.
type execRun struct {
	*sweep.Exec
	o   execOptions
	g   globals
	pts []plan.Point
	csv *csvfile.File
}

// runExec is `runner exec PLAN`: it runs every point of the plan the CSV
// does not already hold ok, appending one row per run (and an aggregate
// row with several clients), and prints the summary. Everything that can
// refuse the exec (the CSV, the hosts, their programs and devices, ODP)
// does so before the first point.
func runExec(ctx context.Context, o execOptions, g globals, args []string) error {
	path, p, pts, err := loadPlanArg(ctx, g, o.planOptions, args)
	if err != nil {
		return err
	}
	if path == "" {
		g.ui.infof("no plan given: running the built-in %s (both roles on this machine, tcp)", plans.LoopbackName)
	}
	planWarnings(g.ui, p, pts)
	csvPath := o.out
	if csvPath == "" {
		csvPath = p.Output.CSV
	}
	if o.dryRun {
		return execDryRun(o, g, p, pts, csvPath)
	}
	csv, err := sweep.OpenCSV(csvPath)
	if err != nil {
		return err
	}
	defer csv.Close()
	todo, skipped := resume.Pending(pts, p.Repeat, csv.Rows(), o.rerun)
	if p.Search != nil { // the walks decide the runs; the outer points' are the gates'
		todo, skipped = resume.Pending(pts, 1, nil, true)
	}
	reportSkipped(g.ui, skipped, csvPath)
	if len(todo) == 0 {
		return summary.Write(g.stdout, summary.Build(resume.Shown(pts, csv.Rows(), nil)))
	}
	e, err := sweep.Prepare(ctx, sweep.Setup{
		Plan: p, Points: pts, RunID: manifest.NewRunID(), CSVPath: csvPath, RunnerVersion: version, Set: o.set,
		Hosts: hostOptions(p, g.ui, o.hostFlags), Info: g.ui.info, Warn: g.ui.warn, WarnOnce: func(msg string) { g.ui.warnOnce("%s", msg) },
	}, todo)
	if err != nil {
		return err
	}
	defer e.Close()
	x := &execRun{Exec: e, o: o, g: g, pts: pts, csv: csv}
	if p.Search != nil {
		g.ui.infof("%s", search.BoundText(search.FromPlan(p.Search, p.Repeat), len(pts)))
	}
	return x.sweep(ctx, todo)
}

// execDryRun prints what exec would run, and runs nothing.
func execDryRun(o execOptions, g globals, p *plan.Plan, pts []plan.Point, csvPath string) error {
	existing, err := sweep.Existing(csvPath)
	if err != nil {
		return err
	}
	todo, skipped := resume.Pending(pts, p.Repeat, existing, o.rerun)
	if p.Search != nil {
		g.ui.infof("%s", search.BoundText(search.FromPlan(p.Search, p.Repeat), len(pts)))
	}
	reportSkipped(g.ui, skipped, csvPath)
	var on []string
	for _, s := range p.Hosts.Roles() {
		on = append(on, s.Name+" "+s.Host.Address)
	}
	fmt.Fprintf(g.stdout, "would run %s of %s × %d repetition(s) on %s, appending to %s\n",
		plural(len(todo), "run"), plural(len(pts), "point"), p.Repeat, strings.Join(on, ", "), csvPath)
	return summary.WritePoints(g.stdout, resume.Points(todo))
}

// sweep runs the jobs in order, appending each run's rows, then prints
// the summary.
func (x *execRun) sweep(ctx context.Context, todo []resume.Job) error {
	ui := x.g.ui
	total := len(todo)
	if x.Plan.Search != nil {
		total = sweep.SearchRuns(x.Plan, len(x.pts)) // a bound: the walks decide
	}
	prog := progress.New(ui.w, total)
	label := func(j resume.Job) string { return fmt.Sprintf("%s r%d", paramsText(j.Point), j.Rep) }
	w := sweep.Watch{
		FailFast: x.o.failFast,
		Begin:    func(i int, j resume.Job) { prog.Begin(i, label(j)) },
		End:      func(i int, j resume.Job, last results.Row, tm point.Timing) { prog.End(i, label(j), last, tm) },
	}
	var out sweep.Outcome
	var err error
	if x.Plan.Search != nil {
		var existing []results.Row
		if !x.o.rerun {
			existing = x.csv.Rows()
		}
		out, err = x.RunSearch(ctx, x.pts, existing, x.csv, w)
	} else {
		out, err = x.Run(ctx, todo, x.csv, w)
	}
	if err != nil {
		prog.Abort()
		return err
	}
	if out.Stopped != nil {
		ui.errorf("%s", out.Stopped.Error)
		ui.infof("stopping at the first failure (--fail-fast); logs in %s", x.LogDir)
	}
	prog.Finish()
	if out.SeriesErr != nil {
		ui.warnf("the time series is incomplete: %v", out.SeriesErr)
	}
	if out.CountersErr != nil {
		ui.warnf("the counters sidecar is incomplete: %v", out.CountersErr)
	}
	if err := x.report(out.Rows); err != nil {
		return err
	}
	if failed, total := out.Tally(x.Plan.IsPool()); failed > 0 {
		return &someFailed{failed: failed, total: total}
	}
	if n := verdict.Failed(out.Rows); n > 0 {
		return &verdictFailed{msg: fmt.Sprintf("%s of %d failed the plan's expectations (see the verdict_detail column)", plural(n, "row"), len(out.Rows))}
	}
	return nil
}

// report prints the summary of the plan's points (this exec's rows where
// it ran them, else the CSV's), with the ratios to a peer when the plan
// sweeps workload, and where the rows went. A pool sweep's rows carry
// their pairs' keys, so its links are judged instead of its points summed.
func (x *execRun) report(rows []results.Row) error {
	if err := x.writeReport(rows); err != nil {
		return err
	}
	x.g.ui.infof("%s appended to %s (run %s, logs in %s)", plural(len(rows), "row"), x.CSVPath, x.RunID, x.LogDir)
	return nil
}

func (x *execRun) writeReport(rows []results.Row) error {
	stdout := x.g.stdout
	if x.Plan.IsPool() {
		return fleet.WriteText(stdout, fleet.FromRows(rows, fleet.JudgeOptions{}))
	}
	if x.Plan.Search != nil { // the walks' rows, and the knees of the CSV
		if err := summary.Write(stdout, summary.Build(rows)); err != nil {
			return err
		}
		if err := summary.WriteKnees(stdout, summary.Knees(slices.Concat(x.csv.Rows(), rows))); err != nil {
			return err
		}
		return verdict.WriteSummary(stdout, rows)
	}
	groups := summary.Build(resume.Shown(x.pts, x.csv.Rows(), rows))
	if err := summary.Write(stdout, groups); err != nil {
		return err
	}
	if base, ok := summary.PeerBaseline(x.pts); ok {
		fmt.Fprintln(stdout)
		if err := summary.WriteRatios(stdout, groups, base); err != nil {
			return err
		}
	}
	return verdict.WriteSummary(stdout, rows)
}

func reportSkipped(ui *voice, skipped int, csvPath string) {
	if skipped > 0 {
		ui.infof("skipping %s already ok in %s (--rerun runs them again)", plural(skipped, "run"), csvPath)
	}
}
