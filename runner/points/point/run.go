package point

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"rdmasweep/results"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
	"rdmasweep/runner/points/peer"
)

// Role is one node process of a point, as data: where it runs, its
// command line, when it may start, when it counts as ready, and which of
// its events is its output. A point's roles are started, awaited, run and
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
	// Barrier holds the role at the start barrier: once every role of its
	// stage is ready, each is sent a go control line, so all start their
	// reads together (node read --barrier).
	Barrier bool
	// Output is the event the role must print before a clean exit, and
	// what it gives the row: results.TypeResult (node read's measurement)
	// or results.TypeDone (node serve's statistics); for a tool, one of
	// the Output kinds below.
	Output string

	// Tool names the program when the role is not node but a peer such as
	// iperf3: it prints no events and takes no control line, and is
	// stopped with signals, since stdin's end means nothing to it.
	Tool string
	// Control, for a tool, says it is node's own command (peer
	// Commands.Control): it takes the control line, and stops when its
	// stdin ends.
	Control bool
	// Port is what an OnListening role listens on; CM says it listens
	// through rdma_cm, not on a TCP socket (peer Commands.ReadyCM).
	Port int
	CM   bool
	// Report is the path, on the role's host, of the report file an
	// OutputFile role writes.
	Report string
}

// controlFor is the control line rl's process is written first: the
// point's c, or nil for a tool that reads none.
func (rl Role) controlFor(c *results.Control) *results.Control {
	if rl.Tool != "" && !rl.Control {
		return nil
	}
	return c
}

// Output kinds of a tool role (Role.Output), beside node's events.
const (
	// OutputExit: a clean exit is all it gives (iperf3's server).
	OutputExit = "exit"
	// OutputStdout: its stdout, kept whole, is its report (iperf3 -J,
	// fio's JSON), in Report.Output.
	OutputStdout = "stdout"
	// OutputFile: it writes Role.Report on its host, read back into
	// Report.Output once every role has exited (ib_read_bw's
	// --out_json_file).
	OutputFile = "file"
)

// Readiness says when a role counts as ready.
type Readiness int

const (
	// OnReadyEvent: when node prints its ready event (node serve, once
	// its region is registered and it listens), within timeouts.ready.
	OnReadyEvent Readiness = iota
	// OnStart: as soon as node is started (node read starts reading at
	// once).
	OnStart
	// OnListening: when Role.Port listens on the role's host, as
	// `ss -ltn` there shows (peer.Listening), or with Role.CM `rdma
	// resource show cm_id` (peer.CMListening), polled within
	// timeouts.ready. Nothing connects to find out: a tool's server may
	// serve only its first connection. The port must be free before the
	// role starts, or another program's socket would pass for it.
	OnListening
)

// Report is what one role said.
type Report struct {
	Target    role.Target
	Started   *results.Started
	Ready     *results.Ready
	Result    *results.Result
	Intervals []*results.Interval // what it read, interval by interval
	Done      *results.Done
	// Output is a tool's report: its stdout (OutputStdout) or its report
	// file (OutputFile).
	Output []byte
	// CPU is what node run said of a tool's own processes once it exited
	// (nil when it said nothing).
	CPU *results.RunCPU
}

// Timing is where a point's wall time went.
type Timing struct {
	ToReady     time.Duration // first roles started → ready
	ToClient    time.Duration // → the roles that wait for them started
	Measured    time.Duration // node read's own seconds
	ResultToRow time.Duration // the result → every role gone (the row is written after)
	Wall        time.Duration
}

// ErrInterrupted is returned when ctx ends during a point; no row is made.
var ErrInterrupted = errors.New("interrupted")

// blameWindow is how long a failing role's peers are given to show that
// one of them died first.
const blameWindow = time.Second

