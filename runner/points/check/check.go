// Package check is runner check's table: one row per role, filled from
// its host (the login and a command, the clock, the facts judged by
// runner/points/preflight, the peer programs) and from the probes (runner/points/probe),
// with every problem that would make the plan fail and its hint. It never
// prints to people: the table is data (Table.Write), and the command says
// the warnings and problems in its own voice.
package check

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/files/manifest"
	"rdmasweep/runner/hint"
	"rdmasweep/runner/hosts/hostfacts"
	"rdmasweep/runner/hosts/hostset"
	"rdmasweep/runner/hosts/role"
	"rdmasweep/runner/points/preflight"
	"rdmasweep/runner/points/probe"
)

// Row is one line of the table: one role on its host.
type Row struct {
	Role, Host      string
	SSH             string
	Verdict         preflight.Verdict // its Warnings are the row's
	DataPath, Probe string
	ODPProbe        string
	Clock           string // the host's clock against the runner's
	State           string // the host's setup where it changes a result (hostState)
	Label           string // "server (local)", for messages
	Problems        []preflight.Problem
	Programs        map[string]string // a cell per peer workload
	kernel          string            // uname -r, for the ODP probe's hint
	// choice is the device, port and GID node would use for the role's
	// connection, for ib_read_bw beside it (Calibrate).
	choice *results.DeviceChoice
}

func (row *Row) has(check string) bool {
	return slices.ContainsFunc(row.Problems, func(pr preflight.Problem) bool { return pr.Check == check })
}

// Table is one check: its plan, its rows, and its hosts once reached.
type Table struct {
	Rows []*Row // in the plan's role order
	// Workloads are the peer workloads the points use: a column each.
	Workloads []string
	p         *plan.Plan
	pts       []plan.Point
	set       *hostset.Set
	sums      []string // each role's node's SHA-256
}

// Refused is why runner check cannot judge p, or nil: its probes pair
// servers with clients, which a pairwise or ring plan has not.
func Refused(p *plan.Plan) error {
	if p.IsPool() {
		return hint.Wrap(fmt.Errorf("%s: runner check does not probe pairwise and ring plans yet", p.Path), "runner exec of the plan reaches every pool host once and names a host it loses in its rows")
	}
	return nil
}

// New is the table of plan p before anything is known: every cell "-".
func New(p *plan.Plan, pts []plan.Point) *Table {
	c := &Table{p: p, pts: pts}
	for _, s := range p.Hosts.Roles() {
		c.Rows = append(c.Rows, &Row{
			Role: s.Name, Host: s.Host.Address, Label: s.Name + " (" + s.Host.Address + ")",
			SSH: "-", DataPath: "-", Probe: "-", ODPProbe: "-", Clock: "-", State: "-",
			Verdict: preflight.Verdict{System: "-", Node: "-", RDMA: "-", File: "-", Memory: "-"},
		})
	}
	return c
}

// Reached records that the plan's hosts were reached as s: each row is
// named by its host as the Set names it.
func (c *Table) Reached(s *hostset.Set) {
	c.set = s
	for i, row := range c.Rows {
		row.Host, row.Label = s.Roles[i].Host.Name(), s.Roles[i].Label
	}
}

// Probeable reports whether every host runs commands and has node in
// place, which the probes need.
func (c *Table) Probeable() bool {
	for _, row := range c.Rows {
		if row.has("ssh") || row.has("system") || row.has("node") {
			return false
		}
	}
	return true
}

// ConnectFailed files connect's error under the role that failed first.
func (c *Table) ConnectFailed(err error) {
	h := hint.Of(err)
	if h == "" {
		h = "check the address, user and key with: ssh -v HOST; ssh.connect_timeout bounds the wait"
	}
	row, msg, check := c.Rows[0], err.Error(), "connect"
	if re := role.As(err); re != nil {
		msg = re.Err.Error()
		for _, rw := range c.Rows {
			if rw.Role == re.Role {
				row = rw
			}
		}
		if re.Phase == role.Facts {
			check = "system" // the login worked; the host could not say what it is
		}
	}
	if check == "system" {
		row.Verdict.System = "FAIL"
	} else {
		row.SSH = "FAIL"
	}
	row.Problems = append(row.Problems, preflight.Problem{Check: check, Msg: msg, Hint: h, Whole: errors.Is(err, hostfacts.ErrNoShell)})
}

