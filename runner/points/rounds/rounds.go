// Package rounds runs a pool point (topology pairwise or ring) round by
// round, through the point runner: the pairs of a round are one point of
// topology pairs over their hosts, so they start at one barrier, and each
// host plays one role in it.
//
// A round whose point fails because of one role is run again without that
// role's pair, whose row keeps the error, so the round's other pairs are
// measured; a host lost that way (a connection failure, by the judgment's
// own words) is down for the rounds after, and its pairs get failed rows
// without running. Each pair's row carries its round and its pair's key
// (plan.Point.Pair); the round's aggregate row is not written.
package rounds

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/hosts/role"
	"rdmasweep/runner/points/point"
	"rdmasweep/runner/reading/fleet"
)

// Runner runs the rounds of pool points.
type Runner struct {
	// Points runs each round; its Targets are replaced for every round.
	// Runner calls it from one goroutine.
	Points *point.Runner
	// Hosts are the pool's hosts as the exec reached them: Hosts[i] is
	// hosts.pool[i], with its Host and NodePath (its Role and Label are
	// set per round). Host is nil for a host that could not be reached.
	Hosts []role.Target
	// Down says, for a host whose Host is nil, why: its pairs' rows carry
	// it. Rounds adds the hosts it loses.
	Down map[int]error
}

// Schedule is pool point pt's rounds of pairs: its topology over its
// hosts, at most pairwise_parallel and max_parallel pairs a round.
func Schedule(pt plan.Point) ([]fleet.Round, error) {
	return fleet.Schedule(len(pt.Hosts.Pool), fleet.Options{
		Topology:         fleet.Topology(pt.Values.Str(param.Topology)),
		PairwiseParallel: int(max(0, pt.Values.Int(param.PairwiseParallel))), // auto is -1: all
		MaxParallel:      int(max(0, pt.Values.Int(param.MaxParallel))),
	})
}

// Run runs repetition rep of pool point pt, every round of its schedule,
// and passes each pair's row to emit as soon as its round is done. The
// error is the schedule's, emit's, or ctx's when interrupted.
func (r *Runner) Run(ctx context.Context, pt plan.Point, rep int, emit func(results.Row) error) error {
	sched, err := Schedule(pt)
	if err != nil {
		return err
	}
	if r.Down == nil {
		r.Down = map[int]error{}
	}
	for i, round := range sched {
		if err := r.round(ctx, pt, rep, i+1, round, emit); err != nil {
			return err
		}
	}
	return nil
}

// round runs one round: the pairs whose hosts are up at once, then again
// without a pair whose role failed the point, until every pair has a row.
func (r *Runner) round(ctx context.Context, pt plan.Point, rep, n int, round fleet.Round, emit func(results.Row) error) error {
	var live []fleet.Pair
	for _, p := range round {
		if down, err := r.downRow(pt, rep, n, p, emit); err != nil {
			return err
		} else if !down {
			live = append(live, p)
		}
	}
	for len(live) > 0 {
		rows, culprit, err := r.run(ctx, pt, rep, live)
		if err != nil {
			return err
		}
		if culprit >= 0 {
			if host, lost := r.lost(pt, live[culprit], rows[culprit]); lost {
				r.Down[host] = errors.New(cause(rows[culprit].Error))
			}
		}
		if culprit < 0 || len(live) == 1 {
			for i, row := range rows {
				if err := emit(r.pairRow(pt, n, live[i], row)); err != nil {
					return err
				}
			}
			return nil
		}
		// One role failed the round: its pair's row says why, the others
		// run again without it.
		row := rows[culprit]
		if err := emit(r.pairRow(pt, n, live[culprit], row)); err != nil {
			return err
		}
		live = append(live[:culprit:culprit], live[culprit+1:]...)
	}
	return nil
}

// downRow emits the failed row of a pair with a host that is down, and
// reports whether it did.
func (r *Runner) downRow(pt plan.Point, rep, n int, p fleet.Pair, emit func(results.Row) error) (bool, error) {
	for _, side := range []struct {
		word string
		host int
	}{{"server", p.Server}, {"client", p.Client}} {
		why, down := r.Down[side.host]
		if !down {
			continue
		}
		q := pt.Pair(p.Server, p.Client)
		row := results.Row{
			RunID: r.Points.RunID, Plan: r.Points.Plan.Name, PointKey: q.Key, Repetition: rep, StartedAt: time.Now().UTC().Format(time.RFC3339),
			Status: results.StatusFailed, Error: fmt.Sprintf("%s (%s): %v", side.word, r.name(pt, side.host), why),
			ServerHost: r.name(pt, p.Server), ClientHost: r.name(pt, p.Client), Scope: results.ScopeClient,
			Params: map[string]string{},
		}
		for _, prm := range results.Params() {
			if results.ParamColumn(prm.Name) != "" {
				row.Params[prm.Name] = q.Cell(prm)
			}
		}
		return true, emit(r.pairRow(pt, n, p, row))
	}
	return false, nil
}

