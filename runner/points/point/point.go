// Package point runs one point of a plan: it starts node serve on the
// server host, waits for it to be ready, starts node read on each client
// host, collects the roles' events and turns them into CSV rows: one row,
// or with several clients one per client and then the aggregate.
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
	"strings"
	"time"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/hosts/role"
)

// Runner runs points of one plan within one exec.
type Runner struct {
	Plan  *plan.Plan
	RunID string
	// Targets are where the plan's roles run, one per role of the point's
	// Hosts.Roles (by name).
	Targets []role.Target
	LogDir  string        // this exec's log directory
	Grace   time.Duration // between the steps of stopping a role; 0 means 2s
	// DeadlineSlack is added to timeouts.point for node's own --deadline,
	// so a node cut off from the runner still exits; 0 means 30s.
	DeadlineSlack time.Duration
	Warn          func(msg string) // node warnings, prefixed with the role
	// Started is called when a role reports its pid; Exited when it is
	// gone. The runner keeps its leftover record with them. Either may be
	// nil.
	Started func(t role.Target, st *results.Started)
	Exited  func(t role.Target, st *results.Started)
	// Series receives each interval a client reports, for the run's
	// time-series file. It may be nil.
	Series func(pt plan.Point, rep int, t role.Target, iv *results.Interval)
	// Counters receives each role's counters (from the client's result
	// and the server's done event), for the run's counters sidecar. It
	// may be nil.
	Counters func(pt plan.Point, rep int, t role.Target, c *results.Counters)
	// Timeline receives a pipelined server's preparation, whose Timeline
	// holds each memory region's stages; nil drops them.
	Timeline func(pt plan.Point, rep int, t role.Target, p *results.Pipeline)
	// Path receives the RDMA path a role reports it used, from the
	// server's ready event and the client's result, for the manifest. It
	// may be nil.
	Path func(t role.Target, p *results.RDMAPath)
	// Choices are the device, port and GID node chose on each role's host
	// for the plan's rdma points (preflight.CheckDevices), by role name:
	// a peer is run on them where the plan leaves them to the tool
	// (peer.Params.Chosen). Nil when none were asked.
	Choices map[string]results.DeviceChoice
}

func (r *Runner) target(name string) role.Target {
	for _, t := range r.Targets {
		if t.Role == name {
			return t
		}
	}
	panic("point: no target for role " + name)
}

// Run runs one repetition of pt. It returns the rows to append, ok or
// failed: one, or with several clients (Hosts.Several) one per client and
// the aggregate last. The error is non-nil only when ctx was cancelled,
// and then the point has no row.
func (r *Runner) Run(ctx context.Context, pt plan.Point, rep int) ([]results.Row, Timing, error) {
	start := time.Now()
	if isPeer(pt) { // the roles are a peer's (peer.go)
		row, tm, err := r.runPeer(ctx, pt, rep, start)
		if err != nil {
			return nil, tm, err
		}
		return []results.Row{row}, tm, nil
	}
	roles := r.Roles(pt)
	var (
		reports []*Report
		tm      Timing
		err     error
	)
	secret := make([]byte, 32)
	if _, serr := rand.Read(secret); serr != nil {
		err = fmt.Errorf("runner: make secret: %w", serr)
	} else {
		control := results.Control{Secret: hex.EncodeToString(secret)}
		reports, tm, err = r.run(ctx, roles, control, r.logBase(pt, rep), func(rl Role, iv *results.Interval) {
			if r.Series != nil {
				r.Series(pt, rep, rl.Target, iv)
			}
		})
	}
	if errors.Is(err, ErrInterrupted) {
		return nil, tm, err
	}
	rows := r.rows(pt, rep, start, roles, reports, err)
	r.sendCounters(pt, rep, reports)
	for _, rep := range reports {
		if rep.Result != nil {
			tm.Measured = max(tm.Measured, time.Duration(rep.Result.Seconds*float64(time.Second)))
		}
	}
	return rows, tm, nil
}

