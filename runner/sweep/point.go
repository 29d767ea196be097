// Package sweep runs the points of a plan: for each one it starts node serve
// on the server host, waits for it to be ready, starts node read on the
// client host, collects both roles' events and turns them into a CSV row.
//
// A point never outlives its timeouts, and its nodes never outlive the
// point: whatever happens, both roles are stopped (stdin closed, then
// SIGTERM, then SIGKILL to the process group) before Run returns.
package sweep

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
	"rdmasweep/runner/remote"
)

// Runner runs points of one plan within one exec.
type Runner struct {
	Plan           *plan.Plan
	RunID          string
	Server, Client Target
	LogDir         string        // this exec's log directory
	Grace          time.Duration // between the steps of stopping a role; 0 means 2s
	// DeadlineSlack is added to timeouts.point for node's own --deadline,
	// so a node cut off from the runner still exits; 0 means 30s.
	DeadlineSlack time.Duration
	Warn          func(msg string) // node warnings, prefixed with the role
	// Started is called when a role reports its pid; Exited when it is
	// gone. The runner keeps its state file with them. Either may be nil.
	Started func(t Target, st *results.Started)
	Exited  func(t Target, st *results.Started)
}

// Timing is where a point's wall time went.
type Timing struct {
	ToReady     time.Duration // server started → ready
	ToClient    time.Duration // ready → client started
	Measured    time.Duration // node read's own seconds
	ResultToRow time.Duration // result → both roles gone (the row is written after)
	Wall        time.Duration
}

// ErrInterrupted is returned when ctx ends during a point; no row is made.
var ErrInterrupted = errors.New("interrupted")

// Run runs one repetition of pt. It returns the row to append, ok or
// failed; the error is non-nil only when ctx was cancelled, and then the
// point has no row.
func (r *Runner) Run(ctx context.Context, pt plan.Point, rep int) (results.Row, Timing, error) {
	start := time.Now()
	row := r.baseRow(pt, rep, start)
	var tm Timing
	fail := func(label, msg string) (results.Row, Timing, error) {
		row.Status = results.StatusFailed
		row.Error = label + ": " + msg
		tm.Wall = time.Since(start)
		return row, tm, nil
	}

	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return fail("runner", "make secret: "+err.Error())
	}
	control := results.Control{Secret: hex.EncodeToString(secret)}
	logBase := filepath.Join(r.LogDir, fmt.Sprintf("%03d-%s-r%d", pt.Index+1, pt.Key, rep))

	srv, err := startRole(ctx, r.Server, r.serverArgv(pt), control, logBase+".server.log")
	if err != nil {
		return fail(r.Server.Label, err.Error())
	}
	defer srv.close()
	defer r.stop(srv)

	readyBy := time.NewTimer(r.Plan.Timeouts.Ready)
	defer readyBy.Stop()
	pointBy := time.NewTimer(r.Plan.Timeouts.Point)
	defer pointBy.Stop()

	// Phase 1: the server prepares its file and region.
	var ready *results.Ready
	for ready == nil {
		select {
		case ev, ok := <-srv.events:
			if !ok {
				return fail(r.Server.Label, r.ended(srv, "before ready"))
			}
			switch ev := ev.(type) {
			case *results.Started:
				r.markStarted(srv, ev)
			case *results.Warning:
				r.warn(srv, ev.Message)
			case *results.Error:
				return fail(r.Server.Label, ev.Message)
			case *results.Ready:
				ready = ev
			}
		case <-readyBy.C:
			return fail(r.Server.Label, fmt.Sprintf("not ready within timeouts.ready (%s)", r.Plan.Timeouts.Ready))
		case <-pointBy.C:
			return fail(r.Server.Label, fmt.Sprintf("point timed out (timeouts.point %s)", r.Plan.Timeouts.Point))
		case <-ctx.Done():
			return row, tm, ErrInterrupted
		}
	}
	tm.ToReady = time.Since(start)
	row.SetReady(ready)

	// Phase 2: the client reads.
	readyAt := time.Now()
	addr := net.JoinHostPort(pt.Hosts.Server.DataAddress, strconv.Itoa(ready.Port))
	cli, err := startRole(ctx, r.Client, r.clientArgv(pt, addr), control, logBase+".client.log")
	if err != nil {
		return fail(r.Client.Label, err.Error())
	}
	defer cli.close()
	defer r.stop(cli)
	tm.ToClient = time.Since(readyAt)

	var (
		result   *results.Result
		resultAt time.Time
		done     bool
	)
	// handle takes one event of either role; it returns a failure message.
	handle := func(rp *roleProc, ev any) string {
		switch ev := ev.(type) {
		case *results.Started:
			r.markStarted(rp, ev)
		case *results.Warning:
			r.warn(rp, ev.Message)
		case *results.Error:
			return ev.Message
		case *results.Result:
			result, resultAt = ev, time.Now()
		case *results.Done:
			done = true
		}
		return ""
	}
	// exited takes a role's exit, after the events it printed before it:
	// exit is sent only once stdout is drained, so what is left in events
	// came first.
	exited := func(rp *roleProc, err error) string {
		if rp.events != nil {
			for ev := range rp.events {
				if msg := handle(rp, ev); msg != "" {
					return msg
				}
			}
		}
		rp.events, rp.exit = nil, nil
		switch {
		case rp == cli && (result == nil || err != nil):
			return r.endedWith(rp, err, "without a result")
		case rp == srv && (!done || err != nil):
			return r.endedWith(rp, err, "before done")
		}
		r.markExited(rp)
		return ""
	}
	for cli.exit != nil || srv.exit != nil {
		var (
			rp       *roleProc
			msg      string
			external bool // rp was killed or cut off, not failing on its own
		)
		select {
		case ev, ok := <-cli.events:
			if rp = cli; ok {
				msg = handle(cli, ev)
			} else {
				cli.events = nil
			}
		case ev, ok := <-srv.events:
			if rp = srv; ok {
				msg = handle(srv, ev)
			} else {
				srv.events = nil
			}
		case err := <-cli.exit:
			rp, msg, external = cli, exited(cli, err), diedOfCause(err)
		case err := <-srv.exit:
			rp, msg, external = srv, exited(srv, err), diedOfCause(err)
		case <-pointBy.C:
			return fail("runner", fmt.Sprintf("point timed out (timeouts.point %s)", r.Plan.Timeouts.Point))
		case <-ctx.Done():
			return row, tm, ErrInterrupted
		}
		if msg != "" {
			other, phase := srv, "before done"
			if rp == srv {
				other, phase = cli, "without a result"
			}
			if !external {
				if omsg := r.diedToo(other, phase); omsg != "" {
					return fail(other.target.Label, omsg)
				}
			}
			return fail(rp.target.Label, msg)
		}
	}
	row.Status = results.StatusOK
	row.SetResult(result)
	tm.Measured = time.Duration(result.Seconds * float64(time.Second))
	tm.ResultToRow = time.Since(resultAt)
	tm.Wall = time.Since(start)
	return row, tm, nil
}

