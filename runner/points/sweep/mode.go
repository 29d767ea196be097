package sweep

import (
	"context"
	"fmt"
	"io"
	"slices"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/files/resume"
	"rdmasweep/runner/reading/fleet"
	"rdmasweep/runner/reading/search"
	"rdmasweep/runner/reading/summary"
	"rdmasweep/runner/reading/verdict"
)

// Mode is how an exec runs one kind of plan: its points one after another
// (Plain), a knee search's walks (Search), or a pool's rounds of pairs
// (Pool). exec asks its plan's Mode what to run, how to run it and what
// to report, and never the plan's kind.
type Mode interface {
	// Bound is a line that says how many runs the exec may take before it
	// starts, "" when the todo list says it.
	Bound(pts []plan.Point) string
	// Pending is what the exec must run, given the CSV's rows, and how
	// many runs those rows already hold ok.
	Pending(pts []plan.Point, rows []results.Row, rerun bool) (todo []resume.Job, skipped int)
	// Total is how many runs the progress bar counts.
	Total(pts []plan.Point, todo []resume.Job) int
	// Run runs the exec through e: todo, or the walks over pts, with the
	// CSV's rows where the mode resumes from them (rows nil with rerun).
	Run(ctx context.Context, e *Exec, pts []plan.Point, todo []resume.Job, rows []results.Row, csv Appender, w Watch) (Outcome, error)
	// Report writes, after the run, what the user reads on stdout: the
	// rows the exec appended (now), beside the CSV's earlier ones.
	Report(w io.Writer, pts []plan.Point, earlier, now []results.Row) error
	// Tally is how many of the outcome's runs failed, of how many.
	Tally(o Outcome) (failed, total int)
}

// ModeOf is p's mode.
func ModeOf(p *plan.Plan) Mode {
	switch {
	case p.Search != nil:
		return searchMode{p}
	case p.IsPool():
		return poolMode{plainMode{p}}
	}
	return plainMode{p}
}

// plainMode runs each point Repeat times, in order.
type plainMode struct{ p *plan.Plan }

func (m plainMode) Bound([]plan.Point) string { return "" }

func (m plainMode) Pending(pts []plan.Point, rows []results.Row, rerun bool) ([]resume.Job, int) {
	return resume.Pending(pts, m.p.Repeat, rows, rerun)
}

func (m plainMode) Total(_ []plan.Point, todo []resume.Job) int { return len(todo) }

func (m plainMode) Run(ctx context.Context, e *Exec, _ []plan.Point, todo []resume.Job, _ []results.Row, csv Appender, w Watch) (Outcome, error) {
	return e.Run(ctx, todo, csv, w)
}

// Report is the summary of the plan's points (this exec's rows where it
// ran them, else the CSV's), with the ratios to a peer when the plan
// sweeps workload, and the verdicts.
func (m plainMode) Report(w io.Writer, pts []plan.Point, earlier, now []results.Row) error {
	groups := summary.Build(resume.Shown(pts, earlier, now))
	if err := summary.Write(w, groups); err != nil {
		return err
	}
	if base, ok := summary.PeerBaseline(pts); ok {
		fmt.Fprintln(w)
		if err := summary.WriteRatios(w, groups, base); err != nil {
			return err
		}
	}
	return verdict.WriteSummary(w, now)
}

func (m plainMode) Tally(o Outcome) (int, int) { return o.Tally(false) }

// searchMode walks each outer point to its knee: the walks decide the
// runs, so the outer points are pending once each, for the gates.
type searchMode struct{ p *plan.Plan }

func (m searchMode) Bound(pts []plan.Point) string {
	return search.BoundText(search.FromPlan(m.p.Search, m.p.Repeat), len(pts))
}

func (m searchMode) Pending(pts []plan.Point, _ []results.Row, _ bool) ([]resume.Job, int) {
	return resume.Pending(pts, 1, nil, true)
}

func (m searchMode) Total(pts []plan.Point, _ []resume.Job) int {
	return SearchRuns(m.p, len(pts)) // a bound: the walks decide
}

func (m searchMode) Run(ctx context.Context, e *Exec, pts []plan.Point, _ []resume.Job, rows []results.Row, csv Appender, w Watch) (Outcome, error) {
	return e.RunSearch(ctx, pts, rows, csv, w)
}

// Report is the walks' rows, the knees of the whole CSV, and the verdicts.
func (m searchMode) Report(w io.Writer, _ []plan.Point, earlier, now []results.Row) error {
	if err := summary.Write(w, summary.Build(now)); err != nil {
		return err
	}
	if err := summary.WriteKnees(w, summary.Knees(slices.Concat(earlier, now))); err != nil {
		return err
	}
	return verdict.WriteSummary(w, now)
}

func (m searchMode) Tally(o Outcome) (int, int) { return o.Tally(false) }

// poolMode runs a pool's points as a plain sweep does, round by round
// (the point runner's rounds), but judges its links rather than summing
// its points, and counts its pairs' rows rather than its runs.
type poolMode struct{ plainMode }

func (m poolMode) Report(w io.Writer, _ []plan.Point, _, now []results.Row) error {
	return fleet.WriteText(w, fleet.FromRows(now, fleet.JudgeOptions{}))
}

func (m poolMode) Tally(o Outcome) (int, int) { return o.Tally(true) }
