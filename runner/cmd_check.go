package main

import (
	"context"
	"flag"
	"fmt"

	"rdmasweep/internal/words"
	"rdmasweep/runner/hosts/hostset"
	"rdmasweep/runner/points/check"
)

// checkOptions are runner check's: the plan flags alone.
type checkOptions struct {
	planOptions
	hostFlags
}

var checkCommand = &command{
	name: "check", args: "[flags] [PLAN]",
	help:    "  check [PLAN]    connect and deploy, check both hosts and the data path;\n                  exit 1 with a hint per problem",
	example: "runner check plans/bench-rdma.yaml",
	flags: func(fs *flag.FlagSet) func(context.Context, globals, []string) error {
		var o checkOptions
		o.addFlags(fs)
		o.addHostFlags(fs)
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
	return reportCheck(g, table)
}

// reportCheck prints the table on stdout, and its warnings and problems on
// stderr, and fails when there is any problem.
func reportCheck(g globals, table *check.Table) error {
	if err := table.Write(g.stdout); err != nil {
		return err
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
