package point

// Peer workloads as roles: a point whose workload is a peer (a tool of
// runner/points/peer's registry) runs that tool instead of node serve and
// node read, with the argv the peer builds from the point's parameters,
// and its report becomes the row. Nothing here names a tool: what differs
// between them is the Tool's (OnServerHost, ClientCPUs, HasServer).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path"
	"time"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
	"rdmasweep/runner/points/peer"
)

// isPeer reports whether pt is measured by a peer rather than by node.
func isPeer(pt plan.Point) bool { return pt.Values.Str(param.Workload) != "node" }

// runPeer runs one repetition of a peer point: its roles, then its
// report read into the row.
func (r *Runner) runPeer(ctx context.Context, pt plan.Point, rep int, start time.Time) (results.Row, Timing, error) {
	name := pt.Values.Str(param.Workload)
	srvT, cliT := r.peerTargets(pt)
	row := r.baseRow(pt, rep, start, srvT, cliT)
	row.Scope = results.ScopeClient
	fail := func(err error) (results.Row, Timing, error) {
		row.Status, row.Error = results.StatusFailed, err.Error()
		return row, Timing{Wall: time.Since(start)}, nil
	}
	tool, err := peer.Lookup(name)
	if err != nil {
		return fail(err)
	}
	roles, err := r.PeerRoles(pt)
	if err != nil {
		return fail(err)
	}
	if tool.OnServerHost {
		row.ClientHost = srvT.Host.Name() // it measures on the server's host
	}
	// The point's secret, for a peer whose roles read a control line
	// (nvmeof: it names the subsystem and keys its host); no other reads it.
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return fail(fmt.Errorf("make the point's secret: %w", err))
	}
	reports, tm, err := r.run(ctx, roles, results.Control{Secret: hex.EncodeToString(secret)}, r.logBase(pt, rep), nil)
	if err != nil {
		if ready := reports[0].Ready; ready != nil { // node prepare got this far
			row.SetReady(ready)
		}
		if err == ErrInterrupted {
			return row, tm, err
		}
		row.Status, row.Error = results.StatusFailed, err.Error()
		return row, tm, nil
	}
	measuring := roles[len(roles)-1]
	res, err := peer.Parse(name, reports[len(reports)-1].Output)
	if err != nil {
		return fail(measuring.Target.Wrap(role.Run, err))
	}
	if ready := reports[0].Ready; ready != nil {
		row.SetReady(ready)
	}
	setPeerResult(&row, res, roles, reports)
	if tool.ReadsFile && onePass(pt.Values) {
		row.EndToEndMBs = &res.BandwidthMBs
	}
	if res.Reported != nil && r.Counters != nil {
		r.Counters(pt, rep, measuring.Target, &results.Counters{Reported: res.Reported})
	}
	row.Status = results.StatusOK
	tm.Measured = time.Duration(res.Seconds * float64(time.Second))
	return row, tm, nil
}

// onePass reports whether a point reads its file once from the start,
// untimed and without warmup: then a peer that reads the file has read it
// end to end in its measured time, and that rate is its end_to_end_mb_s.
func onePass(v plan.Values) bool {
	total := v.Int(param.Total)
	return v.Duration(param.Warmup) == 0 && v.Duration(param.Duration) == 0 && (total == 0 || total == v.Int(param.FileSize))
}

// setPeerResult copies a peer's figures into the row; what it does not
// give stays empty (latency where the tool reports none; verified always).
// The CPU cells are node run's figures of the tool's own processes, as
// node's are of node: the client's from the measuring role, the
// server's from a tool's server role (fio, after node prepare, has none).
func setPeerResult(row *results.Row, res peer.Result, roles []Role, reports []*Report) {
	row.Bytes, row.Seconds, row.BandwidthMBs, row.IOPS = &res.Bytes, &res.Seconds, &res.BandwidthMBs, res.IOPS
	if res.Verified {
		row.Verified = &res.Verified
	}
	if l := res.Latency; l != nil {
		row.LatAvgUs, row.LatP50Us, row.LatP99Us, row.LatP999Us, row.LatMaxUs = &l.AvgUs, &l.P50Us, &l.P99Us, &l.P999Us, &l.MaxUs
	}
	cpu := func(i int) *float64 {
		if roles[i].Tool == "" || reports[i].CPU == nil {
			return nil
		}
		return reports[i].CPU.PerSecond()
	}
	row.CPUClient = cpu(len(roles) - 1)
	if len(roles) > 1 {
		row.CPUServer = cpu(0)
	}
}