// sendCounters hands each role's counters to the Counters callback, and
// a pipelined server's timeline to the Timeline callback.
func (r *Runner) sendCounters(pt plan.Point, rep int, reports []*Report) {
	for _, rp := range reports {
		if r.Timeline != nil && rp != nil && rp.Done != nil && rp.Done.Pipeline != nil && len(rp.Done.Pipeline.Timeline) > 0 {
			r.Timeline(pt, rep, rp.Target, rp.Done.Pipeline)
		}
	}
	if r.Counters == nil {
		return
	}
	for _, rp := range reports {
		switch {
		case rp == nil:
		case rp.Result != nil && rp.Result.Counters != nil:
			r.Counters(pt, rep, rp.Target, rp.Result.Counters)
		case rp.Done != nil && rp.Done.Counters != nil:
			r.Counters(pt, rep, rp.Target, rp.Done.Counters)
		}
	}
}

// rows makes the point's rows from its roles' reports: each client's,
// with its server's preparation figures, and with several clients the
// aggregate of them all. A failed point's rows all carry its error, which
// names the role that failed.
func (r *Runner) rows(pt plan.Point, rep int, start time.Time, roles []Role, reports []*Report, err error) []results.Row {
	var clients []results.Row
	var cliReports []*Report
	serverOf := map[string]*Report{}
	for i, rl := range roles {
		if rl.Output == results.TypeDone && reports != nil {
			serverOf[rl.Target.Role] = reports[i]
		}
	}
	for i, rl := range roles {
		if rl.Output != results.TypeResult {
			continue
		}
		row := r.baseRow(pt, rep, start, r.target(rl.WaitsFor[0]), rl.Target)
		row.Scope = results.ScopeClient
		var cr *Report
		if reports != nil {
			cr = reports[i]
			if srv := serverOf[rl.WaitsFor[0]]; srv.Ready != nil {
				row.SetReady(srv.Ready)
			}
		}
		switch {
		case err != nil:
			row.Status, row.Error, row.ErrorCode = results.StatusFailed, err.Error(), ErrorCode(err)
		default:
			row.Status = results.StatusOK
			row.SetResult(cr.Result)
			var srvCounters *results.Counters
			if srv := serverOf[rl.WaitsFor[0]]; srv.Done != nil {
				row.SetDone(srv.Done) // its server's CPU, over all its clients
				srvCounters = srv.Done.Counters
			}
			row.SetCounters(srvCounters, cr.Result.Counters)
			row.SetEndToEnd(cr.Result)
		}
		clients = append(clients, row)
		cliReports = append(cliReports, cr)
	}
	if !pt.Hosts.Several() {
		return clients
	}
	agg := r.baseRow(pt, rep, start, role.Target{}, role.Target{})
	agg.Scope = results.ScopeAggregate
	var srvs, clis []string
	for _, rl := range roles {
		if rl.Output == results.TypeDone {
			srvs = append(srvs, rl.Target.Host.Name())
		} else {
			clis = append(clis, rl.Target.Host.Name())
		}
	}
	agg.ServerHost, agg.ClientHost = strings.Join(srvs, " "), strings.Join(clis, " ")
	if len(serverOf) == 1 {
		for _, srv := range serverOf {
			if srv.Ready != nil {
				agg.SetReady(srv.Ready)
			}
		}
	}
	if err == nil {
		err = aggregate(&agg, cliReports)
	}
	if err == nil && len(serverOf) == 1 {
		for _, srv := range serverOf {
			if srv.Done != nil {
				agg.SetCounters(srv.Done.Counters, nil) // the server's disk, faults and connections
			}
		}
	}
	if err != nil {
		agg.Status, agg.Error = results.StatusFailed, err.Error()
	} else {
		agg.Status = results.StatusOK
	}
	return append(clients, agg)
}

