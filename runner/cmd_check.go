package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/hostfacts"
	"rdmasweep/runner/point"
	"rdmasweep/runner/preflight"
	"rdmasweep/runner/role"
)

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

// runCheck is `runner check PLAN`: it connects to both hosts (deploying
// node, as exec does), judges what each host has against what the plan
// needs, and proves the data path (and for rdma plans one RDMA READ) with
// node itself. It prints one table row per role on stdout and every
// problem with a hint on stderr; any problem makes it fail (exit 1).
func runCheck(ctx context.Context, args []string, stdout io.Writer, ui *voice) error {
	fs := newFlagSet("check", "[flags] [PLAN]", ui.w)
	var o planOptions
	_, p, pts, err := planCommand(ctx, fs, &o, args)
	if err != nil {
		return err
	}
	planWarnings(ui, p, pts)
	if p.IsPool() { // its probes pair servers with clients, which a pool has not
		return withHint(fmt.Errorf("%s: runner check does not probe pairwise and ring plans yet", p.Path), "runner exec of the plan reaches every pool host once and names a host it loses in its rows")
	}

	var rows []*checkRow
	for _, s := range p.Hosts.Roles() {
		rows = append(rows, &checkRow{
			role: s.Name, host: s.Host.Address, label: s.Name + " (" + s.Host.Address + ")",
			ssh: "-", dataPath: "-", probe: "-", odpProbe: "-", clock: "-",
			verdict: preflight.Verdict{System: "-", Node: "-", RDMA: "-", File: "-", Memory: "-"},
		})
	}
	r, err := connect(ctx, p, ui)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return cause
		}
		hint := "check the address, user and key with: ssh -v HOST; ssh.connect_timeout bounds the wait"
		var h hinted
		if errors.As(err, &h) {
			hint = h.Hint()
		}
		// connect's error names the role that failed first.
		row, msg, check := rows[0], err.Error(), "connect"
		if re := role.As(err); re != nil {
			msg = re.Err.Error()
			for _, rw := range rows {
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
		row.problems = append(row.problems, preflight.Problem{Check: check, Msg: msg, Hint: hint, Whole: errors.Is(err, hostfacts.ErrNoShell)})
		return reportCheck(stdout, ui, rows, nil)
	}
	defer r.close()
	for i, row := range rows {
		row.host, row.label = r.list[i].Host.Name(), r.list[i].Label
	}

	// Each host's node is the one of the build for its architecture.
	sums := make([]string, len(r.list))
	for i, t := range r.list {
		if sums[i], err = fileSHA256(r.nodes[t.Host].Path); err != nil {
			return fmt.Errorf("node binary: %w", err)
		}
	}
	needs := checkNeeds(p, pts, sums)
	_ = parallel(len(rows), func(i int) error { // each row records its own problems
		row, t := rows[i], r.list[i]
		clock, err := hostfacts.ReadClock(ctx, t.Host)
		switch {
		case errors.Is(err, hostfacts.ErrUnreadableClock):
			row.clock = "unknown"
			err = nil
		case err == nil && t.Host.Name() == "local":
			row.clock = "local"
		case err == nil:
			row.clock = clock.String()
			if clock.Disagrees(clockLimit) {
				row.clock = "WARN " + row.clock
			}
		}
		if err != nil {
			row.ssh = "FAIL"
			hint := "the host accepts the login but cannot run commands: check the user's shell"
			if h := hinted(nil); errors.As(err, &h) {
				hint = h.Hint() // e.g. sshd's MaxSessions
			}
			row.problems = append(row.problems, preflight.Problem{Check: "ssh", Msg: "run a command: " + err.Error(), Hint: hint})
			return nil
		}
		kind := "ok"
		if t.Host.Name() == "local" {
			kind = "local"
		}
		row.ssh = fmt.Sprintf("%s %.2fms", kind, float64(clock.RTT)/float64(time.Millisecond))
		file := ""
		if needs[i].Role == "server" {
			file = p.Base.Str("file")
		}
		facts, err := hostfacts.Collect(ctx, t.Host, hostfacts.Query{NodePath: t.NodePath, File: file, Devices: devicesArgs(p, needs[i])})
		if err != nil {
			hint := "check the host has a POSIX sh"
			var h hinted
			if errors.As(err, &h) {
				hint = h.Hint()
			}
			row.verdict.System = "FAIL"
			row.problems = append(row.problems, preflight.Problem{Check: "system", Msg: err.Error(), Hint: hint, Whole: true})
			return nil
		}
		row.verdict = preflight.Judge(facts, needs[i])
		if strings.HasPrefix(row.clock, "WARN") {
			row.verdict.Warnings = append(row.verdict.Warnings, clockWarning(clock))
		}
		row.problems = append(row.problems, row.verdict.Problems...)
		row.kernel = facts.Kernel
		cells, problems := programCells(ctx, t, pts)
		row.programs = cells
		row.problems = append(row.problems, problems...)
		return nil
	})
	workloads := peerWorkloads(pts)
	if err := context.Cause(ctx); err != nil {
		return err
	}

	// The probes need node in place on both hosts.
	for _, row := range rows {
		for _, pr := range row.problems {
			if pr.Check == "ssh" || pr.Check == "system" || pr.Check == "node" {
				return reportCheck(stdout, ui, rows, workloads)
			}
		}
	}
	logDir, err := os.MkdirTemp("", "rdmasweep-check-")
	if err != nil {
		return fmt.Errorf("create log directory: %w", err)
	}
	keepLogs := false
	probes := []string{"tcp"}
	if p.Transport() == "rdma" {
		probes = append(probes, "rdma")
	}
	for _, transport := range probes {
		if transport == "rdma" && rdmaBlocked(rows) {
			for _, row := range rows {
				row.probe = "skipped"
			}
			continue
		}
		// Each client reads from its server; a server's cell is its first
		// client's.
		for _, pair := range probePairs(p) {
			cell, pr := probe(ctx, p, pts[0], r, pair, transport, logDir, ui)
			if err := context.Cause(ctx); err != nil {
				return err
			}
			for _, row := range rows {
				switch {
				case row.role == pair.client.Name:
					if pr != nil { // the client reads: its row holds what failed
						keepLogs = true
						row.problems = append(row.problems, *pr)
					}
				case row.role == pair.server.Name && (transport == "tcp" && row.dataPath == "-" || transport == "rdma" && row.probe == "-"):
				default:
					continue
				}
				if transport == "tcp" {
					row.dataPath = cell
				} else {
					row.probe = cell
				}
			}
		}
	}
	if p.Transport() == "rdma" && planUsesODP(pts) {
		if odpProbes(ctx, p, pts, r, rows, logDir, ui) {
			keepLogs = true
		}
	}
	if keepLogs {
		ui.infof("probe logs in %s", logDir)
	} else {
		os.RemoveAll(logDir)
	}
	return reportCheck(stdout, ui, rows, workloads)
}

