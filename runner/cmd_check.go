package main

import (
	"context"
	"flag"
	"fmt"

	"rdmasweep/internal/words"
	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/files/manifest"
	"rdmasweep/runner/hosts/hostset"
	"rdmasweep/runner/points/check"
)

// checkOptions are runner check's: the plan flags, and the calibration.
type checkOptions struct {
	planOptions
	hostFlags
	calibrate bool
	pairs     int
}

var checkCommand = &command{
	name: "check", args: "[flags] [PLAN]",
	help:    "  check [PLAN]    connect and deploy, check both hosts and the data path;\n                  exit 1 with a hint per problem; --calibrate: node beside ib_read_bw",
	example: "runner check --calibrate plans/bench-rdma.yaml",
	flags: func(fs *flag.FlagSet) func(context.Context, globals, []string) error {
		var o checkOptions
		o.addFlags(fs)
		o.addHostFlags(fs)
		fs.BoolVar(&o.calibrate, "calibrate", false, "then run node and ib_read_bw in turns at 4KiB, 64KiB and 1MiB on the plan's hosts, device and GID, and say whether they agree within 3% (kept beside the plan's CSV, for exec)")
		fs.IntVar(&o.pairs, "pairs", 3, "with --calibrate: pairs of runs at each size")
		return func(ctx context.Context, g globals, args []string) error { return runCheck(ctx, o, g, args) }
	},
}

// runCheck is `runner check PLAN`: it connects to every host (deploying
// node, as exec does), judges what each host has against what the plan
// needs, and proves the data path (and for rdma plans one RDMA READ) with
// node itself. It prints one table row per role on stdout and every
// problem with a hint on stderr; any problem makes it fail (exit 1).
func runCheck(ctx context.Context, o checkOptions, g globals, args []string) error {
	_, p, pts, err := loadPlanArg(ctx, g, o.planOptions, args)
	if err != nil {
		return err
	}
	planWarnings(g.ui, p, pts)
	if err := check.Refused(p); err != nil {
		return err
	}
	switch {
	case o.calibrate && o.pairs < 1:
		return usageErrorf("check: --pairs must be at least 1 (got %d)", o.pairs)
	case o.calibrate && p.Transport() != results.TransportRDMA:
		return usageErrorf("%s: --calibrate compares RDMA READs with ib_read_bw, and the plan's transport is %s", p.Path, p.Transport())
	}
	table := check.New(p, pts)
	set, err := hostset.Connect(ctx, p, hostOptions(p, g.ui, o.hostFlags))
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return cause
		}
		table.ConnectFailed(err)
		return reportCheck(g, table)
	}
	defer set.Close()
	table.Reached(set)
	if err := table.Judge(ctx); err != nil {
		return err
	}
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if table.Probeable() {
		logs, err := table.ProbeAll(ctx, func(msg string) { g.ui.warnOnce("%s", msg) })
		if err != nil {
			return err
		}
		if logs != "" {
			g.ui.infof("probe logs in %s", logs)
		}
	}
	var cals []manifest.Calibration
	if o.calibrate {
		if cals, err = calibrate(ctx, o, g, p, table); err != nil {
			return err
		}
	}
	return reportCheck(g, table, cals...)
}

// calibrate runs check --calibrate once the table has no problem, and
// keeps what it found beside the plan's CSV, where exec finds it.
func calibrate(ctx context.Context, o checkOptions, g globals, p *plan.Plan, table *check.Table) ([]manifest.Calibration, error) {
	if table.Problems() > 0 {
		g.ui.warnf("--calibrate not run: it needs a check with no problem")
		return nil, nil
	}
	cals, logs, err := table.Calibrate(ctx, o.pairs, func(what string) { g.ui.infof("calibrate %s", what) })
	if err != nil || len(cals) == 0 { // none: a host lacks perftest, and the table says which
		return nil, err
	}
	if logs != "" {
		g.ui.infof("calibration logs in %s", logs)
	}
	path := manifest.CalibrationPathFor(p.Output.CSV)
	if err := manifest.SaveCalibrations(path, cals); err != nil {
		return nil, err
	}
	g.ui.infof("calibration kept in %s; exec on these hosts records it, and warns when it disagreed", path)
	return cals, nil
}

// reportCheck prints the table on stdout, then any calibration's, and
// its warnings and problems on stderr, and fails when there is any
// problem.
func reportCheck(g globals, table *check.Table, cals ...manifest.Calibration) error {
	if err := table.Write(g.stdout); err != nil {
		return err
	}
	if len(cals) > 0 {
		fmt.Fprintln(g.stdout)
		if err := check.WriteCalibrations(g.stdout, cals); err != nil {
			return err
		}
	}
	for _, r := range table.Rows {
		for _, w := range r.Verdict.Warnings {
			g.ui.warnf("%s: %s", r.Label, w)
		}
	}
	n := 0
	for _, r := range table.Rows {
		for _, pr := range r.Problems {
			n++
			if pr.Whole {
				g.ui.errorf("%s: %s", r.Label, pr.Msg)
			} else {
				g.ui.errorf("%s: %s: %s", r.Label, pr.Check, pr.Msg)
			}
			g.ui.hintf("%s", pr.Hint)
		}
	}
	if n > 0 {
		return fmt.Errorf("%s would make the plan fail", words.Count(n, "problem"))
	}
	return nil
}