// Roles are pt's roles: node serve on each server taking part, and node
// read on each client taking part once its server is ready, reading from
// its data address and the port it reports. With several clients each
// client waits at a start barrier until all are connected and registered,
// then all read at once. Fan-in: the first k clients read the one server;
// pairs: client i reads server i.
func (r *Runner) Roles(pt plan.Point) []Role {
	names := pt.Hosts.Roles()
	servers, clients := names[:len(pt.Hosts.Servers)], names[len(pt.Hosts.Servers):]
	k, several := pt.Clients(), pt.Hosts.Several()
	pairs := pt.Values.Str(param.Topology) == "pairs"
	var out []Role
	serverFor := func(i int) (plan.Role, int) { // client i's server, and how many clients it serves
		if pairs {
			return servers[i], 1
		}
		return servers[0], k
	}
	for i := range k {
		srv, n := serverFor(i)
		if i > 0 && !pairs {
			break
		}
		t := r.target(srv.Name)
		extra := []string{"--listen", srv.Host.DataAddress, "--accept-timeout", r.Plan.Timeouts.Accept.String()}
		if several {
			extra = append(extra, "--clients", strconv.Itoa(n))
		}
		out = append(out, Role{
			Target: t,
			Argv:   func(map[string]*results.Ready) []string { return r.argv(pt, t, "serve", extra...) },
			Ready:  OnReadyEvent,
			Output: results.TypeDone,
		})
	}
	for i := range k {
		srv, _ := serverFor(i)
		t := r.target(clients[i].Name)
		extra := []string{"--interval", interval(pt).String()}
		ready := OnStart
		if several {
			extra = append(extra, "--barrier")
			ready = OnReadyEvent
		}
		out = append(out, Role{
			Target:   t,
			WaitsFor: []string{srv.Name},
			Argv: func(rd map[string]*results.Ready) []string {
				addr := net.JoinHostPort(srv.Host.DataAddress, strconv.Itoa(rd[srv.Name].Port))
				return r.argv(pt, t, "read", append(extra, "--server", addr)...)
			},
			Ready:   ready,
			Barrier: several,
			Output:  results.TypeResult,
		})
	}
	return out
}

// interval is how finely clients report what they read: every second,
// or every 100 ms when the point reads for less than 10 s (or a total).
func interval(pt plan.Point) time.Duration {
	if pt.Values.Duration(param.Duration) >= 10*time.Second {
		return time.Second
	}
	return 100 * time.Millisecond
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
	cpus := ""
	for _, rl := range pt.Hosts.Roles() {
		if rl.Name == t.Role && !t.PinsCPUs {
			cpus = rl.Host.CPUs
		}
	}
	return pinned(cpus, argv)
}

// pinned runs argv under taskset when the host has a CPU list. taskset
// execs node, so node keeps the pid and process group the runner tracks,
// and every thread the Go runtime starts inherits the placement. -c, not
// --cpu-list: busybox's taskset takes only the short form.
func pinned(cpus string, argv []string) []string {
	if cpus == "" {
		return argv
	}
	return append([]string{"taskset", "-c", cpus}, argv...)
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

// baseRow is a row of pt with its parameters, for the given server and
// client (zero targets: the caller names the hosts).
func (r *Runner) baseRow(pt plan.Point, rep int, start time.Time, srv, cli role.Target) results.Row {
	row := results.Row{
		RunID:      r.RunID,
		Plan:       r.Plan.Name,
		PointKey:   pt.Key,
		Repetition: rep,
		StartedAt:  start.UTC().Format(time.RFC3339),
	}
	if srv.Host != nil {
		row.ServerHost, row.ClientHost = srv.Host.Name(), cli.Host.Name()
	}
	row.Params = map[string]string{}
	for _, p := range results.Params() {
		if results.ParamColumn(p.Name) != "" {
			row.Params[p.Name] = pt.Cell(p)
		}
	}
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
