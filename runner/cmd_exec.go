package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"rdmasweep/plan"
	"rdmasweep/plans"
	"rdmasweep/results"
	"rdmasweep/runner/fleet"
	"rdmasweep/runner/point"
	"rdmasweep/runner/role"
	"rdmasweep/runner/summary"
)

type execOptions struct {
	planOptions
	out                     string
	dryRun, rerun, failFast bool
}

// job is one repetition of one point.
type job struct {
	pt  plan.Point
	rep int
}

func runExec(ctx context.Context, args []string, stdout io.Writer, ui *voice) error {
	fs := newFlagSet("exec", "[flags] [PLAN]", ui.w)
	var o execOptions
	fs.StringVar(&o.out, "out", "", "append rows to this `CSV` instead of the plan's output.csv")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print the runs that would happen, and run nothing")
	fs.BoolVar(&o.rerun, "rerun", false, "run points again even when the CSV already has them ok")
	fs.BoolVar(&o.failFast, "fail-fast", false, "stop at the first failed point")
	path, p, pts, err := planCommand(ctx, fs, &o.planOptions, args)
	if err != nil {
		return err
	}
	if path == "" {
		ui.infof("no plan given: running the built-in %s (both roles on this machine, tcp)", plans.LoopbackName)
	}
	planWarnings(ui, p, pts)
	csvPath := o.out
	if csvPath == "" {
		csvPath = p.Output.CSV
	}

	if o.dryRun {
		var existing []results.Row
		if _, err := os.Stat(csvPath); err == nil {
			if existing, err = results.ReadCSV(csvPath); err != nil {
				return fmt.Errorf("read %s: %w", csvPath, err)
			}
		}
		todo, skipped := pending(pts, p.Repeat, existing, o.rerun)
		reportSkipped(ui, skipped, csvPath)
		var on []string
		for _, s := range p.Hosts.Roles() {
			on = append(on, s.Name+" "+s.Host.Address)
		}
		fmt.Fprintf(stdout, "would run %s of %s × %d repetition(s) on %s, appending to %s\n",
			plural(len(todo), "run"), plural(len(pts), "point"), p.Repeat, strings.Join(on, ", "), csvPath)
		return writePointTable(stdout, uniquePoints(todo))
	}

	csv, err := results.OpenCSV(csvPath)
	switch {
	case errors.Is(err, results.ErrLocked):
		return withHint(fmt.Errorf("%s: %w", csvPath, err), "wait for it to finish, or pass another --out")
	case errors.Is(err, results.ErrOlderHeader):
		return withHint(fmt.Errorf("%s: %w", csvPath, err), "add the new columns with: runner csv upgrade "+csvPath+" (it keeps the old file as a backup), or pass another --out")
	case err != nil:
		return fmt.Errorf("open %s: %w", csvPath, err)
	}
	defer csv.Close()
	todo, skipped := pending(pts, p.Repeat, csv.Rows(), o.rerun)
	reportSkipped(ui, skipped, csvPath)
	if len(todo) == 0 {
		return summary.Write(stdout, summary.Build(planRows(pts, csv.Rows(), nil)))
	}

	runID := newRunID()
	logDir := filepath.Join(p.Output.Logs, runID)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return fmt.Errorf("create log directory: %w", err)
	}
	roles, err := connect(ctx, p, ui)
	if err != nil {
		return err
	}
	defer roles.close()
	if err := checkPrograms(ctx, roles, pts); err != nil {
		return err
	}
	man, err := collectManifest(ctx, p, roles, runID, csvPath, o.set...)
	if err != nil {
		return err
	}
	man.warnClocks(roles, ui)
	probes, err := odpGate(ctx, p, todo, roles, man.kernels(), logDir, ui)
	man.m.ODPProbes = probes
	if err != nil {
		return err
	}
	if err := man.write(); err != nil {
		return err
	}

	left, err := openLeftovers(ctx, csvPath+".state", roles, ui)
	if err != nil {
		return err
	}
	series := &seriesFile{path: seriesPath(csvPath, runID)}
	defer series.close()
	r := &point.Runner{
		Plan:    p,
		RunID:   runID,
		Targets: roles.list,
		LogDir:  logDir,
		Warn:    func(msg string) { ui.warnOnce("%s", msg) },
		Started: left.Add,
		Exited:  left.Remove,
		Series:  series.add,
		Path:    func(t role.Target, rp *results.RDMAPath) { man.addPath(t, rp, ui.warnf) },
	}
	if p.Launcher == "slurm" {
		r.BarrierLead = point.SlurmBarrierLead
	}
	prog := newProgress(ui.w, len(todo))
	var (
		rows   []results.Row
		runs   int
		failed int
	)
	for i, j := range todo {
		prog.begin(i, j)
		run := r.Run
		if p.IsPool() {
			run = func(ctx context.Context, pt plan.Point, rep int) ([]results.Row, point.Timing, error) {
				return runPool(ctx, r, roles.list, pt, rep)
			}
		}
		ptRows, tm, err := run(ctx, j.pt, j.rep)
		if err != nil {
			prog.abort()
			if cause := context.Cause(ctx); cause != nil {
				return cause
			}
			return err
		}
		// The clients' rows, then the aggregate: the last row says whether
		// the run is done, so a run cut short between them runs again.
		for _, row := range ptRows {
			if err := csv.Append(row); err != nil {
				prog.abort()
				return withHint(fmt.Errorf("append row: %w", err), "the run stopped so it does not measure into nowhere; free space, then exec again: finished points are kept")
			}
		}
		rows = append(rows, ptRows...)
		runs++
		row := ptRows[len(ptRows)-1]
		prog.end(i, j, row, tm)
		if row.Status != results.StatusOK {
			failed++
			if o.failFast {
				ui.errorf("%s", row.Error)
				ui.infof("stopping at the first failure (--fail-fast); logs in %s", logDir)
				break
			}
		}
	}
	prog.finish()
	if err := series.close(); err != nil {
		ui.warnf("the time series is incomplete: %v", err)
	}
	if p.IsPool() { // a pool's rows carry their pairs' keys: judge them instead
		if err := fleet.WriteText(stdout, fleet.FromRows(rows, fleet.JudgeOptions{})); err != nil {
			return err
		}
		ui.infof("%s appended to %s (run %s, logs in %s)", plural(len(rows), "row"), csvPath, runID, logDir)
		return someFailedOf(rows)
	}
	groups := summary.Build(planRows(pts, csv.Rows(), rows))
	if err := summary.Write(stdout, groups); err != nil {
		return err
	}
	if base, ok := peerBaseline(pts); ok {
		fmt.Fprintln(stdout)
		if err := summary.WriteRatios(stdout, groups, base); err != nil {
			return err
		}
	}
	ui.infof("%s appended to %s (run %s, logs in %s)", plural(len(rows), "row"), csvPath, runID, logDir)
	if failed > 0 {
		return &someFailed{failed: failed, total: runs}
	}
	return nil
}