// run is one point's roles in four steps: start each stage of roles (those
// whose waits are over), await the stage's readiness, run until every role
// has exited, and collect their reports. It returns every role's report,
// complete or not, and a *role.Error naming the role that failed, or
// ErrInterrupted. Whatever happens, every role is stopped before it
// returns.
func (r *Runner) run(ctx context.Context, roles []Role, control results.Control, logBase string, series func(Role, *results.Interval)) ([]*Report, Timing, error) {
	x := &execution{
		r: r, ctx: ctx, roles: roles, control: control, logBase: logBase, start: time.Now(), series: series,
		procs:   make([]*proc, len(roles)),
		pending: make([]remote.Pending, len(roles)),
		reports: make([]*Report, len(roles)),
		exited:  make([]bool, len(roles)),
		ready:   map[string]*results.Ready{},
		updates: make(chan update, 16*len(roles)),
		abandon: make(chan struct{}),
		readyBy: time.NewTimer(r.Plan.Timeouts.Ready),
		pointBy: time.NewTimer(r.Plan.Timeouts.Point),
	}
	for i, rl := range roles {
		x.reports[i] = &Report{Target: rl.Target}
	}
	defer x.stopAll()
	err := x.steps()
	// A step that failed once ctx ended failed of the interruption (a
	// start or a port check cut short: "start node: context canceled"),
	// not of the point: the point gets no row, and the sweep stops.
	if err != nil && ctx.Err() != nil {
		err = ErrInterrupted
	}
	x.tm.Wall = time.Since(x.start)
	return x.reports, x.tm, err
}

// execution is one run of a point's roles. Its loop is the only reader of
// updates; each process's forwarding goroutine is its only writer.
type execution struct {
	r       *Runner
	ctx     context.Context
	roles   []Role
	control results.Control
	logBase string
	start   time.Time
	series  func(Role, *results.Interval)

	procs   []*proc
	pending []remote.Pending // node roles started ahead of their command line
	reports []*Report
	exited  []bool
	ready   map[string]*results.Ready // by role name; a nil event for OnStart roles
	updates chan update
	abandon chan struct{}

	readyBy, pointBy *time.Timer
	resultAt         time.Time
	tm               Timing
}

func (x *execution) steps() error {
	x.prestart()
	for n, stage := range stages(x.roles) {
		if n == 1 {
			x.tm.ToReady = time.Since(x.start)
		}
		if err := x.startStage(stage); err != nil {
			return err
		}
		if n == 1 {
			x.tm.ToClient = time.Since(x.start) - x.tm.ToReady
		}
		if err := x.await(stage); err != nil {
			return err
		}
		x.release(stage)
	}
	for slices.Contains(x.exited, false) {
		if err := x.next(); err != nil {
			return err
		}
	}
	if err := x.collect(); err != nil {
		return err
	}
	if !x.resultAt.IsZero() {
		x.tm.ResultToRow = time.Since(x.resultAt)
	}
	return nil
}

// stages orders the roles by what they wait for: the roles that wait for
// nothing, then those waiting only for them, and so on.
func stages(roles []Role) [][]int {
	var out [][]int
	placed := map[string]bool{}
	for len(placed) < len(roles) {
		var stage []int
		for i, rl := range roles {
			if !placed[rl.Target.Role] && !slices.ContainsFunc(rl.WaitsFor, func(n string) bool { return !placed[n] }) {
				stage = append(stage, i)
			}
		}
		if len(stage) == 0 {
			panic("point: roles wait for each other in a circle, or for a role that is not there")
		}
		for _, i := range stage {
			placed[roles[i].Target.Role] = true
		}
		out = append(out, stage)
	}
	return out
}

