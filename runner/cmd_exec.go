package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"rdmasweep/internal/words"
	"rdmasweep/plan"
	"rdmasweep/plans"
	"rdmasweep/results"
	"rdmasweep/runner/files/csvfile"
	"rdmasweep/runner/files/manifest"
	"rdmasweep/runner/files/resume"
	"rdmasweep/runner/points/point"
	"rdmasweep/runner/points/progress"
	"rdmasweep/runner/points/sweep"
	"rdmasweep/runner/reading/summary"
	"rdmasweep/runner/reading/verdict"
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
	help:    "  exec [PLAN]     run the plan's points and append rows to its CSV",
	example: "runner exec --dry-run plans/loopback.yaml",
	flags: func(fs *flag.FlagSet) func(context.Context, globals, []string) error {
		var o execOptions
		fs.StringVar(&o.out, "out", "", "append rows to this `CSV` instead of the plan's output.csv")
		fs.BoolVar(&o.dryRun, "dry-run", false, "print the runs that would happen, and run nothing")
		fs.BoolVar(&o.rerun, "rerun", false, "run points again even when the CSV already has them ok")
		fs.BoolVar(&o.failFast, "fail-fast", false, "stop at the first failed point")
		o.addFlags(fs)
		o.addNodesFlag(fs)
		o.addHostFlags(fs)
		return func(ctx context.Context, g globals, args []string) error { return runExec(ctx, o, g, args) }
	},
}

// execRun is one exec once its hosts are ready: what its steps share.
type execRun struct {
	*sweep.Exec
	mode sweep.Mode
	o    execOptions
	g    globals
	pts  []plan.Point
	csv  *csvfile.File
}

// runExec is `runner exec PLAN`: it runs every point of the plan the CSV
// does not already hold ok, appending one row per run (and an aggregate
// row with several clients), and prints the summary. Everything that can
// refuse the exec (the CSV, the hosts, their programs and devices, ODP)
// does so before the first point.
func runExec(ctx context.Context, o execOptions, g globals, args []string) error {
	if o.nodes != "" && !o.dryRun {
		return g.usageError("--nodes stands for an allocation only with --dry-run: exec runs on the allocation it is in (salloc, srun or sbatch)")
	}
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
	mode := sweep.ModeOf(p)
	todo, skipped := mode.Pending(pts, csv.Rows(), o.rerun)
	reportSkipped(g.ui, skipped, csvPath)
	if len(todo) == 0 {
		return summary.Write(g.stdout, summary.Build(resume.Shown(pts, csv.Rows(), nil)))
	}
	if err := reportCost(g.ui, p, pts, todo); err != nil {
		return err
	}
	e, err := sweep.Prepare(ctx, sweep.Setup{
		Plan: p, Points: pts, RunID: manifest.NewRunID(), CSVPath: csvPath, RunnerVersion: version, Set: o.set,
		Hosts: hostOptions(p, g.ui, o.hostFlags), Info: g.ui.info, Warn: g.ui.warn, WarnOnce: func(msg string) { g.ui.warnOnce("%s", msg) },
	}, todo)
	if err != nil {
		return err
	}
	defer e.Close()
	x := &execRun{Exec: e, mode: mode, o: o, g: g, pts: pts, csv: csv}
	if b := mode.Bound(pts); b != "" {
		g.ui.infof("%s", b)
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
	if b := sweep.ModeOf(p).Bound(pts); b != "" {
		g.ui.infof("%s", b)
	}
	reportSkipped(g.ui, skipped, csvPath)
	if err := reportCost(g.ui, p, pts, todo); err != nil {
		return err
	}
	var on []string
	for _, s := range p.Hosts.Roles() {
		on = append(on, s.Name+" "+s.Host.Address)
	}
	fmt.Fprintf(g.stdout, "would run %s of %s × %d repetition(s) on %s, appending to %s\n",
		words.Count(len(todo), "run"), words.Count(len(pts), "point"), p.Repeat, strings.Join(on, ", "), csvPath)
	return summary.WritePoints(g.stdout, resume.Points(todo))
}

// sweep runs the jobs in order, appending each run's rows, then prints
// the summary.
func (x *execRun) sweep(ctx context.Context, todo []resume.Job) error {
	ui := x.g.ui
	prog := progress.New(ui.w, x.mode.Total(x.pts, todo))
	label := func(j resume.Job) string { return fmt.Sprintf("%s r%d", paramsText(j.Point), j.Rep) }
	w := sweep.Watch{
		FailFast: x.o.failFast,
		Begin:    func(i int, j resume.Job) { prog.Begin(i, label(j)) },
		End:      func(i int, j resume.Job, last results.Row, tm point.Timing) { prog.End(i, label(j), last, tm) },
	}
	var existing []results.Row
	if !x.o.rerun {
		existing = x.csv.Rows()
	}
	out, err := x.mode.Run(ctx, x.Exec, x.pts, todo, existing, x.csv, w)
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
	if out.TimelineErr != nil {
		ui.warnf("the timeline sidecar is incomplete: %v", out.TimelineErr)
	}
	if out.CountersErr != nil {
		ui.warnf("the counters sidecar is incomplete: %v", out.CountersErr)
	}
	if err := x.report(out.Rows); err != nil {
		return err
	}
	if failed, total := x.mode.Tally(out); failed > 0 {
		return &someFailed{failed: failed, total: total}
	}
	if n := verdict.Failed(out.Rows); n > 0 {
		return &verdictFailed{msg: fmt.Sprintf("%s of %d failed the plan's expectations (see the verdict_detail column)", words.Count(n, "row"), len(out.Rows))}
	}
	if n := verdict.Unjudged(out.Rows, x.Plan.Expect); n > 0 {
		return &verdictFailed{msg: fmt.Sprintf("%s of %d could not be judged against the plan's expectations (see the verdict_detail column); an expectation with unknown: pass accepts that", words.Count(n, "row"), len(out.Rows))}
	}
	return nil
}

// report prints the mode's report of this exec's rows, and where the
// rows went.
func (x *execRun) report(rows []results.Row) error {
	if err := x.mode.Report(x.g.stdout, x.pts, x.csv.Rows(), rows); err != nil {
		return err
	}
	x.g.ui.infof("%s appended to %s (run %s, logs in %s)", words.Count(len(rows), "row"), x.CSVPath, x.RunID, x.LogDir)
	return nil
}

func reportSkipped(ui *voice, skipped int, csvPath string) {
	if skipped > 0 {
		ui.infof("skipping %s already ok in %s (--rerun runs them again)", words.Count(skipped, "run"), csvPath)
	}
}
