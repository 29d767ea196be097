package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"rdmasweep/plan"
	"rdmasweep/runner/peer"
	"rdmasweep/runner/preflight"
	"rdmasweep/runner/role"

	"rdmasweep/results/param"
)

// peerWorkloads are the peer workloads the points use, in plan order.
func peerWorkloads(pts []plan.Point) []string {
	var out []string
	for _, pt := range pts {
		if w := pt.Values.Str(param.Workload); w != "node" && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// programsFor lists what role's host must have on its PATH for the
// points' peer workloads: each tool where it runs (fio on the server's
// host only), timeout(1) beside it (the runner bounds a tool's life with
// it), and ss on the server's host of a tool with a server (its
// readiness).
func programsFor(pts []plan.Point, roleName string) []preflight.Program {
	var out []preflight.Program
	add := func(p preflight.Program) {
		if !slices.ContainsFunc(out, func(q preflight.Program) bool { return q.Binary == p.Binary }) {
			out = append(out, p)
		}
	}
	for _, w := range peerWorkloads(pts) {
		t, err := peer.Lookup(w)
		if err != nil || !slices.Contains(t.Roles, roleName) {
			continue
		}
		add(preflight.Program{Workload: w, Binary: t.Binary, Debian: t.Debian, RHEL: t.RHEL, Version: true})
		add(preflight.Program{Workload: w, Binary: "timeout", Debian: "coreutils", RHEL: "coreutils"})
		if t.HasServer && roleName == "server" {
			add(preflight.Program{Workload: w, Binary: peer.ReadyCommand[0], Debian: "iproute2", RHEL: "iproute"})
		}
	}
	return out
}

// checkPrograms refuses an exec, before any point, whose hosts lack a
// program its peer workloads need.
func checkPrograms(ctx context.Context, r *roles, pts []plan.Point) error {
	return firstError(parallel(len(r.list), func(i int) error {
		t := r.list[i]
		progs := programsFor(pts, t.Role)
		if len(progs) == 0 {
			return nil
		}
		facts, err := preflight.Programs(ctx, t.Host, progs)
		if err != nil {
			return t.Wrap(role.Facts, err)
		}
		if m := preflight.Missing(progs, facts); len(m) > 0 {
			return withHint(t.Errorf(role.Facts, "workload %s needs %s, which is not on the host's PATH", m[0].Workload, m[0].Binary), m[0].Install())
		}
		return nil
	}))
}

// programCells are a check row's cells for each peer workload: the tool's
// version where it runs, "missing" with the packages, "-" where it does
// not run; and a problem per missing program.
func programCells(ctx context.Context, t role.Target, pts []plan.Point) (map[string]string, []preflight.Problem) {
	cells := map[string]string{}
	progs := programsFor(pts, t.Role)
	if len(progs) == 0 {
		return cells, nil
	}
	facts, err := preflight.Programs(ctx, t.Host, progs)
	if err != nil {
		return cells, []preflight.Problem{{Check: "programs", Msg: err.Error(), Hint: "check the host has a POSIX sh"}}
	}
	var problems []preflight.Problem
	for _, p := range progs {
		f := facts[p.Binary]
		if f.Path == "" {
			problems = append(problems, preflight.Problem{Check: p.Workload, Msg: fmt.Sprintf("%s is not on the host's PATH", p.Binary), Hint: p.Install()})
		}
		if !p.Version {
			continue
		}
		switch {
		case f.Path == "":
			cells[p.Workload] = fmt.Sprintf("missing (Debian %s, RHEL %s)", p.Debian, p.RHEL)
		case f.Version == "":
			cells[p.Workload] = f.Path
		default:
			cells[p.Workload] = f.Version
		}
	}
	for _, p := range progs { // a helper missing beside a present tool
		if c := cells[p.Workload]; !p.Version && facts[p.Binary].Path == "" && c != "" && !strings.HasPrefix(c, "missing") {
			cells[p.Workload] += ", no " + p.Binary
		}
	}
	return cells, problems
}
