// Package point runs one point of a plan: it starts node serve on the
// server host, waits for it to be ready, starts node read on the client
// host, collects both roles' events and turns them into a CSV row.
//
// The roles are data (Role): where each runs, its argv, when it may
// start, what makes it ready and what its output is; one loop starts,
// awaits, runs and collects them. A point never outlives its timeouts, and
// its nodes never outlive the point: whatever happens, every role is
// stopped (stdin closed, then SIGTERM, then SIGKILL to the process group)
// before Run returns.
package point

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/role"
)

// Runner runs points of one plan within one exec.
type Runner struct {
	Plan           *plan.Plan
	RunID          string
	Server, Client role.Target
	LogDir         string        // this exec's log directory
	Grace          time.Duration // between the steps of stopping a role; 0 means 2s
	// DeadlineSlack is added to timeouts.point for node's own --deadline,
	// so a node cut off from the runner still exits; 0 means 30s.
	DeadlineSlack time.Duration
	Warn          func(msg string) // node warnings, prefixed with the role
	// Started is called when a role reports its pid; Exited when it is
	// gone. The runner keeps its leftover record with them. Either may be
	// nil.
	Started func(t role.Target, st *results.Started)
	Exited  func(t role.Target, st *results.Started)

	peerState
}

// Run runs one repetition of pt. It returns the row to append, ok or
// failed; the error is non-nil only when ctx was cancelled, and then the
// point has no row.
func (r *Runner) Run(ctx context.Context, pt plan.Point, rep int) (results.Row, Timing, error) {
	start := time.Now()
	row := r.baseRow(pt, rep, start)
	if isPeer(pt) { // the roles are a peer's (peer.go)
		return r.runPeer(ctx, pt, rep, start, row)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		row.Status, row.Error = results.StatusFailed, "runner: make secret: "+err.Error()
		return row, Timing{Wall: time.Since(start)}, nil
	}
	control := results.Control{Secret: hex.EncodeToString(secret)}
	reports, tm, err := r.run(ctx, r.Roles(pt), control, r.logBase(pt, rep))
	if errors.Is(err, ErrInterrupted) {
		return row, tm, err
	}
	srv, cli := reports[0], reports[1]
	if srv.Ready != nil {
		row.SetReady(srv.Ready)
	}
	if err != nil {
		row.Status, row.Error = results.StatusFailed, err.Error()
		return row, tm, nil
	}
	row.Status = results.StatusOK
	row.SetResult(cli.Result)
	if srv.Done != nil {
		row.SetDone(srv.Done)
	}
	tm.Measured = time.Duration(cli.Result.Seconds * float64(time.Second))
	return row, tm, nil
}

// Roles are pt's roles: node serve on the server, and node read on the
// client once the server is ready, reading from its data address and the
// port it reports.
func (r *Runner) Roles(pt plan.Point) []Role {
	return []Role{
		{
			Target: r.Server,
			Argv: func(map[string]*results.Ready) []string {
				return r.argv(pt, r.Server, "serve",
					"--listen", pt.Hosts.Server.DataAddress,
					"--accept-timeout", r.Plan.Timeouts.Accept.String())
			},
			Ready:  OnReadyEvent,
			Output: results.TypeDone,
		},
		{
			Target:   r.Client,
			WaitsFor: []string{r.Server.Role},
			Argv: func(ready map[string]*results.Ready) []string {
				addr := net.JoinHostPort(pt.Hosts.Server.DataAddress, strconv.Itoa(ready[r.Server.Role].Port))
				return r.argv(pt, r.Client, "read", "--server", addr)
			},
			Ready:  OnStart,
			Output: results.TypeResult,
		},
	}
}

// argv is node's command line for sub ("serve" or "read") on t: every
// parameter node's sub takes, from the parameter table, with the role's
// values, then extra, then the lifetime flags; under taskset when the
// role's host has a CPU list.
func (r *Runner) argv(pt plan.Point, t role.Target, sub string, extra ...string) []string {
	v := pt.For(t.Role)
	argv := []string{t.NodePath, sub}
	for _, p := range results.Params() {
		if p.TakenBy(sub) {
			argv = append(argv, p.Argv(pt.Transport(), v)...)
		}
	}
	argv = append(argv, extra...)
	argv = append(argv, "--control-stdin", "--deadline", r.deadline())
	return pinned(r.cpusOf(pt, t), argv)
}

// pinned runs argv under taskset when the host has a CPU list. taskset
// execs node, so node keeps the pid and process group the runner tracks,
// and every thread the Go runtime starts inherits the placement.
func pinned(cpus string, argv []string) []string {
	if cpus == "" {
		return argv
	}
	return append([]string{"taskset", "--cpu-list", cpus}, argv...)
}

// logBase is where a repetition's logs go: LOGDIR/NNN-KEY-rREP.ROLE.log.
func (r *Runner) logBase(pt plan.Point, rep int) string {
	return filepath.Join(r.LogDir, fmt.Sprintf("%03d-%s-r%d", pt.Index+1, pt.Key, rep))
}

func (r *Runner) deadline() string {
	slack := r.DeadlineSlack
	if slack == 0 {
		slack = 30 * time.Second
	}
	return (r.Plan.Timeouts.Point + slack).String()
}

func (r *Runner) baseRow(pt plan.Point, rep int, start time.Time) results.Row {
	row := results.Row{
		RunID:      r.RunID,
		Plan:       r.Plan.Name,
		PointKey:   pt.Key,
		Repetition: rep,
		StartedAt:  start.UTC().Format(time.RFC3339),
		ServerHost: r.Server.Host.Name(),
		ClientHost: r.Client.Host.Name(),
	}
	row.SetParams(pt.Transport(), pt.Values)
	return row
}

func (r *Runner) markStarted(t role.Target, st *results.Started) {
	if r.Started != nil {
		r.Started(t, st)
	}
}

func (r *Runner) markExited(t role.Target, st *results.Started) {
	if r.Exited != nil {
		r.Exited(t, st)
	}
}

func (r *Runner) warn(t role.Target, msg string) {
	if r.Warn != nil {
		r.Warn(t.Label + ": " + msg)
	}
}
