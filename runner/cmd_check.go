package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"rdmasweep/plan"
	"rdmasweep/runner/hint"
	"rdmasweep/runner/hostfacts"
	"rdmasweep/runner/hostset"
	"rdmasweep/runner/manifest"
	"rdmasweep/runner/preflight"
	"rdmasweep/runner/probe"
	"rdmasweep/runner/role"
)

// checkOptions are runner check's: the plan flags alone.
type checkOptions struct{ planOptions }

var checkCommand = &command{
	name: "check", args: "[flags] [PLAN]",
	help: "  check [PLAN]    connect and deploy, check both hosts and the data path;\n                  exit 1 with a hint per problem",
	flags: func(fs *flag.FlagSet) func(context.Context, globals, []string) error {
		var o checkOptions
		o.addFlags(fs)
		return func(ctx context.Context, g globals, args []string) error { return runCheck(ctx, o, g, args) }
	},
}

// checkRow is one line of the check table: one role on its host.
type checkRow struct {
	role, host      string
	ssh             string
	verdict         preflight.Verdict
	dataPath, probe string
	odpProbe        string
	clock           string // the host's clock against the runner's
	label           string // "server (local)", for messages
	problems        []preflight.Problem
	programs        map[string]string // a cell per peer workload
	kernel          string            // uname -r, for the ODP probe's hint
}

func (row *checkRow) has(check string) bool {
	return slices.ContainsFunc(row.problems, func(pr preflight.Problem) bool { return pr.Check == check })
}

// checkRun is one check: its plan, its table, and its hosts once reached.
type checkRun struct {
	p    *plan.Plan
	pts  []plan.Point
	rows []*checkRow // in the plan's role order
	set  *hostset.Set
}

// runCheck is `runner check PLAN`: it connects to every host (deploying
// node, as exec does), judges what each host has against what the plan
// needs, and proves the data path (and for rdma plans one RDMA READ) with
// node itself. It prints one table row per role on stdout and every
// problem with a hint on stderr; any problem makes it fail (exit 1).
func runCheck(ctx context.Context, o checkOptions, g globals, args []string) error {
	_, p, pts, err := loadPlanArg(ctx, g, o.planOptions, args)
	if err != nil {
		return err
	}
	planWarnings(g.ui, p, pts)
	c := &checkRun{p: p, pts: pts}
	for _, s := range p.Hosts.Roles() {
		c.rows = append(c.rows, &checkRow{
			role: s.Name, host: s.Host.Address, label: s.Name + " (" + s.Host.Address + ")",
			ssh: "-", dataPath: "-", probe: "-", odpProbe: "-", clock: "-",
			verdict: preflight.Verdict{System: "-", Node: "-", RDMA: "-", File: "-", Memory: "-"},
		})
	}
	set, err := hostset.Connect(ctx, p, hostOptions(p, g.ui))
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return cause
		}
		c.connectFailed(err)
		return reportCheck(g.stdout, g.ui, c.rows, nil)
	}
	defer set.Close()
	c.set = set
	for i, row := range c.rows {
		row.host, row.label = set.Roles[i].Host.Name(), set.Roles[i].Label
	}
	if err := c.judgeHosts(ctx); err != nil {
		return err
	}
	workloads := preflight.PeerWorkloads(pts)
	if err := context.Cause(ctx); err != nil {
		return err
	}
	// The probes need node in place on every host.
	for _, row := range c.rows {
		if row.has("ssh") || row.has("system") || row.has("node") {
			return reportCheck(g.stdout, g.ui, c.rows, workloads)
		}
	}
	if err := c.probeAll(ctx, g.ui); err != nil {
		return err
	}
	return reportCheck(g.stdout, g.ui, c.rows, workloads)
}

// connectFailed files connect's error under the role that failed first.
func (c *checkRun) connectFailed(err error) {
	h := hint.Of(err)
	if h == "" {
		h = "check the address, user and key with: ssh -v HOST; ssh.connect_timeout bounds the wait"
	}
	row, msg, check := c.rows[0], err.Error(), "connect"
	if re := role.As(err); re != nil {
		msg = re.Err.Error()
		for _, rw := range c.rows {
			if rw.role == re.Role {
				row = rw
			}
		}
		if re.Phase == role.Facts {
			check = "system" // the login worked; the host could not say what it is
		}
	}
	if check == "system" {
		row.verdict.System = "FAIL"
	} else {
		row.ssh = "FAIL"
	}
	row.problems = append(row.problems, preflight.Problem{Check: check, Msg: msg, Hint: h, Whole: errors.Is(err, hostfacts.ErrNoShell)})
}