// Judge fills every row from its host at once: its clock, its facts
// judged against what the plan needs of it, and a cell per peer workload
// (Workloads). Each row records its own problems; only a local node
// binary that cannot be read fails.
func (c *Table) Judge(ctx context.Context) error {
	// Each host's node is the one of the build for its architecture.
	sums := make([]string, len(c.set.Roles))
	for i, t := range c.set.Roles {
		var err error
		if sums[i], err = fileSHA256(c.set.Nodes[t.Host].Path); err != nil {
			return fmt.Errorf("node binary: %w", err)
		}
	}
	c.Workloads, c.sums = preflight.PeerWorkloads(c.pts), sums
	needs := preflight.Needs(c.p, c.pts, sums)
	_ = c.set.EachRole(func(i int, t role.Target) error {
		if clock, ok := c.Rows[i].readClock(ctx, t); ok {
			c.judgeRole(ctx, c.Rows[i], t, needs[i], clock)
		}
		return nil
	})
	return nil
}

// readClock fills the row's CLOCK and SSH cells from one command on the
// host; ok is false when the host runs no command (its problem filed).
func (row *Row) readClock(ctx context.Context, t role.Target) (hostfacts.Clock, bool) {
	clock, err := hostfacts.ReadClock(ctx, t.Host)
	switch {
	case errors.Is(err, hostfacts.ErrUnreadableClock):
		row.Clock = "unknown"
		err = nil
	case err == nil && t.Host.Name() == "local":
		row.Clock = "local"
	case err == nil:
		row.Clock = clock.String()
		if clock.Disagrees(preflight.ClockLimit) {
			row.Clock = "WARN " + row.Clock
		}
	}
	if err != nil {
		row.SSH = "FAIL"
		h := hint.Of(err) // e.g. sshd's MaxSessions
		if h == "" {
			h = "the host accepts the login but cannot run commands: check the user's shell"
		}
		row.Problems = append(row.Problems, preflight.Problem{Check: "ssh", Msg: "run a command: " + err.Error(), Hint: h})
		return clock, false
	}
	kind := "ok"
	if t.Host.Name() == "local" {
		kind = "local"
	}
	row.SSH = fmt.Sprintf("%s %.2fms", kind, float64(clock.RTT)/float64(time.Millisecond))
	return clock, true
}

// judgeRole fills the row's verdict and STATE from the host's facts, and
// its peer program cells.
func (c *Table) judgeRole(ctx context.Context, row *Row, t role.Target, need preflight.Need, clock hostfacts.Clock) {
	file := ""
	if need.Role == "server" {
		file = c.p.Base.Str(param.File)
	}
	facts, err := hostfacts.Collect(ctx, t.Host, hostfacts.Query{NodePath: t.NodePath, File: file, Devices: preflight.DevicesArgs(c.p, need)})
	if err != nil {
		h := hint.Of(err)
		if h == "" {
			h = "check the host has a POSIX sh"
		}
		row.Verdict.System = "FAIL"
		row.Problems = append(row.Problems, preflight.Problem{Check: "system", Msg: err.Error(), Hint: h, Whole: true})
		return
	}
	row.Verdict = preflight.Judge(facts, need)
	if strings.HasPrefix(row.Clock, "WARN") {
		row.Verdict.Warnings = append(row.Verdict.Warnings, preflight.ClockWarning(clock))
	}
	state, warnings := hostState(facts, need)
	row.State = state
	row.Verdict.Warnings = append(row.Verdict.Warnings, warnings...)
	row.Problems = append(row.Problems, row.Verdict.Problems...)
	row.kernel, row.choice = facts.Kernel, facts.Choice
	cells, problems := preflight.ProgramCells(ctx, t, c.pts)
	row.Programs = cells
	row.Problems = append(row.Problems, problems...)
}

// ProbeAll runs the probes: the tcp data path, for rdma plans one RDMA
// READ, and for plans with odp points the ODP probe. Their logs are kept
// when one failed.
func (c *Table) ProbeAll(ctx context.Context, warn func(msg string)) (keptLogs string, err error) {
	logDir, err := os.MkdirTemp("", "rdmasweep-check-")
	if err != nil {
		return "", fmt.Errorf("create log directory: %w", err)
	}
	env := probe.Env{Plan: c.p, Set: c.set, LogDir: logDir, Warn: warn}
	transports := []string{results.TransportTCP}
	if c.p.Transport() == results.TransportRDMA {
		transports = append(transports, results.TransportRDMA)
	}
	keepLogs := false
	for _, transport := range transports {
		failed, err := c.probePaths(ctx, env, transport)
		if err != nil {
			return "", err
		}
		keepLogs = keepLogs || failed
	}
	if _, ok := probe.FirstODP(c.pts); ok && c.p.Transport() == results.TransportRDMA {
		keepLogs = c.odpProbes(ctx, env) || keepLogs
	}
	if keepLogs {
		return logDir, nil
	}
	os.RemoveAll(logDir)
	return "", nil
}

