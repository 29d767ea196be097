// Package sweep runs an exec's jobs, in order, through a point runner,
// appending each run's rows to the CSV as they come, and counts what
// failed. It never prints: the caller watches through Begin and End.
package sweep

import (
	"context"
	"fmt"
	"time"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/files/resume"
	"rdmasweep/runner/hint"
	"rdmasweep/runner/points/peer"
	"rdmasweep/runner/points/point"
	"rdmasweep/runner/points/rounds"
	"rdmasweep/runner/reading/verdict"
)

// Appender takes a run's rows one at a time; *csvfile.File is one.
type Appender interface {
	Append(results.Row) error
}

// Sweep is one exec's run of its jobs.
type Sweep struct {
	Plan   *plan.Plan
	Runner *point.Runner
	CSV    Appender
	// Down holds, by role name, the pool hosts the exec could not reach
	// (hostset.Set.Down): a pool sweep fails their pairs with the reason.
	Down map[string]error
	// Warn, when set, is told of each cold row that is not proven cold.
	Warn func(msg string)
	// Ceilings, when set, measures the disk's ceiling under a cold
	// point's file before the point, and sets it on the cold rows.
	Ceilings *Ceilings
	// Links, when set, measures a link that reports no line rate; unset,
	// rows weigh their link against the line rate alone.
	Links *Links
	Watch
}

// Watch is how the caller follows a sweep.
type Watch struct {
	FailFast bool // stop at the first run whose row is not ok
	// Begin is called before job i runs, and End once its rows are
	// appended, with the run's last row; either may be nil.
	Begin func(i int, j resume.Job)
	End   func(i int, j resume.Job, last results.Row, tm point.Timing)
}

// Outcome is what a sweep ran.
type Outcome struct {
	Rows         []results.Row // every row appended, in order
	Runs, Failed int           // jobs run, and of them those whose last row is not ok
	// Stopped is the failed row FailFast stopped at, or nil.
	Stopped *results.Row
	// SeriesErr is why the time series beside the CSV is incomplete, or
	// nil; the rows are whole all the same.
	SeriesErr error
	// CountersErr is why the counters sidecar is incomplete, or nil;
	// TimelineErr the same for the timeline sidecar.
	CountersErr, TimelineErr error
}

// Run runs todo in order. Each job's rows are judged against the plan's
// expectations and appended before the next job starts. An error (ctx's
// cause when it was cancelled, or a row that could not be appended)
// stops the sweep; the rows appended so far stay in the CSV.
func (s *Sweep) Run(ctx context.Context, todo []resume.Job) (Outcome, error) {
	var out Outcome
	for i, j := range todo {
		if s.Begin != nil {
			s.Begin(i, j)
		}
		rows, tm, err := s.runJob(ctx, j)
		if err != nil {
			return out, err
		}
		out.Rows = append(out.Rows, rows...)
		out.Runs++
		last := rows[len(rows)-1]
		if s.End != nil {
			s.End(i, j, last, tm)
		}
		if last.Status != results.StatusOK {
			out.Failed++
			if s.FailFast {
				out.Stopped = &last
				break
			}
		}
	}
	return out, nil
}

// runJob runs one job and appends its rows: the clients' rows, then the
// aggregate. The last row says whether the run is done, so a run cut short
// between them runs again.
func (s *Sweep) runJob(ctx context.Context, j resume.Job) ([]results.Row, point.Timing, error) {
	rows, tm, err := s.measure(ctx, j)
	if err != nil {
		return nil, tm, err
	}
	return rows, tm, s.appendRows(rows)
}

// measure runs one job and judges its rows against the plan's
// expectations.
func (s *Sweep) measure(ctx context.Context, j resume.Job) ([]results.Row, point.Timing, error) {
	run := s.Runner.Run
	if s.Plan.IsPool() { // pairwise or ring: the point's pairs, round by round
		run = func(ctx context.Context, pt plan.Point, rep int) ([]results.Row, point.Timing, error) {
			return rounds.RunPoint(ctx, s.Runner, pt, rep, s.Down)
		}
	}
	s.Ceilings.Before(ctx, j.Point)
	rows, tm, err := run(ctx, j.Point, j.Rep)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return nil, tm, cause
		}
		return nil, tm, err
	}
	s.Ceilings.Set(rows)            // bound_by weighs the disk against its ceiling,
	s.Links.Set(ctx, j.Point, rows) // and the link against its capacity
	for i := range rows {
		rows[i].SetBoundBy()
		rows[i].SetColdReadFraction()
	}
	verdict.JudgeRows(rows, s.Plan.Expect)
	for _, r := range rows {
		if why := r.NotCold(); why != "" && s.Warn != nil {
			s.Warn(fmt.Sprintf("point %d, repetition %d (%s): %s", j.Point.Index+1, j.Rep, r.Scope, why))
		}
		if why := tooShort(r); why != "" && s.Warn != nil {
			s.Warn(fmt.Sprintf("point %d, repetition %d: %s", j.Point.Index+1, j.Rep, why))
		}
	}
	return rows, tm, nil
}

// tooShort says why an ok peer row's figures are quantized: its run took
// less than peer.MinSteps of its tool's clock step; "" when they are not.
func tooShort(r results.Row) string {
	if r.Status != results.StatusOK || r.Seconds == nil {
		return ""
	}
	d := time.Duration(*r.Seconds * float64(time.Second))
	step, short := peer.TooShort(r.Workload(), d)
	if !short {
		return ""
	}
	return fmt.Sprintf("%s ran for %s, under %d × its %s clock step, so its figures are quantized by more than 1 %%: read more (client.total) or for a duration of %s or more",
		r.Workload(), d.Round(time.Microsecond), peer.MinSteps, step, peer.MinSteps*step)
}

// appendRows appends rows to the CSV.
func (s *Sweep) appendRows(rows []results.Row) error {
	for _, row := range rows {
		if err := s.CSV.Append(row); err != nil {
			return hint.Wrap(fmt.Errorf("append row: %w", err), "the run stopped so it does not measure into nowhere; free space, then exec again: finished points are kept")
		}
	}
	return nil
}

// Tally is how many runs failed, of how many. A pool sweep's rows carry
// their pairs' keys, so there every pair's row counts as a run; otherwise
// a run is a job.
func (o Outcome) Tally(pool bool) (failed, total int) {
	if !pool {
		return o.Failed, o.Runs
	}
	for _, r := range o.Rows {
		if r.Status != results.StatusOK {
			failed++
		}
	}
	return failed, len(o.Rows)
}
