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
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/preflight"
	"rdmasweep/runner/remote"
	"rdmasweep/runner/sweep"
)

// checkRow is one line of the check table: one role on its host.
type checkRow struct {
	role, host      string
	ssh             string
	verdict         preflight.Verdict
	dataPath, probe string
	label           string // "server (local)", for messages
	problems        []preflight.Problem
}

// runCheck is `runner check PLAN`: it connects to both hosts (deploying
// node, as exec does), judges what each host has against what the plan
// needs, and proves the data path (and for rdma plans one RDMA READ) with
// node itself. It prints one table row per role on stdout and every
// problem with a hint on stderr; any problem makes it fail (exit 1).
func runCheck(ctx context.Context, args []string, stdout io.Writer, ui *voice) error {
	fs := newFlagSet("check", "[flags] [PLAN]", ui.w)
	var o planOptions
	_, p, pts, err := planCommand(fs, &o, args)
	if err != nil {
		return err
	}
	planWarnings(ui, p, pts)

	rows := []*checkRow{
		{role: "server", host: p.Hosts.Server.Address, label: "server (" + p.Hosts.Server.Address + ")"},
		{role: "client", host: p.Hosts.Client.Address, label: "client (" + p.Hosts.Client.Address + ")"},
	}
	for _, row := range rows {
		row.ssh, row.dataPath, row.probe = "-", "-", "-"
		row.verdict = preflight.Verdict{System: "-", Node: "-", RDMA: "-", File: "-", Memlock: "-"}
	}
	r, err := connect(ctx, p, ui)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return cause
		}
		// connect names the role that failed first in its error.
		hint := "check the address, user and key with: ssh -v HOST; ssh.connect_timeout bounds the wait"
		var h hinted
		if errors.As(err, &h) {
			hint = h.Hint()
		}
		blamed := false
		for _, row := range rows {
			msg := err.Error()
			if !strings.HasPrefix(msg, row.role+" (") {
				continue
			}
			if i := strings.Index(msg, "): "); i >= 0 {
				msg = msg[i+3:]
			}
			row.ssh, blamed = "FAIL", true
			row.problems = append(row.problems, preflight.Problem{Check: "connect", Msg: msg, Hint: hint})
		}
		if !blamed {
			rows[0].ssh = "FAIL"
			rows[0].problems = append(rows[0].problems, preflight.Problem{Check: "connect", Msg: err.Error(), Hint: hint})
		}
		return reportCheck(stdout, ui, rows)
	}
	defer r.close()
	rows[0].host, rows[0].label = r.server.Host.Name(), r.server.Label
	rows[1].host, rows[1].label = r.client.Host.Name(), r.client.Label

	localSum, err := fileSHA256(p.Node.Binary)
	if err != nil {
		return fmt.Errorf("node binary: %w", err)
	}
	needs := checkNeeds(p, pts, localSum)
	targets := []sweep.Target{r.server, r.client}
	var wg sync.WaitGroup
	for i, row := range rows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := targets[i]
			rtt, err := roundTrip(ctx, t.Host)
			if err != nil {
				row.ssh = "FAIL"
				hint := "the host accepts the login but cannot run commands: check the user's shell"
				if h := hinted(nil); errors.As(err, &h) {
					hint = h.Hint() // e.g. sshd's MaxSessions
				}
				row.problems = append(row.problems, preflight.Problem{Check: "ssh", Msg: "run a command: " + err.Error(), Hint: hint})
				return
			}
			kind := "ok"
			if t.Host.Name() == "local" {
				kind = "local"
			}
			row.ssh = fmt.Sprintf("%s %.2fms", kind, float64(rtt)/float64(time.Millisecond))
			file := ""
			if row.role == "server" {
				file = p.Server.File
			}
			facts, err := preflight.Collect(ctx, t.Host, t.NodePath, file)
			if err != nil {
				row.problems = append(row.problems, preflight.Problem{Check: "system", Msg: err.Error(), Hint: "check the host has a POSIX sh"})
				return
			}
			row.verdict = preflight.Judge(facts, needs[i])
			row.problems = append(row.problems, row.verdict.Problems...)
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}

	// The probes need node in place on both hosts.
	for _, row := range rows {
		for _, pr := range row.problems {
			if pr.Check == "ssh" || pr.Check == "system" || pr.Check == "node" {
				return reportCheck(stdout, ui, rows)
			}
		}
	}
	logDir, err := os.MkdirTemp("", "rdmasweep-check-")
	if err != nil {
		return fmt.Errorf("create log directory: %w", err)
	}
	keepLogs := false
	probes := []string{"tcp"}
	if p.Transport == "rdma" {
		probes = append(probes, "rdma")
	}
	for _, transport := range probes {
		if transport == "rdma" && rdmaBlocked(rows) {
			for _, row := range rows {
				row.probe = "skipped"
			}
			continue
		}
		cell, pr := probe(ctx, p, pts[0], r, transport, logDir, ui)
		if err := context.Cause(ctx); err != nil {
			return err
		}
		if pr != nil {
			keepLogs = true
			rows[1].problems = append(rows[1].problems, *pr)
		}
		for _, row := range rows {
			if transport == "tcp" {
				row.dataPath = cell
			} else {
				row.probe = cell
			}
		}
	}
	if keepLogs {
		ui.infof("probe logs in %s", logDir)
	} else {
		os.RemoveAll(logDir)
	}
	return reportCheck(stdout, ui, rows)
}

