package main

import (
	"context"
	"flag"

	"rdmasweep/runner/files/resume"
	"rdmasweep/runner/points/sweep"
	"rdmasweep/runner/reading/summary"
)

// planCmdOptions are runner plan's: the plan flags alone.
type planCmdOptions struct{ planOptions }

var planCommand = &command{
	name: "plan", args: "[flags] [PLAN]",
	help:    "  plan [PLAN]     print the expanded points and their keys",
	example: "runner plan --only block_size=4KiB plans/loopback.yaml",
	flags: func(fs *flag.FlagSet) func(context.Context, globals, []string) error {
		var o planCmdOptions
		o.addFlags(fs)
		o.addNodesFlag(fs)
		return func(ctx context.Context, g globals, args []string) error { return runPlan(ctx, o, g, args) }
	},
}

// runPlan is `runner plan PLAN`: the expanded points, one line each with
// its key and parameters, on stdout, and on stderr what running them all
// would cost.
func runPlan(ctx context.Context, o planCmdOptions, g globals, args []string) error {
	_, p, pts, err := loadPlanArg(ctx, g, o.planOptions, args)
	if err != nil {
		return err
	}
	planWarnings(g.ui, p, pts)
	if b := sweep.ModeOf(p).Bound(pts); b != "" {
		g.ui.infof("%s", b)
	}
	todo, _ := resume.Pending(pts, p.Repeat, nil, true)
	if err := reportCost(g.ui, p, pts, todo); err != nil {
		return err
	}
	return summary.WritePoints(g.stdout, pts)
}
