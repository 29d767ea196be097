package point

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/role"
)

// Role is one node process of a point, as data: where it runs, its
// command line, when it may start, when it counts as ready, and which of
// its events is its output. A point's roles start, await, run and are
// collected by one loop, however many there are.
type Role struct {
	Target role.Target
	// WaitsFor names the roles that must be ready before this one starts.
	WaitsFor []string
	// Argv is node's command line, built when the role starts from the
	// ready events of the roles it waits for (by role name).
	Argv func(ready map[string]*results.Ready) []string
	// Ready is what makes the role ready.
	Ready Readiness
	// Output is the event the role must print before a clean exit, and
	// what it gives the row: results.TypeResult (node read's measurement)
	// or results.TypeDone (node serve's statistics).
	Output string
}

// Readiness says when a role counts as ready.
type Readiness int

const (
	// OnReadyEvent: when node prints its ready event (node serve, once
	// its region is registered and it listens), within timeouts.ready.
	OnReadyEvent Readiness = iota
	// OnStart: as soon as node is started (node read starts reading at
	// once).
	OnStart
)

// Report is what one role said.
type Report struct {
	Target  role.Target
	Started *results.Started
	Ready   *results.Ready
	Result  *results.Result
	Done    *results.Done
}

// Timing is where a point's wall time went.
type Timing struct {
	ToReady     time.Duration // first role started → the roles others wait for ready
	ToClient    time.Duration // → the roles waiting for them started
	Measured    time.Duration // node read's own seconds
	ResultToRow time.Duration // the result → every role gone (the row is written after)
	Wall        time.Duration
}

// ErrInterrupted is returned when ctx ends during a point; no row is made.
var ErrInterrupted = errors.New("interrupted")

// blameWindow is how long a failing role's peers are given to show that
// one of them died first.
const blameWindow = time.Second