// checkNeeds says what the plan asks of each role's host, over all
// points, in the plan's role order; nodeSums are the sha256 of the node
// each role's host got, in the same order.
func checkNeeds(p *plan.Plan, pts []plan.Point, nodeSums []string) []preflight.Need {
	var needs []preflight.Need
	server := map[string]string{} // each role's server
	for _, pair := range probePairs(p) {
		server[pair.client.Name], server[pair.server.Name] = pair.server.Name, pair.server.Name
	}
	for i, s := range p.Hosts.Roles() {
		// The server's role is its Need's role: the judge asks of it what
		// a server needs.
		kind := "client"
		if server[s.Name] == s.Name {
			kind = "server"
		}
		n := preflight.Need{Role: kind, Transport: p.Transport(), NodeSHA256: nodeSums[i], CPUs: s.Host.CPUs, Connect: p.Base.Str("connect")}
		h := s.Host.Params
		n.Device, n.IBPort = h.Str("device"), max(int(h.Int("ib_port")), 0)
		if g := int(h.Int("gid_index")); g >= 0 {
			n.GIDIndex = &g
		}
		for _, pt := range pts {
			for _, rl := range pt.Hosts.Roles() {
				if rl.Name == server[s.Name] {
					n.DataAddress = rl.Host.DataAddress // resolved by Expand
				}
			}
			v := pt.Values
			n.MaxBlock = max(n.MaxBlock, v.Int("block_size"))
			n.MaxRdAtomic = max(n.MaxRdAtomic, int(v.Int("max_rd_atomic")))
			if qps := v.Int("qps"); qps > 0 {
				n.MaxPerQP = max(n.MaxPerQP, int((v.Int("queue_depth")+qps-1)/qps))
			}
			if kind != "server" {
				continue
			}
			n.Create = v.Bool("create")
			n.FileSize = max(n.FileSize, v.Int("file_size"))
			n.Pinned = n.Pinned || v.Str("registration") == "pinned"
			n.ODP = n.ODP || v.Str("registration") == "odp"
		}
		needs = append(needs, n)
	}
	return needs
}

// devicesArgs asks node devices, on an rdma plan, which device, port and
// GID the role's connection would use, with the plan's device, ib_port
// and gid_index: over the source address the kernel picks to reach the
// server's data address, which on a client is what node read uses and on
// the server is that address itself (the one node serve listens on; a
// name is resolved as serve resolves it).
func devicesArgs(p *plan.Plan, n preflight.Need) []string {
	if p.Transport() != "rdma" || n.DataAddress == "" {
		return nil
	}
	args := []string{"--route-to", n.DataAddress}
	if n.Device != "" {
		args = append(args, "--rdma-device", n.Device)
	}
	if n.IBPort > 0 {
		args = append(args, "--ib-port", strconv.Itoa(n.IBPort))
	}
	if n.GIDIndex != nil {
		args = append(args, "--gid-index", strconv.Itoa(*n.GIDIndex))
	}
	return args
}

func rdmaBlocked(rows []*checkRow) bool {
	return slices.ContainsFunc(rows, func(row *checkRow) bool { return hasProblem(row, "rdma") })
}

