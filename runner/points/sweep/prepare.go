package sweep

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/files/leftover"
	"rdmasweep/runner/files/manifest"
	"rdmasweep/runner/files/outdir"
	"rdmasweep/runner/files/resume"
	"rdmasweep/runner/files/series"
	"rdmasweep/runner/hosts/hostset"
	"rdmasweep/runner/hosts/role"
	"rdmasweep/runner/points/point"
	"rdmasweep/runner/points/preflight"
	"rdmasweep/runner/points/probe"
)

// Setup is what an exec knows before it reaches its hosts.
type Setup struct {
	Plan   *plan.Plan
	Points []plan.Point // every point of the plan, whose peer programs are checked
	// RunID names the run's logs and manifest; CSVPath, RunnerVersion and
	// Set (the --set assignments) are recorded in the manifest.
	RunID, CSVPath, RunnerVersion string
	Set                           []string
	Hosts                         hostset.Options
	Info                          func(msg string) // what it did
	Warn                          func(msg string) // every time
	WarnOnce                      func(msg string) // once per run
}

// Exec is an exec that may run its points: its hosts reached with node
// deployed, its gates passed and its manifest written.
type Exec struct {
	Setup
	Hosts  *hostset.Set
	Rec    *manifest.Record
	LogDir string
	// Choices are node's device, port and GID on each role's host, by
	// role name, from the devices gate (point.Runner.Choices).
	Choices map[string]results.DeviceChoice
}

