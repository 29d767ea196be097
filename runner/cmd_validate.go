package main

import (
	"context"
	"flag"
	"fmt"

	"rdmasweep/internal/words"
)

// validateOptions are runner validate's: the plan flags alone.
type validateOptions struct{ planOptions }

var validateCommand = &command{
	name: "validate", args: "[flags] [PLAN]",
	help:    "  validate [PLAN] check a plan; exit 0 when valid, 2 with every error",
	example: "runner validate --set block_size=64KiB plans/loopback.yaml",
	flags: func(fs *flag.FlagSet) func(context.Context, globals, []string) error {
		var o validateOptions
		o.addFlags(fs)
		o.addNodesFlag(fs)
		return func(ctx context.Context, g globals, args []string) error { return runValidate(ctx, o, g, args) }
	},
}

// runValidate is `runner validate PLAN`: it loads and expands the plan,
// and says how many points it has; every error is a plan.ErrorList.
func runValidate(ctx context.Context, o validateOptions, g globals, args []string) error {
	path, p, pts, err := loadPlanArg(ctx, g, o.planOptions, args)
	if err != nil {
		return err
	}
	planWarnings(g.ui, p, pts)
	fmt.Fprintf(g.stdout, "%s: valid: %s × %d repetition(s), transport %s\n", planName(path), words.Count(len(pts), "point"), p.Repeat, p.Transport())
	return nil
}
