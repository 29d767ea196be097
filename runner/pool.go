package main

import (
	"context"
	"fmt"
	"time"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/fleet/rounds"
	"rdmasweep/runner/point"
	"rdmasweep/runner/role"
)

// runPool runs one repetition of a pool point (topology pairwise or ring)
// round by round, with the roles connect made, one per pool host
// (pool1…): its rows, one per pair, in the order they ran.
func runPool(ctx context.Context, r *point.Runner, targets []role.Target, pt plan.Point, rep int) ([]results.Row, point.Timing, error) {
	start := time.Now()
	byName := map[string]role.Target{}
	for _, t := range targets {
		byName[t.Role] = t
	}
	pr := &rounds.Runner{Points: r}
	for i := range pt.Hosts.Pool {
		pr.Hosts = append(pr.Hosts, byName[fmt.Sprintf("pool%d", i+1)])
	}
	defer func() { r.Targets = targets }() // the rounds set their own
	var rows []results.Row
	err := pr.Run(ctx, pt, rep, func(row results.Row) error { rows = append(rows, row); return nil })
	var tm point.Timing
	tm.Wall = time.Since(start)
	for _, row := range rows {
		if row.Seconds != nil {
			tm.Measured += time.Duration(*row.Seconds * float64(time.Second))
		}
	}
	return rows, tm, err
}

// someFailedOf is exec's outcome for a pool's rows: every pair's row
// counts, not only a run's last.
func someFailedOf(rows []results.Row) error {
	failed := 0
	for _, r := range rows {
		if r.Status != results.StatusOK {
			failed++
		}
	}
	if failed == 0 {
		return nil
	}
	return &someFailed{failed: failed, total: len(rows)}
}