// rdmaBlocked reports whether a row has an rdma problem, which makes an
// RDMA probe pointless.
func (c *Table) rdmaBlocked() bool {
	return slices.ContainsFunc(c.Rows, func(row *Row) bool { return row.has(results.TransportRDMA) })
}

// probePaths fills the DATA_PATH (tcp) or RDMA_PROBE cells: each client
// reads from its server, and a server's cell is its first client's. It
// reports whether a probe failed.
func (c *Table) probePaths(ctx context.Context, env probe.Env, transport string) (failed bool, err error) {
	cellOf := func(row *Row) *string {
		if transport == results.TransportTCP {
			return &row.DataPath
		}
		return &row.Probe
	}
	if transport == results.TransportRDMA && c.rdmaBlocked() {
		for _, row := range c.Rows {
			row.Probe = "skipped"
		}
		return false, nil
	}
	for _, pair := range preflight.Pairs(c.p) {
		cell, pr := env.Path(ctx, c.pts[0], pair, transport)
		if err := context.Cause(ctx); err != nil {
			return failed, err
		}
		for _, row := range c.Rows {
			switch {
			case row.Role == pair.Client.Name:
				if pr != nil { // the client reads: its row holds what failed
					failed = true
					row.Problems = append(row.Problems, *pr)
				}
				*cellOf(row) = cell
			case row.Role == pair.Server.Name && *cellOf(row) == "-":
				*cellOf(row) = cell
			}
		}
	}
	return failed, nil
}

// odpProbes fills the ODP_PROBE cells: one probe per server that serves
// odp points and advertises ODP. It reports whether a probe failed (the
// logs are then kept).
func (c *Table) odpProbes(ctx context.Context, env probe.Env) (failed bool) {
	pt, _ := probe.FirstODP(c.pts)
	trust := c.p.Base.Bool(param.TrustODP)
	byRole := map[string]*Row{}
	for _, row := range c.Rows {
		byRole[row.Role] = row
	}
	for _, pair := range probe.ODPServers(c.p) {
		srv, cli := byRole[pair.Server.Name], byRole[pair.Client.Name]
		set := func(cell string) {
			srv.ODPProbe = cell
			if cli.ODPProbe == "-" {
				cli.ODPProbe = cell
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
				srv.Verdict.Warnings = append(srv.Verdict.Warnings, "ODP returned wrong data to a verified read; rdma.trust_odp lets exec run odp points anyway: "+res.Message)
				continue
			}
			set("FAIL wrong data")
			srv.Problems = append(srv.Problems, preflight.Problem{Check: "odp probe", Msg: res.Message, Hint: probe.ODPHint(res.Kernel)})
		default:
			failed = true
			set("FAIL")
			srv.Problems = append(srv.Problems, preflight.Problem{Check: "odp probe", Msg: res.Message,
				Hint: "registering with ODP or reading through it failed (the RDMA_PROBE column tells whether pinned works); registration: pinned avoids ODP"})
		}
	}
	return failed
}

// Write prints the table, with a column per peer workload the plan uses.
func (c *Table) Write(w io.Writer) error {
	rows, workloads := c.Rows, c.Workloads
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "ROLE\tHOST\tSSH\tSYSTEM\tNODE\tRDMA\tFILE\tMEMORY\tDATA_PATH\tRDMA_PROBE\tODP_PROBE\tCLOCK\tSTATE"
	for _, w := range workloads {
		head += "\t" + strings.ToUpper(w)
	}
	fmt.Fprintln(tw, head)
	for _, r := range rows {
		v := r.Verdict
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", r.Role, r.Host, r.SSH, v.System, v.Node, v.RDMA, v.File, v.Memory, r.DataPath, r.Probe, r.ODPProbe, r.Clock, r.State)
		for _, w := range workloads {
			cell := r.Programs[w]
			if cell == "" {
				cell = "-"
			}
			fmt.Fprintf(tw, "\t%s", cell)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func fileSHA256(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