// probePair is a client and the server it reads: with fan-in the one
// server, with pairs its own.
type probePair struct {
	server, client plan.Role
	si, ci         int // their indexes in Hosts.Servers and Hosts.Clients
}

func probePairs(p *plan.Plan) []probePair {
	roles := p.Hosts.Roles()
	servers, clients := roles[:len(p.Hosts.Servers)], roles[len(p.Hosts.Servers):]
	var out []probePair
	for i, c := range clients {
		si := 0
		if len(servers) == len(clients) && p.Base.Str("topology") == "pairs" {
			si = i
		}
		out = append(out, probePair{servers[si], c, si, i})
	}
	return out
}

// probe runs one 4 KiB read of a small temporary file from pair's client
// to its server with the given transport (probeRead), and returns the
// table cell and, when the read failed, the problem.
func probe(ctx context.Context, p *plan.Plan, pt plan.Point, r *roles, pair probePair, transport, logDir string, ui *voice) (string, *preflight.Problem) {
	row, ok := probeRead(ctx, p, pt, r, pair, transport, nil, logDir, ui)
	if !ok {
		return "interrupted", nil
	}
	srvHost := pt.Hosts.Servers[pair.si]
	if row.Status != results.StatusOK {
		hint := fmt.Sprintf("can the client reach %s? check the address and that a firewall lets node's port through (server.port fixes it)", srvHost.DataAddress)
		if transport == "rdma" {
			hint = "the GID, MTU or link of the two ports do not agree, or memlock is too low; node devices on both hosts shows them"
		}
		return "FAIL", &preflight.Problem{Check: transport + " probe", Msg: row.Error, Hint: hint}
	}
	cell := "ok " + srvHost.DataAddress
	if row.LatAvgUs != nil {
		cell += fmt.Sprintf(" 4KiB in %.0fus", *row.LatAvgUs)
	}
	return cell, nil
}

// probeRead reads a small temporary file, verified, from pair's client to
// its server, through the same point.Runner exec uses, and removes the
// file afterwards: 4 KiB of a 64 KiB file over transport, with the
// point's other values (the RDMA device, fabric fields) as they are,
// unless set overrides them. ok is false when ctx ended.
func probeRead(ctx context.Context, p *plan.Plan, pt plan.Point, r *roles, pair probePair, transport string, set map[string]any, logDir string, ui *voice) (row results.Row, ok bool) {
	srv, cli := r.get(pair.server.Name), r.get(pair.client.Name)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	file := "/tmp/rdmasweep-check-" + hex.EncodeToString(b) + ".dat"
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = srv.Host.Run(cctx, []string{"rm", "-f", "--", file, file + results.SidecarSuffix})
	}()

	q := *p
	q.Timeouts = plan.Timeouts{Ready: min(p.Timeouts.Ready, 30*time.Second), Accept: min(p.Timeouts.Accept, 20*time.Second), Point: min(p.Timeouts.Point, time.Minute)}
	if q.Timeouts.Ready >= q.Timeouts.Point {
		q.Timeouts.Ready = q.Timeouts.Point / 2
	}
	// One server and one client: the probe's point has the pair alone.
	pt.Hosts = plan.Hosts{Servers: []plan.Host{pt.Hosts.Servers[pair.si]}, Clients: []plan.Host{pt.Hosts.Clients[pair.ci]}}
	srv.Role, cli.Role = "server", "client"
	pt.Index, pt.Key = 0, "check-"+transport
	values := map[string]any{
		"transport": transport, "file": file, "file_size": 64 << 10, "create": true, "cache": "warm",
		"block_size": 4 << 10, "queue_depth": 1, "qps": 1, "pattern": "sequential", "total": 4 << 10,
		"duration": time.Duration(0), "warmup": time.Duration(0), "verify": true, "clients": 1,
		"workload": "node", "registration": "pinned", "odp_prefetch": false, "cq_moderation": 1,
	}
	for name, v := range set {
		values[name] = v
	}
	for name, v := range values {
		pt.Values = pt.Values.With(name, v)
	}
	sr := &point.Runner{
		Plan: &q, RunID: "check", Targets: []role.Target{srv, cli}, LogDir: logDir,
		Warn: func(msg string) { ui.warnOnce("%s", msg) },
	}
	rows, _, err := sr.Run(ctx, pt, 1)
	if err != nil {
		return results.Row{}, false
	}
	return rows[0], true
}

// clockLimit is how far a host's clock may be from the runner's, for
// certain, before check and exec warn: the go time of the start barrier,
// the time series and the aggregate's common window all compare the
// hosts' clocks, and a 10 ms error is a tenth of the shortest interval.
const clockLimit = 10 * time.Millisecond

// clockWarning says what a clock beyond clockLimit does to the figures.
func clockWarning(c hostfacts.Clock) string {
	return fmt.Sprintf("clock %s from the runner's: the start barrier, the time series and the aggregate's common window compare hosts' clocks; sync them (chrony, PTP)", c)
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