// Prepare does everything before the first point of todo: the log
// directory, the hosts connected and node deployed, the gates (peer
// programs, the devices, ODP), and the manifest written. Everything that
// can refuse the exec does so here. On success the caller closes the
// Exec.
func Prepare(ctx context.Context, s Setup, todo []resume.Job) (*Exec, error) {
	e := &Exec{Setup: s, LogDir: filepath.Join(s.Plan.Output.Logs, s.RunID)}
	logs, err := outdir.Make(s.Plan.Output.Logs)
	if err == nil {
		var run *outdir.Dir
		if run, err = logs.Mkdir(s.RunID, 0o700); err == nil {
			run.Close()
		}
		logs.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	// A pool sweep goes on without the hosts it cannot reach: their pairs
	// fail with the reason, and the summary lists them unreachable.
	opts := s.Hosts
	opts.KeepUnreachable = true
	set, err := hostset.Connect(ctx, s.Plan, opts)
	if err != nil {
		return nil, err
	}
	e.Hosts = set
	for _, t := range set.Roles {
		if why, down := set.Down[t.Role]; down {
			var re *role.Error
			if errors.As(why, &re) {
				why = re.Err // the label names the host
			}
			s.Warn(fmt.Sprintf("%s: unreachable, so its pairs fail: %v", t.Label, why))
		}
	}
	if err := e.gate(ctx, todo); err != nil {
		set.Close()
		return nil, err
	}
	return e, nil
}

// Close closes the connections to the hosts.
func (e *Exec) Close() { e.Hosts.Close() }

// gate refuses the exec before any point when its hosts cannot run the
// points to do, and writes the manifest. The ODP gate gets a point per
// job, since its refusal counts them.
func (e *Exec) gate(ctx context.Context, todo []resume.Job) error {
	p := e.Plan
	var pts []plan.Point
	for _, j := range todo {
		pts = append(pts, j.Point)
	}
	if err := preflight.CheckPrograms(ctx, e.Hosts, e.Points); err != nil {
		return err
	}
	choices, err := preflight.CheckDevices(ctx, p, resume.Points(todo), e.Hosts)
	if err != nil {
		return err
	}
	e.Choices = choices
	rec, err := manifest.Gather(ctx, p, e.Hosts, manifest.Exec{RunID: e.RunID, CSVPath: e.CSVPath, RunnerVersion: e.RunnerVersion, Set: e.Set})
	if err != nil {
		return err
	}
	e.Rec = rec
	for i, t := range e.Hosts.Roles {
		if t.Host == nil { // down: the manifest says who, and nothing more
			rec.M.Hosts[i] = manifest.Host{Role: t.Role, Name: e.Plan.Hosts.Roles()[i].Host.Address}
		}
	}
	e.recordCalibrations(rec)
	for _, far := range preflight.FarClocks(rec.M.Hosts) {
		e.Warn(fmt.Sprintf("%s: %s", e.Hosts.Roles[far.Role].Label, preflight.ClockWarning(far.Clock)))
	}
	env := probe.Env{Plan: p, Set: e.Hosts, LogDir: e.LogDir, Warn: e.WarnOnce}
	rec.M.ODPProbes, err = env.ODPGate(ctx, pts, rec.Kernels())
	if err != nil {
		return err
	}
	return rec.Write()
}

// hostOf is the name of role's host as its rows carry it, "" when down.
func (e *Exec) hostOf(role string) string {
	if t := e.Hosts.Get(role); t.Host != nil {
		return t.Host.Name()
	}
	return ""
}

// recordCalibrations puts in the manifest the latest runner check
// --calibrate of each of an rdma plan's server and client pairs, kept
// beside the exec's CSV or the plan's own, and warns of each that
// disagreed: node's figures on those hosts are not matched by perftest's.
func (e *Exec) recordCalibrations(rec *manifest.Record) {
	if e.Plan.Transport() != results.TransportRDMA {
		return
	}
	var cs []manifest.Calibration
	for i, csv := range []string{e.CSVPath, e.Plan.Output.CSV} {
		if i == 1 && filepath.Clean(csv) == filepath.Clean(e.CSVPath) {
			break
		}
		found, err := manifest.ReadCalibrations(manifest.CalibrationPathFor(csv))
		if err != nil {
			e.Warn(err.Error())
		}
		cs = append(cs, found...)
	}
	for _, pair := range preflight.Pairs(e.Plan) {
		srv, cli := e.Hosts.Get(pair.Server.Name), e.Hosts.Get(pair.Client.Name)
		if srv.Host == nil || cli.Host == nil {
			continue
		}
		c := manifest.LatestCalibration(cs, srv.Host.Name(), cli.Host.Name())
		if c == nil {
			continue
		}
		rec.M.Calibrations = append(rec.M.Calibrations, *c)
		if !c.Agree {
			var off []string
			for _, s := range c.Sizes {
				if !s.Agree {
					off = append(off, results.FormatSize(s.BlockSize)+" "+probe.CalibrationVerdict(s))
				}
			}
			e.Warn(fmt.Sprintf("%s → %s: runner check --calibrate at %s found node and ib_read_bw disagree on these hosts (%s): node's figures here are not matched by perftest's", srv.Label, cli.Label, c.At, strings.Join(off, ", ")))
		}
	}
}

// PointRunner is the runner of this exec's points: its hosts, logs, the
// leftover record, the time series, the counters sidecar and the manifest.
func (e *Exec) PointRunner(left *leftover.Record, ts *series.File, cs *manifest.Counters, tls *manifest.Timelines) *point.Runner {
	r := &point.Runner{
		Plan:    e.Plan,
		RunID:   e.RunID,
		Targets: e.Hosts.Roles,
		LogDir:  e.LogDir,
		Warn:    e.WarnOnce,
		Started: left.Add,
		Exited:  left.Remove,
		Series:  ts.Add,
		Counters: func(pt plan.Point, rep int, t role.Target, c *results.Counters) {
			cs.Add(manifest.CounterLine{PointKey: pt.Key, Repetition: rep, Role: t.Role, Host: t.Host.Name(), Counters: c})
		},
		Timeline: func(pt plan.Point, rep int, t role.Target, p *results.Pipeline) {
			tls.Add(manifest.TimelineLine{PointKey: pt.Key, Repetition: rep, Role: t.Role, Host: t.Host.Name(), DiskIdlePct: p.DiskIdlePct, Regions: p.Timeline})
		},
		Path:    func(t role.Target, rp *results.RDMAPath) { e.Rec.AddPath(t, rp, e.Warn) },
		Choices: e.Choices,
	}
	return r
}

// Run runs todo through the point runner, appending the rows to csv, as
// Sweep.Run does. First it reaps what an earlier exec on the CSV left
// (the leftover record beside it); the time series of the run is written
// beside the CSV as it goes.
func (e *Exec) Run(ctx context.Context, todo []resume.Job, csv Appender, w Watch) (Outcome, error) {
	return e.run(ctx, csv, w, func(s *Sweep) (Outcome, error) { return s.Run(ctx, todo) })
}

// RunSearch runs the plan's knee search over outer, its points, as
// Sweep.Search does, reusing the probes among existing (the CSV's rows);
// around it, it does what Run does.
func (e *Exec) RunSearch(ctx context.Context, outer []plan.Point, existing []results.Row, csv Appender, w Watch) (Outcome, error) {
	return e.run(ctx, csv, w, func(s *Sweep) (Outcome, error) { return s.Search(ctx, outer, existing) })
}

func (e *Exec) run(ctx context.Context, csv Appender, w Watch, sweep func(*Sweep) (Outcome, error)) (Outcome, error) {
	left, err := leftover.Open(ctx, e.CSVPath+".state", e.Hosts.Targets(), e.Info)
	if err != nil {
		return Outcome{}, err
	}
	defer left.Flush()
	if err := preflight.CleanPeers(ctx, e.Hosts, e.Points, e.Info); err != nil {
		return Outcome{}, err
	}
	ts := series.New(series.PathFor(e.CSVPath, e.RunID))
	defer ts.Close()
	cs := manifest.NewCounters(manifest.CountersPathFor(e.CSVPath, e.RunID))
	defer cs.Close()
	tls := manifest.NewTimelines(manifest.TimelinePathFor(e.CSVPath, e.RunID))
	defer tls.Close()
	c := &Ceilings{Targets: e.Hosts.Roles, Rec: e.Rec, Info: e.Info, Warn: e.WarnOnce}
	env := probe.Env{Plan: e.Plan, Set: e.Hosts, LogDir: e.LogDir, Warn: e.WarnOnce, Choices: e.Choices}
	l := &Links{Plan: e.Plan, HostOf: e.hostOf, Measure: env.LinkCapacity, Rec: e.Rec, Info: e.Info, Warn: e.WarnOnce}
	out, err := sweep(&Sweep{Plan: e.Plan, Runner: e.PointRunner(left, ts, cs, tls), CSV: csv, Down: e.Hosts.Down, Warn: e.Warn, Ceilings: c, Links: l, Watch: w})
	if err == nil {
		out.SeriesErr, out.CountersErr, out.TimelineErr = ts.Close(), cs.Close(), tls.Close()
	}
	return out, err
}