// blameWindow is how long a failing role's peer is given to show that it
// died first.
const blameWindow = time.Second

// diedToo looks past one role's failure at the other: when a node is
// killed or cut off, its peer usually fails first, on the broken data
// connection ("read reply: EOF"), but the death is what the user must see.
// It waits up to blameWindow for the other's exit and returns its message
// if it died of an outside cause, else "".
func (r *Runner) diedToo(other *roleProc, phase string) string {
	if other.exit == nil {
		return ""
	}
	select {
	case err := <-other.exit:
		other.exit = nil
		if diedOfCause(err) {
			return r.endedWith(other, err, phase)
		}
	case <-time.After(blameWindow):
	}
	return ""
}

// diedOfCause reports whether a role's exit came from outside: a signal,
// or its host's connection lost.
func diedOfCause(err error) bool {
	var ee *remote.ExitError
	return errors.As(err, &ee) && ee.Signal != "" || errors.Is(err, remote.ErrConnectionLost)
}

func (r *Runner) stop(rp *roleProc) {
	grace := r.Grace
	if grace == 0 {
		grace = 2 * time.Second
	}
	rp.stop(grace)
	if rp.reaped() {
		r.markExited(rp)
	}
}

func (r *Runner) markStarted(rp *roleProc, st *results.Started) {
	if rp.started == nil {
		rp.started = st
		if r.Started != nil {
			r.Started(rp.target, st)
		}
	}
}

func (r *Runner) markExited(rp *roleProc) {
	if rp.started != nil && r.Exited != nil {
		r.Exited(rp.target, rp.started)
	}
}

func (r *Runner) warn(rp *roleProc, msg string) {
	if r.Warn != nil {
		r.Warn(rp.target.Label + ": " + msg)
	}
}

