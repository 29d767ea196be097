package sweep

// The knee search as exec runs it. The CSV is append-only and only the
// end of a walk knows its knee, so an outer point's rows are held until
// its walk ends, then marked (probe, knee on the rows at the knee's
// value) and appended together. An exec interrupted mid-walk loses that
// outer point's probes, and a resumed exec walks it again; the outer
// points whose walks ended are in the CSV whole, and their walks end at
// once without a run. Where a walk ends at a value whose rows an earlier
// exec wrote as probes (the plan's target or bounds changed since), the
// knee's value runs again, so the last knee rows of an outer point in
// the CSV always name its knee.

import (
	"context"
	"fmt"
	"slices"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/files/resume"
	"rdmasweep/runner/reading/search"
)

// Search runs the plan's knee search over outer, the plan's points (the
// rest of the sweep), in order: for each, the walk of runner/reading/search, each
// value it asks for run Repeat times. existing are the CSV's rows, whose
// probes the walks reuse. Errors and FailFast stop it as they stop Run;
// the rows of a walk that FailFast stopped are appended as probes.
func (s *Sweep) Search(ctx context.Context, outer []plan.Point, existing []results.Row) (Outcome, error) {
	var out Outcome
	for _, pt := range outer {
		if err := s.walk(ctx, pt, s.earlier(pt, existing), &out); err != nil || out.Stopped != nil {
			return out, err
		}
	}
	return out, nil
}

// earlier are the rows of existing that probed outer point pt: their key
// is the key of pt's probe at their value.
func (s *Sweep) earlier(pt plan.Point, existing []results.Row) []results.Row {
	sp := s.Plan.Search
	var rows []results.Row
	for _, r := range existing {
		if v := r.ParamInt(sp.Param); v > 0 && sp.Probe(pt, v).Key == r.PointKey {
			rows = append(rows, r)
		}
	}
	return rows
}

// walk runs one outer point's walk to its end, then marks and appends
// its rows.
func (s *Sweep) walk(ctx context.Context, pt plan.Point, earlier []results.Row, out *Outcome) error {
	sp := s.Plan.Search
	w := search.New(search.FromPlan(sp, s.Plan.Repeat))
	var fresh []results.Row
	asked := map[int64]bool{}
	var st search.Step
	for {
		st = w.Next(append(slices.Clone(earlier), fresh...))
		if st.Done {
			break
		}
		if asked[st.Value] { // its runs left no row the walk can count
			return fmt.Errorf("search %s=%d: its runs left no row to judge", sp.Param, st.Value)
		}
		asked[st.Value] = true
		rows, err := s.runValue(ctx, sp.Probe(pt, st.Value), runsAt(earlier, sp.Param, st.Value, pt.Hosts.Several()), out)
		fresh = append(fresh, rows...)
		if err != nil || out.Stopped != nil {
			search.Mark(fresh, sp.Param, search.Step{})
			if err == nil {
				err = s.appendRows(fresh)
				out.Rows = append(out.Rows, fresh...)
			}
			return err
		}
	}
	if st.Found && !hasKnee(fresh, earlier, sp.Param, st.Knee) {
		rows, err := s.runValue(ctx, sp.Probe(pt, st.Knee), 0, out)
		if err != nil {
			return err
		}
		fresh = append(fresh, rows...)
	}
	search.Mark(fresh, sp.Param, st)
	out.Rows = append(out.Rows, fresh...)
	return s.appendRows(fresh)
}

// runValue runs the repetitions of probe after the first done and
// returns their rows, unmarked and not yet appended; it stops at a failed
// run under FailFast.
func (s *Sweep) runValue(ctx context.Context, probe plan.Point, done int, out *Outcome) ([]results.Row, error) {
	var held []results.Row
	for rep := done + 1; rep <= s.Plan.Repeat; rep++ {
		j := resume.Job{Point: probe, Rep: rep}
		if s.Begin != nil {
			s.Begin(out.Runs, j)
		}
		rows, tm, err := s.measure(ctx, j)
		if err != nil {
			return held, err
		}
		held = append(held, rows...)
		last := rows[len(rows)-1]
		if s.End != nil {
			s.End(out.Runs, j, last, tm)
		}
		out.Runs++
		if last.Status != results.StatusOK {
			out.Failed++
			if s.FailFast {
				out.Stopped = &last
				break
			}
		}
	}
	return held, nil
}

// runsAt counts the runs at value v among rows: their aggregate rows with
// several clients, else their rows.
func runsAt(rows []results.Row, param string, v int64, several bool) int {
	n := 0
	for _, r := range rows {
		if r.ParamInt(param) == v && (!several || r.Scope == results.ScopeAggregate) {
			n++
		}
	}
	return n
}

// hasKnee reports whether the knee's value has rows the mark can name:
// this exec's, or an earlier exec's already marked knee.
func hasKnee(fresh, earlier []results.Row, param string, knee int64) bool {
	for _, r := range fresh {
		if r.ParamInt(param) == knee {
			return true
		}
	}
	for _, r := range earlier {
		if r.ParamInt(param) == knee && r.Search == results.SearchKnee {
			return true
		}
	}
	return false
}

// SearchRuns bounds the runs of a knee search over outer points, for the
// progress bar: every value a walk may probe, Repeat times.
func SearchRuns(p *plan.Plan, outer int) int {
	return search.MaxProbes(search.FromPlan(p.Search, p.Repeat)) * p.Repeat * outer
}
