// Package resume decides what an exec still has to run: every (point,
// repetition) of the plan without an ok row in the CSV, so an exec cut
// short runs again from where it stopped and keeps what it finished; and
// which rows the summary then shows for the plan.
package resume

import (
	"fmt"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
)

// Job is one repetition (from 1) of one point.
type Job struct {
	Point plan.Point
	Rep   int
}

// Pending lists the runs to do: every (point, repetition) without an ok
// row that ends its run (the aggregate row, with several clients), or all
// of them with rerun. skipped counts the others. A point's repetitions run
// back to back, except beside its peers: the points that differ only in
// workload (consecutive, since workload varies fastest) take turns,
// repetition by repetition, so node and its peer run in pairs.
func Pending(pts []plan.Point, repeat int, existing []results.Row, rerun bool) (todo []Job, skipped int) {
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
				todo = append(todo, Job{Point: pt, Rep: rep})
			}
		}
		i = j
	}
	return todo, skipped
}

// sameButWorkload reports whether two points differ in workload alone.
func sameButWorkload(a, b plan.Point) bool {
	if a.Values.Str(param.Workload) == b.Values.Str(param.Workload) {
		return false
	}
	for _, p := range results.Params() {
		if p.Name != "workload" && p.Format(a.Values) != p.Format(b.Values) {
			return false
		}
	}
	return true
}

// Points are the distinct points of todo, in order.
func Points(todo []Job) []plan.Point {
	var pts []plan.Point
	seen := map[string]bool{}
	for _, j := range todo {
		if !seen[j.Point.Key] {
			seen[j.Point.Key] = true
			pts = append(pts, j.Point)
		}
	}
	return pts
}

// Shown picks, for each point of the plan, the rows the summary shows:
// this exec's rows (now) for the points it ran, else the CSV's earlier ok
// rows.
func Shown(pts []plan.Point, earlier, now []results.Row) []results.Row {
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