// run runs the pairs as one point and returns their client rows, in the
// pairs' order, and the index of the pair whose role failed the point, or
// -1 when it succeeded or no one role is to blame.
func (r *Runner) run(ctx context.Context, pt plan.Point, rep int, pairs []fleet.Pair) ([]results.Row, int, error) {
	idx := make([][2]int, len(pairs))
	for i, p := range pairs {
		idx[i] = [2]int{p.Server, p.Client}
	}
	q := pt.Round(idx)
	roles := q.Hosts.Roles()
	var labels []string
	r.Points.Targets = nil
	for i, rl := range roles {
		host, word := pairs[i%len(pairs)].Client, "client"
		if i < len(pairs) {
			host, word = pairs[i].Server, "server"
		}
		t := r.Hosts[host]
		t.Role, t.Label = rl.Name, fmt.Sprintf("%s (%s)", word, r.name(pt, host))
		r.Points.Targets = append(r.Points.Targets, t)
		labels = append(labels, t.Label)
	}
	// The time series' lines take their pair's key, as the rows do, so
	// each pair's intervals are found by its row's key.
	series := r.Points.Series
	defer func() { r.Points.Series = series }()
	if series != nil {
		keys := map[string]plan.Point{}
		for i, p := range pairs {
			keys[roles[len(pairs)+i].Name] = pt.Pair(p.Server, p.Client)
		}
		r.Points.Series = func(_ plan.Point, rep int, t role.Target, iv *results.Interval) {
			series(keys[t.Role], rep, t, iv)
		}
	}
	rows, _, err := r.Points.Run(ctx, q, rep)
	if err != nil {
		return nil, -1, err
	}
	var clients []results.Row
	for _, row := range rows {
		if row.Scope != results.ScopeAggregate {
			clients = append(clients, row)
		}
	}
	if len(clients) != len(pairs) || clients[0].Status == results.StatusOK {
		return clients, -1, nil
	}
	for i, l := range labels {
		if strings.HasPrefix(clients[0].Error, l+":") {
			return clients, i % len(pairs), nil
		}
	}
	return clients, -1, nil
}

// lost reports whether a failed row says its pair's failing host was lost
// (the judgment's connection failure), and which host that is.
func (r *Runner) lost(pt plan.Point, p fleet.Pair, row results.Row) (int, bool) {
	srv := r.name(pt, p.Server)
	h, ok := fleet.ConnectionFailure(fleet.Sample{Server: srv, Client: r.name(pt, p.Client), Error: row.Error})
	switch {
	case !ok:
		return 0, false
	case h == srv:
		return p.Server, true
	}
	return p.Client, true
}

// pairRow gives a row its pair's key, its round, one client, and its
// hosts as the plan names them.
func (r *Runner) pairRow(pt plan.Point, n int, p fleet.Pair, row results.Row) results.Row {
	round := int64(n)
	row.PointKey, row.Round = pt.Pair(p.Server, p.Client).Key, &round
	row.ServerHost, row.ClientHost = r.name(pt, p.Server), r.name(pt, p.Client)
	return row
}

// name is how rows and errors name pool host i: as hosts.pool (or the
// allocation) names it, its address; with the user and port too when
// another host of the pool has the same address.
func (r *Runner) name(pt plan.Point, i int) string {
	h := pt.Hosts.Pool[i]
	for j, o := range pt.Hosts.Pool {
		if j != i && o.Address == h.Address {
			name := h.Address
			if h.User != "" {
				name = h.User + "@" + name
			}
			if h.Port != 0 {
				name += ":" + strconv.Itoa(h.Port)
			}
			return name
		}
	}
	return h.Address
}

// cause is a role error's text without its "ROLE (HOST): " label.
func cause(msg string) string {
	if _, rest, ok := strings.Cut(msg, "): "); ok {
		return rest
	}
	return msg
}

// RunPoint runs one repetition of a pool point (topology pairwise or ring)
// round by round with r, whose Targets are the roles the plan names, one
// per pool host (pool1…): its rows, one per pair, in the order they ran,
// and the point's timing, measured as the sum of its pairs' seconds. down
// holds, by role name, why a host the exec could not reach is down (its
// Target's Host is nil): its pairs fail with that reason.
func RunPoint(ctx context.Context, r *point.Runner, pt plan.Point, rep int, down map[string]error) ([]results.Row, point.Timing, error) {
	start := time.Now()
	targets := r.Targets
	defer func() { r.Targets = targets }() // the rounds set their own
	byName := map[string]role.Target{}
	for _, t := range targets {
		byName[t.Role] = t
	}
	pr := &Runner{Points: r, Down: map[int]error{}}
	for i := range pt.Hosts.Pool {
		name := fmt.Sprintf("pool%d", i+1)
		pr.Hosts = append(pr.Hosts, byName[name])
		if why, ok := down[name]; ok {
			var re *role.Error
			if errors.As(why, &re) {
				why = re.Err // the rows name the host themselves
			}
			pr.Down[i] = why
		}
	}
	var rows []results.Row
	err := pr.Run(ctx, pt, rep, func(row results.Row) error { rows = append(rows, row); return nil })
	tm := point.Timing{Wall: time.Since(start)}
	for _, row := range rows {
		if row.Seconds != nil {
			tm.Measured += time.Duration(*row.Seconds * float64(time.Second))
		}
	}
	return rows, tm, err
}