// checkNeeds says what the plan asks of each role's host, over all points.
func checkNeeds(p *plan.Plan, pts []plan.Point, nodeSum string) []preflight.Need {
	srv := preflight.Need{Role: "server", Transport: p.Transport, NodeSHA256: nodeSum, Create: p.Server.Create}
	cli := preflight.Need{Role: "client", Transport: p.Transport, NodeSHA256: nodeSum}
	for _, pt := range pts {
		srv.FileSize = max(srv.FileSize, pt.Server.FileSize)
		srv.Pinned = srv.Pinned || pt.Server.Registration == "pinned"
		srv.ODP = srv.ODP || pt.Server.Registration == "odp"
		srv.DataAddress = pt.Hosts.Server.DataAddress
	}
	set := func(n *preflight.Need, rd plan.RDMA) {
		n.Device, n.IBPort, n.GIDIndex = rd.Device, rd.IBPort, rd.GIDIndex
	}
	set(&srv, p.Hosts.Server.RDMA)
	set(&cli, p.Hosts.Client.RDMA)
	cli.DataAddress = srv.DataAddress
	return []preflight.Need{srv, cli}
}

func rdmaBlocked(rows []*checkRow) bool {
	for _, row := range rows {
		for _, pr := range row.problems {
			if pr.Check == "rdma" {
				return true
			}
		}
	}
	return false
}

// probe runs one 4 KiB read of a small temporary file from the client to
// the server with the given transport, through the same Runner exec uses,
// and removes the file afterwards. It returns the table cell and, when
// the read failed, the problem.
func probe(ctx context.Context, p *plan.Plan, pt plan.Point, r *roles, transport, logDir string, ui *voice) (string, *preflight.Problem) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	file := "/tmp/rdmasweep-check-" + hex.EncodeToString(b) + ".dat"
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = r.server.Host.Run(cctx, []string{"rm", "-f", "--", file, file + preflight.SidecarSuffix})
	}()

	q := *p
	q.Timeouts = plan.Timeouts{Ready: min(p.Timeouts.Ready, 30*time.Second), Accept: min(p.Timeouts.Accept, 20*time.Second), Point: min(p.Timeouts.Point, time.Minute)}
	if q.Timeouts.Ready >= q.Timeouts.Point {
		q.Timeouts.Ready = q.Timeouts.Point / 2
	}
	pt.Index, pt.Key, pt.Transport = 0, "check-"+transport, transport
	pt.Server.File, pt.Server.FileSize, pt.Server.Create, pt.Server.Cache = file, 64<<10, true, "warm"
	pt.Client = plan.ClientParams{BlockSize: 4 << 10, QueueDepth: 1, QPs: 1, Pattern: "sequential", Total: 4 << 10, Verify: true}
	sr := &sweep.Runner{
		Plan: &q, RunID: "check", Server: r.server, Client: r.client, LogDir: logDir,
		Warn: func(msg string) { ui.warnOnce("%s", msg) },
	}
	row, _, err := sr.Run(ctx, pt, 1)
	if err != nil {
		return "interrupted", nil
	}
	if row.Status != results.StatusOK {
		hint := fmt.Sprintf("can the client reach %s? check the address and that a firewall lets node's port through (server.port fixes it)", pt.Hosts.Server.DataAddress)
		if transport == "rdma" {
			hint = "the GID, MTU or link of the two ports do not agree, or memlock is too low; node devices on both hosts shows them"
		}
		return "FAIL", &preflight.Problem{Check: transport + " probe", Msg: row.Error, Hint: hint}
	}
	cell := "ok " + pt.Hosts.Server.DataAddress
	if row.LatAvgUs != nil {
		cell += fmt.Sprintf(" 4KiB in %.0fus", *row.LatAvgUs)
	}
	return cell, nil
}

// roundTrip times the fastest of three trivial commands on h.
func roundTrip(ctx context.Context, h remote.Host) (time.Duration, error) {
	best := time.Duration(0)
	for range 3 {
		start := time.Now()
		if _, err := h.Run(ctx, []string{"true"}); err != nil {
			return 0, err
		}
		if d := time.Since(start); best == 0 || d < best {
			best = d
		}
	}
	return best, nil
}

// reportCheck prints the table on stdout and the problems on stderr, and
// fails when there is any problem.
func reportCheck(stdout io.Writer, ui *voice, rows []*checkRow) error {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tHOST\tSSH\tSYSTEM\tNODE\tRDMA\tFILE\tMEMLOCK\tDATA_PATH\tRDMA_PROBE")
	for _, r := range rows {
		v := r.verdict
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.role, r.host, r.ssh, v.System, v.Node, v.RDMA, v.File, v.Memlock, r.dataPath, r.probe)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	n := 0
	for _, r := range rows {
		for _, pr := range r.problems {
			n++
			ui.errorf("%s: %s: %s", r.label, pr.Check, pr.Msg)
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