// PeerRoles are the roles of a peer point. A peer with a server: the
// tool's server on the server host, ready when its port listens (ss -ltn
// there), then its client on the client host. One that measures on the
// server's host (OnServerHost): node prepare on the
// server host (the file made as node serve makes it, the cold or warm
// step done), then the tool on the same host, reading that file.
func (r *Runner) PeerRoles(pt plan.Point) ([]Role, error) {
	name := pt.Values.Str(param.Workload)
	srvT, cliT := r.peerTargets(pt)
	srvCPUs, cliCPUs := pt.Hosts.Server().CPUs, pt.Hosts.Client().CPUs
	var rnd [8]byte
	rand.Read(rnd[:])
	tag := hex.EncodeToString(rnd[:])
	build := func(t role.Target) (peer.Commands, error) {
		p := peer.FromValues(pt.For(t.Role))
		if c, ok := r.Choices[t.Role]; ok && p.Transport == results.TransportRDMA {
			p.Chosen = &c
		}
		p.ServerAddr = pt.Hosts.Server().DataAddress
		p.OutDir, p.ReportTag = r.reportDir(t), tag
		return peer.Build(name, p)
	}
	srv, err := build(srvT)
	if err != nil {
		return nil, srvT.Wrap(role.Start, err)
	}
	fixed := func(t role.Target, cpus string, argv []string) func(map[string]*results.Ready) []string {
		return func(map[string]*results.Ready) []string { return r.toolArgv(t, cpus, argv, srv.Control) }
	}
	tool, err := peer.Lookup(name)
	if err != nil {
		return nil, err
	}
	if tool.OnServerHost {
		t := role.Target{Role: cliT.Role, Host: srvT.Host, Label: fmt.Sprintf("%s (%s)", name, srvT.Host.Name()), NodePath: srvT.NodePath}
		return []Role{
			{
				Target: srvT,
				Argv: func(map[string]*results.Ready) []string {
					return r.prepareArgv(pt, srvT, srvCPUs)
				},
				Ready:  OnReadyEvent,
				Output: OutputExit,
			},
			{Target: t, WaitsFor: []string{srvT.Role}, Tool: name, Argv: fixed(t, srvCPUs, srv.Client), Ready: OnStart, Output: OutputStdout},
		}, nil
	}
	cli, err := build(cliT)
	if err != nil {
		return nil, cliT.Wrap(role.Start, err)
	}
	server := Role{Target: srvT, Tool: name, Control: srv.Control, Argv: fixed(srvT, srvCPUs, srv.Server), Ready: OnListening, Port: srv.ReadyPort, CM: srv.ReadyCM, Output: OutputExit}
	if srv.ServerReport != "" {
		server.Output, server.Report = OutputFile, srv.ServerReport
	}
	client := Role{Target: cliT, WaitsFor: []string{srvT.Role}, Tool: name, Control: cli.Control, Argv: fixed(cliT, cliCPUs, cli.Client), Ready: OnStart, Output: OutputStdout}
	if cli.ClientReport != "" {
		client.Output, client.Report = OutputFile, cli.ClientReport
	}
	return []Role{server, client}, nil
}

// peerTargets are the server's and the client's targets: a peer point has
// one of each (validate refuses several clients with a peer).
func (r *Runner) peerTargets(pt plan.Point) (srv, cli role.Target) {
	roles := pt.Hosts.Roles()
	return r.target(roles[0].Name), r.target(roles[len(roles)-1].Name)
}

// prepareArgv is node prepare's command line: serve's file parameters from
// the table, over tcp (nothing is registered: the tool reads the file
// itself).
func (r *Runner) prepareArgv(pt plan.Point, t role.Target, cpus string) []string {
	v := pt.For(t.Role)
	argv := []string{t.NodePath, "prepare", "--transport", results.TransportTCP}
	for _, id := range []param.ID{param.File, param.FileSize, param.Create, param.Cache} {
		argv = append(argv, results.ParamOf(id).Argv(results.TransportTCP, v)...)
	}
	argv = append(argv, "--control-stdin", "--deadline", r.deadline())
	return pinned(cpus, argv)
}

// toolArgv runs a peer's argv under node run (node/runcmd.go) on t's
// host: node measures the tool's own CPU as it measures its own, and
// stops the tool at node's deadline or when the runner's connection ends,
// since a tool does not stop by itself (a tool's server left waiting
// would hold its port). A command that reads the control line (control)
// gets node run's stdin instead, and stops on its end by itself, after
// tearing down what it set up. It is pinned as node would be, so both
// see the same CPUs.
func (r *Runner) toolArgv(t role.Target, cpus string, argv []string, control bool) []string {
	run := []string{t.NodePath, "run", "--deadline", r.deadline(), "--stop-on-eof", "--"}
	if control {
		run = []string{t.NodePath, "run", "--deadline", r.deadline(), "--"}
	}
	if len(argv) > 0 && argv[0] == peer.NodeProgram {
		argv = append([]string{t.NodePath}, argv[1:]...)
	}
	return pinned(cpus, append(run, argv...))
}

// reportDir is where a peer on t writes a report file: beside node on a
// remote host (that directory exists: node was deployed there, and only
// the login user may write it, see remote.Upload), and in this exec's log
// directory for a local role. Each point's reports have names of their
// own (peer.Params.ReportTag). The runner reads the file
// back, removes it and keeps it beside the role's log.
func (r *Runner) reportDir(t role.Target) string {
	if _, local := t.Host.(remote.Local); local {
		return r.LogDir
	}
	return path.Dir(t.NodePath)
}