// judgeHosts fills every row from its host at once: its clock, its facts
// judged against what the plan needs of it, and its peer programs. Each
// row records its own problems; only a bad node binary here fails.
func (c *checkRun) judgeHosts(ctx context.Context) error {
	// Each host's node is the one of the build for its architecture.
	sums := make([]string, len(c.set.Roles))
	for i, t := range c.set.Roles {
		var err error
		if sums[i], err = fileSHA256(c.set.Nodes[t.Host].Path); err != nil {
			return fmt.Errorf("node binary: %w", err)
		}
	}
	needs := preflight.Needs(c.p, c.pts, sums)
	_ = c.set.EachRole(func(i int, t role.Target) error {
		if clock, ok := c.rows[i].readClock(ctx, t); ok {
			c.judgeRole(ctx, c.rows[i], t, needs[i], clock)
		}
		return nil
	})
	return nil
}

// readClock fills the row's CLOCK and SSH cells from one command on the
// host; ok is false when the host runs no command (its problem filed).
func (row *checkRow) readClock(ctx context.Context, t role.Target) (hostfacts.Clock, bool) {
	clock, err := hostfacts.ReadClock(ctx, t.Host)
	switch {
	case errors.Is(err, hostfacts.ErrUnreadableClock):
		row.clock = "unknown"
		err = nil
	case err == nil && t.Host.Name() == "local":
		row.clock = "local"
	case err == nil:
		row.clock = clock.String()
		if clock.Disagrees(preflight.ClockLimit) {
			row.clock = "WARN " + row.clock
		}
	}
	if err != nil {
		row.ssh = "FAIL"
		h := hint.Of(err) // e.g. sshd's MaxSessions
		if h == "" {
			h = "the host accepts the login but cannot run commands: check the user's shell"
		}
		row.problems = append(row.problems, preflight.Problem{Check: "ssh", Msg: "run a command: " + err.Error(), Hint: h})
		return clock, false
	}
	kind := "ok"
	if t.Host.Name() == "local" {
		kind = "local"
	}
	row.ssh = fmt.Sprintf("%s %.2fms", kind, float64(clock.RTT)/float64(time.Millisecond))
	return clock, true
}

// judgeRole fills the row's verdict from the host's facts, and its peer
// program cells.
func (c *checkRun) judgeRole(ctx context.Context, row *checkRow, t role.Target, need preflight.Need, clock hostfacts.Clock) {
	file := ""
	if need.Role == "server" {
		file = c.p.Base.Str("file")
	}
	facts, err := hostfacts.Collect(ctx, t.Host, hostfacts.Query{NodePath: t.NodePath, File: file, Devices: preflight.DevicesArgs(c.p, need)})
	if err != nil {
		h := hint.Of(err)
		if h == "" {
			h = "check the host has a POSIX sh"
		}
		row.verdict.System = "FAIL"
		row.problems = append(row.problems, preflight.Problem{Check: "system", Msg: err.Error(), Hint: h, Whole: true})
		return
	}
	row.verdict = preflight.Judge(facts, need)
	if strings.HasPrefix(row.clock, "WARN") {
		row.verdict.Warnings = append(row.verdict.Warnings, preflight.ClockWarning(clock))
	}
	row.problems = append(row.problems, row.verdict.Problems...)
	row.kernel = facts.Kernel
	cells, problems := preflight.ProgramCells(ctx, t, c.pts)
	row.programs = cells
	row.problems = append(row.problems, problems...)
}

// probeAll runs the probes: the tcp data path, for rdma plans one RDMA
// READ, and for plans with odp points the ODP probe. Their logs are kept
// when one failed.
func (c *checkRun) probeAll(ctx context.Context, ui *voice) error {
	logDir, err := os.MkdirTemp("", "rdmasweep-check-")
	if err != nil {
		return fmt.Errorf("create log directory: %w", err)
	}
	env := probe.Env{Plan: c.p, Set: c.set, LogDir: logDir, Warn: func(msg string) { ui.warnOnce("%s", msg) }}
	transports := []string{"tcp"}
	if c.p.Transport() == "rdma" {
		transports = append(transports, "rdma")
	}
	keepLogs := false
	for _, transport := range transports {
		failed, err := c.probePaths(ctx, env, transport)
		if err != nil {
			return err
		}
		keepLogs = keepLogs || failed
	}
	if _, ok := probe.FirstODP(c.pts); ok && c.p.Transport() == "rdma" {
		keepLogs = c.odpProbes(ctx, env) || keepLogs
	}
	if keepLogs {
		ui.infof("probe logs in %s", logDir)
	} else {
		os.RemoveAll(logDir)
	}
	return nil
}

// rdmaBlocked reports whether a row has an rdma problem, which makes an
// RDMA probe pointless.
func (c *checkRun) rdmaBlocked() bool {
	return slices.ContainsFunc(c.rows, func(row *checkRow) bool { return row.has("rdma") })
}