// peerBaseline is the workload the others are compared with when the plan
// sweeps workload: its first peer (runner summary --baseline picks
// another).
func peerBaseline(pts []plan.Point) (summary.Baseline, bool) {
	seen := map[string]bool{}
	first := ""
	for _, pt := range pts {
		w := pt.Values.Str("workload")
		seen[w] = true
		if first == "" && w != "node" {
			first = w
		}
	}
	return summary.Baseline{Param: "workload", Value: first}, first != "" && len(seen) > 1
}

// pending lists the runs to do: every (point, repetition) without an ok
// row that ends its run (the aggregate row, with several clients), or all
// of them with rerun. skipped counts the others. A point's repetitions run
// back to back, except beside its peers: the points that differ only in
// workload (consecutive, since workload varies fastest) take turns,
// repetition by repetition, so node and its peer run in pairs.
func pending(pts []plan.Point, repeat int, existing []results.Row, rerun bool) (todo []job, skipped int) {
	ok := map[string]bool{}
	for _, r := range existing {
		if r.Status == results.StatusOK {
			ok[fmt.Sprintf("%s/%t/%d", r.PointKey, r.Scope == results.ScopeAggregate, r.Repetition)] = true
		}
	}
	for i := 0; i < len(pts); {
		j := i + 1
		for j < len(pts) && sameButWorkload(pts[i], pts[j]) {
			j++
		}
		for rep := 1; rep <= repeat; rep++ {
			for _, pt := range pts[i:j] {
				if !rerun && ok[fmt.Sprintf("%s/%t/%d", pt.Key, pt.Hosts.Several(), rep)] {
					skipped++
					continue
				}
				todo = append(todo, job{pt: pt, rep: rep})
			}
		}
		i = j
	}
	return todo, skipped
}

// sameButWorkload reports whether two points differ in workload alone.
func sameButWorkload(a, b plan.Point) bool {
	if a.Values.Str("workload") == b.Values.Str("workload") {
		return false
	}
	for _, p := range results.Params() {
		if p.Name != "workload" && p.Format(a.Values) != p.Format(b.Values) {
			return false
		}
	}
	return true
}

func reportSkipped(ui *voice, skipped int, csvPath string) {
	if skipped > 0 {
		ui.infof("skipping %s already ok in %s (--rerun runs them again)", plural(skipped, "run"), csvPath)
	}
}

func uniquePoints(todo []job) []plan.Point {
	var pts []plan.Point
	seen := map[string]bool{}
	for _, j := range todo {
		if !seen[j.pt.Key] {
			seen[j.pt.Key] = true
			pts = append(pts, j.pt)
		}
	}
	return pts
}

// planRows picks, for each point of the plan, the rows the summary shows:
// this exec's rows for the points it ran, else the CSV's earlier ok rows.
func planRows(pts []plan.Point, earlier, now []results.Row) []results.Row {
	ran := map[string]bool{}
	for _, r := range now {
		ran[r.PointKey] = true
	}
	byKey := map[string][]results.Row{}
	for _, r := range earlier {
		if !ran[r.PointKey] && r.Status == results.StatusOK {
			byKey[r.PointKey] = append(byKey[r.PointKey], r)
		}
	}
	for _, r := range now {
		byKey[r.PointKey] = append(byKey[r.PointKey], r)
	}
	var rows []results.Row
	for _, pt := range pts {
		rows = append(rows, byKey[pt.Key]...)
		delete(byKey, pt.Key)
	}
	return rows
}

// newRunID is sortable by time and unique: 20261202T150405Z-1a2b3c.
func newRunID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}