// ended describes a role whose stdout closed before it said what phase
// needed; it waits briefly for the exit status to make the message exact.
func (r *Runner) ended(rp *roleProc, phase string) string {
	select {
	case err := <-rp.exit:
		rp.exit = nil
		return r.endedWith(rp, err, phase)
	case <-time.After(5 * time.Second):
		return "node closed its output " + phase
	}
}

func (r *Runner) endedWith(rp *roleProc, err error, phase string) string {
	msg := exitDescription(err) + " " + phase
	if last := rp.tail.lastLine(); last != "" {
		msg += ": " + last
	}
	return msg
}

func (r *Runner) baseRow(pt plan.Point, rep int, start time.Time) results.Row {
	row := results.Row{
		RunID:          r.RunID,
		Plan:           r.Plan.Name,
		PointKey:       pt.Key,
		Repetition:     rep,
		StartedAt:      start.UTC().Format(time.RFC3339),
		Transport:      pt.Transport,
		ServerHost:     r.Server.Host.Name(),
		ClientHost:     r.Client.Host.Name(),
		FileSizeBytes:  pt.Server.FileSize,
		BlockSizeBytes: pt.Client.BlockSize,
		QueueDepth:     pt.Client.QueueDepth,
		QPs:            pt.Client.QPs,
		Pattern:        pt.Client.Pattern,
		Cache:          pt.Server.Cache,
		TotalBytes:     EffectiveTotal(pt),
		DurationS:      pt.Client.Duration.Seconds(),
		WarmupS:        pt.Client.Warmup.Seconds(),
	}
	if pt.Transport == "rdma" {
		row.Registration = pt.Server.Registration
	}
	return row
}

// EffectiveTotal is the bytes a point reads: total, or file_size when total
// is 0; 0 when the point reads for a duration instead.
func EffectiveTotal(pt plan.Point) int64 {
	switch {
	case pt.Client.Duration > 0:
		return 0
	case pt.Client.Total > 0:
		return pt.Client.Total
	default:
		return pt.Server.FileSize
	}
}

func (r *Runner) deadline() string {
	slack := r.DeadlineSlack
	if slack == 0 {
		slack = 30 * time.Second
	}
	return (r.Plan.Timeouts.Point + slack).String()
}

func (r *Runner) serverArgv(pt plan.Point) []string {
	s := pt.Server
	argv := []string{r.Server.NodePath, "serve",
		"--transport", pt.Transport,
		"--file", s.File,
		"--file-size", strconv.FormatInt(s.FileSize, 10),
		"--cache", s.Cache,
		"--registration", s.Registration,
		"--listen", pt.Hosts.Server.DataAddress,
		"--port", strconv.Itoa(s.Port),
		"--accept-timeout", r.Plan.Timeouts.Accept.String(),
		"--control-stdin",
		"--deadline", r.deadline(),
	}
	if s.Create {
		argv = append(argv, "--create")
	}
	return pinned(pt.Hosts.Server.CPUs, append(argv, rdmaArgs(pt.Transport, pt.Hosts.Server.RDMA)...))
}

func (r *Runner) clientArgv(pt plan.Point, addr string) []string {
	c := pt.Client
	argv := []string{r.Client.NodePath, "read",
		"--transport", pt.Transport,
		"--server", addr,
		"--block-size", strconv.FormatInt(c.BlockSize, 10),
		"--queue-depth", strconv.Itoa(c.QueueDepth),
		"--qps", strconv.Itoa(c.QPs),
		"--pattern", c.Pattern,
		"--total", strconv.FormatInt(c.Total, 10),
		"--duration", c.Duration.String(),
		"--warmup", c.Warmup.String(),
		"--control-stdin",
		"--deadline", r.deadline(),
	}
	if c.Verify {
		argv = append(argv, "--verify")
	}
	return pinned(pt.Hosts.Client.CPUs, append(argv, rdmaArgs(pt.Transport, pt.Hosts.Client.RDMA)...))
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

func rdmaArgs(transport string, rd plan.RDMA) []string {
	if transport != "rdma" {
		return nil
	}
	var argv []string
	if rd.Device != "" {
		argv = append(argv, "--rdma-device", rd.Device)
	}
	if rd.IBPort != 0 {
		argv = append(argv, "--ib-port", strconv.Itoa(rd.IBPort))
	}
	gid := -1
	if rd.GIDIndex != nil {
		gid = *rd.GIDIndex
	}
	return append(argv, "--gid-index", strconv.Itoa(gid))
}