// probePaths fills the DATA_PATH (tcp) or RDMA_PROBE cells: each client
// reads from its server, and a server's cell is its first client's. It
// reports whether a probe failed.
func (c *checkRun) probePaths(ctx context.Context, env probe.Env, transport string) (failed bool, err error) {
	cellOf := func(row *checkRow) *string {
		if transport == "tcp" {
			return &row.dataPath
		}
		return &row.probe
	}
	if transport == "rdma" && c.rdmaBlocked() {
		for _, row := range c.rows {
			row.probe = "skipped"
		}
		return false, nil
	}
	for _, pair := range preflight.Pairs(c.p) {
		cell, pr := env.Path(ctx, c.pts[0], pair, transport)
		if err := context.Cause(ctx); err != nil {
			return failed, err
		}
		for _, row := range c.rows {
			switch {
			case row.role == pair.Client.Name:
				if pr != nil { // the client reads: its row holds what failed
					failed = true
					row.problems = append(row.problems, *pr)
				}
				*cellOf(row) = cell
			case row.role == pair.Server.Name && *cellOf(row) == "-":
				*cellOf(row) = cell
			}
		}
	}
	return failed, nil
}

// odpProbes fills the ODP_PROBE cells: one probe per server that serves
// odp points and advertises ODP. It reports whether a probe failed (the
// logs are then kept).
func (c *checkRun) odpProbes(ctx context.Context, env probe.Env) (failed bool) {
	pt, _ := probe.FirstODP(c.pts)
	trust := c.p.Base.Bool("trust_odp")
	byRole := map[string]*checkRow{}
	for _, row := range c.rows {
		byRole[row.role] = row
	}
	for _, pair := range probe.ODPServers(c.p) {
		srv, cli := byRole[pair.Server.Name], byRole[pair.Client.Name]
		set := func(cell string) {
			srv.odpProbe = cell
			if cli.odpProbe == "-" {
				cli.odpProbe = cell
			}
		}
		switch {
		case srv.has("odp"):
			set("no ODP")
			continue
		case c.rdmaBlocked():
			set("skipped")
			continue
		}
		res, ok := env.ODP(ctx, pt, pair, srv.kernel)
		if !ok {
			set("interrupted")
			return failed
		}
		switch res.Result {
		case manifest.ODPVerified:
			set("ok verified")
		case manifest.ODPWrongData:
			failed = true
			if trust {
				set("FAIL wrong data (trusted)")
				srv.verdict.Warnings = append(srv.verdict.Warnings, "ODP returned wrong data to a verified read; rdma.trust_odp lets exec run odp points anyway: "+res.Message)
				continue
			}
			set("FAIL wrong data")
			srv.problems = append(srv.problems, preflight.Problem{Check: "odp probe", Msg: res.Message, Hint: probe.ODPHint(res.Kernel)})
		default:
			failed = true
			set("FAIL")
			srv.problems = append(srv.problems, preflight.Problem{Check: "odp probe", Msg: res.Message,
				Hint: "registering with ODP or reading through it failed (the RDMA_PROBE column tells whether pinned works); registration: pinned avoids ODP"})
		}
	}
	return failed
}

// reportCheck prints the table on stdout, with a column per peer workload
// the plan uses, and the problems on stderr, and fails when there is any
// problem.
func reportCheck(stdout io.Writer, ui *voice, rows []*checkRow, workloads []string) error {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	head := "ROLE\tHOST\tSSH\tSYSTEM\tNODE\tRDMA\tFILE\tMEMORY\tDATA_PATH\tRDMA_PROBE\tODP_PROBE\tCLOCK"
	for _, w := range workloads {
		head += "\t" + strings.ToUpper(w)
	}
	fmt.Fprintln(tw, head)
	for _, r := range rows {
		v := r.verdict
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", r.role, r.host, r.ssh, v.System, v.Node, v.RDMA, v.File, v.Memory, r.dataPath, r.probe, r.odpProbe, r.clock)
		for _, w := range workloads {
			cell := r.programs[w]
			if cell == "" {
				cell = "-"
			}
			fmt.Fprintf(tw, "\t%s", cell)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		for _, w := range r.verdict.Warnings {
			ui.warnf("%s: %s", r.label, w)
		}
	}
	n := 0
	for _, r := range rows {
		for _, pr := range r.problems {
			n++
			if pr.Whole {
				ui.errorf("%s: %s", r.label, pr.Msg)
			} else {
				ui.errorf("%s: %s: %s", r.label, pr.Check, pr.Msg)
			}
			ui.hintf("%s", pr.Hint)
		}
	}
	if n > 0 {
		return fmt.Errorf("%s would make the plan fail", plural(n, "problem"))
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