// run is one point's roles from start to collection. It returns every
// role's report, complete or not, and a *role.Error naming the role that
// failed, or ErrInterrupted. Whatever happens, every role is stopped
// before it returns.
func (r *Runner) run(ctx context.Context, roles []Role, control results.Control, logBase string) ([]*Report, Timing, error) {
	start := time.Now()
	var tm Timing
	updates := make(chan update, 16*len(roles))
	abandon := make(chan struct{})
	procs := make([]*proc, len(roles))
	reports := make([]*Report, len(roles))
	for i, rl := range roles {
		reports[i] = &Report{Target: rl.Target}
	}
	defer func() {
		close(abandon)
		for _, pr := range procs {
			if pr != nil {
				r.stop(pr)
			}
		}
	}()

	// The point's limits are the runner's, not a role's.
	runner := role.Target{Role: "runner", Label: "runner"}
	readyBy := time.NewTimer(r.Plan.Timeouts.Ready)
	defer readyBy.Stop()
	pointBy := time.NewTimer(r.Plan.Timeouts.Point)
	defer pointBy.Stop()

	ready := map[string]*results.Ready{} // by role name; nil event for OnStart roles
	exited := make([]bool, len(roles))
	var lastOutput time.Time
	isReady := func(i int) bool { _, ok := ready[roles[i].Target.Role]; return ok }

	// start starts every role whose wait is over: start → await ready.
	start1 := func() error {
		for i, rl := range roles {
			if procs[i] != nil || slices.ContainsFunc(rl.WaitsFor, func(n string) bool { _, ok := ready[n]; return !ok }) {
				continue
			}
			if len(rl.WaitsFor) > 0 && tm.ToReady == 0 {
				tm.ToReady = time.Since(start)
			}
			t := rl.Target
			pr, err := startProc(ctx, t, rl.Argv(ready), control, fmt.Sprintf("%s.%s.log", logBase, t.Role), i, updates, abandon,
				func(st *results.Started) { r.markStarted(t, st) })
			if err != nil {
				return t.Wrap(role.Start, err)
			}
			procs[i] = pr
			if len(rl.WaitsFor) > 0 {
				tm.ToClient = time.Since(start) - tm.ToReady
			}
			if rl.Ready == OnStart {
				ready[t.Role] = nil
			}
		}
		return nil
	}
	fail := func(i int, phase role.Phase, msg string) ([]*Report, Timing, error) {
		tm.Wall = time.Since(start)
		return reports, tm, roles[i].Target.Wrap(phase, errors.New(msg))
	}
	// phaseOf is where role i stands: still preparing, or at work.
	phaseOf := func(i int) (role.Phase, string) {
		if roles[i].Ready == OnReadyEvent && !isReady(i) {
			return role.Ready, "before ready"
		}
		if roles[i].Output == results.TypeResult {
			return role.Run, "without a result"
		}
		return role.Run, "before done"
	}

	for {
		if err := start1(); err != nil {
			tm.Wall = time.Since(start)
			return reports, tm, err
		}
		if !slices.Contains(exited, false) {
			break
		}
		var u update
		select {
		case u = <-updates:
		case <-readyBy.C:
			for i, rl := range roles {
				if rl.Ready == OnReadyEvent && !isReady(i) {
					return fail(i, role.Ready, fmt.Sprintf("not ready within timeouts.ready (%s)", r.Plan.Timeouts.Ready))
				}
			}
			continue
		case <-pointBy.C:
			tm.Wall = time.Since(start)
			return reports, tm, runner.Errorf(role.Run, "point timed out (timeouts.point %s)", r.Plan.Timeouts.Point)
		case <-ctx.Done():
			return reports, tm, ErrInterrupted
		}
		i, rep := u.role, reports[u.role]
		if !u.exited {
			switch ev := u.ev.(type) {
			case *results.Started:
				rep.Started = ev
			case *results.Warning:
				r.warn(roles[i].Target, ev.Message)
			case *results.Error:
				phase, _ := phaseOf(i)
				return r.blame(roles, procs, exited, i, phase, ev.Message, false, fail)
			case *results.Ready:
				rep.Ready = ev
				if roles[i].Ready == OnReadyEvent {
					ready[roles[i].Target.Role] = ev
				}
			case *results.Result:
				rep.Result, lastOutput = ev, time.Now()
			case *results.Done:
				rep.Done = ev
			}
			continue
		}
		exited[i] = true
		gotOutput := (roles[i].Output == results.TypeResult && rep.Result != nil) || (roles[i].Output == results.TypeDone && rep.Done != nil)
		if u.err != nil || !gotOutput {
			phase, when := phaseOf(i)
			msg := exitDescription(u.err) + " " + when
			if last := procs[i].tail.lastLine(); last != "" {
				msg += ": " + last
			}
			return r.blame(roles, procs, exited, i, phase, msg, diedOfCause(u.err), fail)
		}
	}
	if !lastOutput.IsZero() {
		tm.ResultToRow = time.Since(lastOutput)
	}
	tm.Wall = time.Since(start)
	return reports, tm, nil
}

// blame decides whom role i's failure belongs to. When a node is killed or
// cut off, its peers usually fail first, on the broken data connection
// ("read reply: EOF"), but the death is what the user must see: unless i
// itself died of an outside cause, each peer still running is given
// blameWindow to show that it died of one, and then it is blamed instead.
func (r *Runner) blame(roles []Role, procs []*proc, exited []bool, i int, phase role.Phase, msg string, external bool,
	fail func(int, role.Phase, string) ([]*Report, Timing, error)) ([]*Report, Timing, error) {
	if !external {
		deadline := time.Now().Add(blameWindow)
		for j, pr := range procs {
			if j == i || pr == nil || exited[j] {
				continue
			}
			select {
			case <-pr.gone:
			case <-time.After(time.Until(deadline)):
				continue
			}
			if diedOfCause(pr.waitErr) {
				when := "before done"
				if roles[j].Output == results.TypeResult {
					when = "without a result"
				}
				m := exitDescription(pr.waitErr) + " " + when
				if last := pr.tail.lastLine(); last != "" {
					m += ": " + last
				}
				return fail(j, role.Run, m)
			}
		}
	}
	return fail(i, phase, msg)
}

func (r *Runner) stop(pr *proc) {
	grace := r.Grace
	if grace == 0 {
		grace = 2 * time.Second
	}
	pr.stop(grace)
	if pr.reaped() && pr.started != nil {
		r.markExited(pr.target, pr.started)
	}
}