// startStage starts the stage's roles.
func (x *execution) startStage(stage []int) error {
	// The stage's roles start at once: each start is a round trip to its
	// host (an SSH session, a Slurm step), and one after another they
	// made the point's overhead grow by a round trip per client.
	procs := make([]*proc, len(stage))
	errs := make([]error, len(stage))
	var wg sync.WaitGroup
	for n, i := range stage {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rl, t := x.roles[i], x.roles[i].Target
			if rl.Ready == OnListening {
				if err := portFree(x.ctx, t, rl.Port, rl.CM); err != nil {
					errs[n] = t.Wrap(role.Start, err)
					return
				}
			}
			pr, err := startProc(x.ctx, t, x.pending[i], rl.Argv(x.ready), rl.Tool, rl.controlFor(&x.control), fmt.Sprintf("%s.%s.log", x.logBase, t.Role), i,
				x.updates, x.abandon, func(st *results.Started) { x.r.markStarted(t, st) })
			if err != nil {
				errs[n] = t.Wrap(role.Start, err)
				return
			}
			procs[n] = pr
		}()
	}
	wg.Wait()
	// Every role that started is recorded, so a failure of another stops
	// it with the rest.
	for n, i := range stage {
		pr := procs[n]
		if pr == nil {
			continue
		}
		rl, t := x.roles[i], x.roles[i].Target
		x.procs[i] = pr
		switch rl.Ready {
		case OnStart:
			x.ready[t.Role] = nil
		case OnListening:
			go pollListening(x.ctx, t, rl.Port, rl.CM, i, x.updates, x.abandon, pr.gone)
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// prestart starts every node role whose host can start node before its
// command line is known (remote.Prestarter: Slurm, and the SSH hosts of
// a pool sweep), all at once: a role
// that waits for another's port then starts while that one does, and
// takes its command line, and later its go, over node's own connection.
func (x *execution) prestart() {
	for i, rl := range x.roles {
		if ps, ok := rl.Target.Host.(remote.Prestarter); ok && rl.Tool == "" {
			x.pending[i] = ps.Prestart(x.ctx, rl.Target.NodePath)
		}
	}
}

// await waits until every role of the stage is ready.
func (x *execution) await(stage []int) error {
	for slices.ContainsFunc(stage, func(i int) bool { return !x.isReady(i) }) {
		if err := x.next(); err != nil {
			return err
		}
	}
	return nil
}

// release sends go to the stage's roles held at the barrier, all ready:
// one line, the same for all, written to each in turn. Under Slurm it
// goes over node's own connection (remote.Prestarter), so it arrives as
// fast as over an SSH session.
func (x *execution) release(stage []int) {
	b, _ := json.Marshal(results.Control{Go: true})
	goLine := append(b, '\n')
	for _, i := range stage {
		if x.roles[i].Barrier {
			// A failed write means node is gone; its exit says why.
			_, _ = x.procs[i].p.Stdin().Write(goLine)
		}
	}
}

func (x *execution) isReady(i int) bool {
	_, ok := x.ready[x.roles[i].Target.Role]
	return ok
}

// next takes one update or timeout and returns the failure it means, if
// any.
func (x *execution) next() error {
	var u update
	select {
	case u = <-x.updates:
	case <-x.readyBy.C:
		for i, rl := range x.roles {
			if x.procs[i] != nil && !x.isReady(i) {
				return rl.Target.Errorf(role.Ready, "not ready within timeouts.ready (%s)", x.r.Plan.Timeouts.Ready)
			}
		}
		return nil
	case <-x.pointBy.C:
		runner := role.Target{Role: "runner", Label: "runner"} // the point's limits are the runner's
		return runner.Errorf(role.Run, "point timed out (timeouts.point %s)", x.r.Plan.Timeouts.Point)
	case <-x.ctx.Done():
		return ErrInterrupted
	}
	i, rep := u.role, x.reports[u.role]
	if u.exited {
		x.exited[i] = true
		rl := x.roles[i]
		if rl.Output == OutputStdout {
			rep.Output = x.procs[i].stdout.Bytes()
		}
		rep.CPU = x.procs[i].cpu
		if u.err == nil && x.gaveOutput(i) {
			return nil
		}
		return x.blame(i, errors.New(x.endedMessage(i, u.err)), diedOfCause(u.err))
	}
	switch ev := u.ev.(type) {
	case listening:
		x.ready[x.roles[i].Target.Role] = nil
	case *results.Started:
		rep.Started = ev
	case *results.Warning:
		x.r.warn(x.roles[i].Target, ev.Message)
	case *results.Error:
		return x.blame(i, &NodeError{Message: ev.Message, Code: ev.Code}, false)
	case *results.Ready:
		rep.Ready = ev
		x.path(i, ev.RDMAPath)
		if x.roles[i].Ready == OnReadyEvent {
			x.ready[x.roles[i].Target.Role] = ev
		}
	case *results.Result:
		rep.Result, x.resultAt = ev, time.Now()
		x.path(i, ev.RDMAPath)
	case *results.Interval:
		rep.Intervals = append(rep.Intervals, ev)
		if x.series != nil {
			x.series(x.roles[i], ev)
		}
	case *results.Done:
		rep.Done = ev
	}
	return nil
}

// gaveOutput reports whether role i, which exited cleanly, gave what its
// Output asks for: node's event, or for the other kinds the clean exit
// itself (a file report is read by collect).
func (x *execution) gaveOutput(i int) bool {
	rep := x.reports[i]
	switch x.roles[i].Output {
	case results.TypeResult:
		return rep.Result != nil
	case results.TypeDone:
		return rep.Done != nil
	}
	return true // OutputExit, OutputStdout, OutputFile: the clean exit
}

// phase is where role i stands: still preparing, or at work; and how a
// message says it ended there.
func (x *execution) phase(i int) (role.Phase, string) {
	switch {
	case x.roles[i].Ready != OnStart && !x.isReady(i):
		return role.Ready, "before ready"
	case x.roles[i].Output == results.TypeResult:
		return role.Run, "without a result"
	case x.roles[i].Tool != "":
		return role.Run, "before its report"
	}
	return role.Run, "before done"
}

// endedMessage says how role i ended too early: its exit, where it was,
// the last thing it said on stderr, and for a peer tool what that means
// when the tool's own words do not say (peer.Diagnose).
func (x *execution) endedMessage(i int, err error) string {
	_, when := x.phase(i)
	msg := exitDescription(programName(x.roles[i].Tool), err) + " " + when
	if last := x.procs[i].tail.lastLine(); last != "" {
		msg += ": " + last
	}
	if why := peer.Diagnose(x.roles[i].Tool, x.procs[i].tail.text()); why != "" {
		msg += " (" + why + ")"
	}
	return msg
}

// blame decides whom role i's failure belongs to. When a node is killed or
// cut off, its peers usually fail first, on the broken data connection
// ("read reply: EOF"), but the death is what the user must see: unless i
// itself died of an outside cause, each peer still running is given up to
// blameWindow to show that it died of one, and then it is blamed instead.
func (x *execution) blame(i int, cause error, external bool) error {
	if !external {
		deadline := time.Now().Add(blameWindow)
		for j, pr := range x.procs {
			if j == i || pr == nil || x.exited[j] {
				continue
			}
			select {
			case <-pr.gone:
			case <-time.After(time.Until(deadline)):
				continue
			}
			if diedOfCause(pr.waitErr) {
				phase, _ := x.phase(j)
				return x.roles[j].Target.Wrap(phase, errors.New(x.endedMessage(j, pr.waitErr)))
			}
		}
	}
	phase, _ := x.phase(i)
	return x.roles[i].Target.Wrap(phase, cause)
}

// path hands role i's RDMA path to the Runner's Path, if any.
func (x *execution) path(i int, p *results.RDMAPath) {
	if p != nil && x.r.Path != nil {
		x.r.Path(x.roles[i].Target, p)
	}
}

// NodeError is the error event node ended with: its message, and the code
// of a failure a program acts on (results.ErrorCode*), such as the
// verified ODP read runner check and exec judge a server's ODP by.
type NodeError struct {
	Message, Code string
}

func (e *NodeError) Error() string { return e.Message }

// ErrorCode is the code of the node error in err's chain, or "".
func ErrorCode(err error) string {
	var ne *NodeError
	if errors.As(err, &ne) {
		return ne.Code
	}
	return ""
}

// stopAll stops every role that was started, all at once, and records
// the ones reaped.
func (x *execution) stopAll() {
	x.readyBy.Stop()
	x.pointBy.Stop()
	close(x.abandon)
	grace := x.r.Grace
	if grace == 0 {
		grace = 2 * time.Second
	}
	var wg sync.WaitGroup
	for _, pd := range x.pending {
		if pd != nil { // nothing once its role started
			wg.Add(1)
			go func() { defer wg.Done(); _ = pd.Close() }()
		}
	}
	for _, pr := range x.procs {
		if pr == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr.stop(grace)
			if pr.reaped() && pr.started != nil {
				x.r.markExited(pr.target, pr.started)
			}
		}()
	}
	wg.Wait()
}
