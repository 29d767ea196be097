package preflight

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/hint"
	"rdmasweep/runner/hosts/hostset"
	"rdmasweep/runner/hosts/role"
	"rdmasweep/runner/points/peer"
)

// PeerWorkloads are the peer workloads the points use, in plan order.
func PeerWorkloads(pts []plan.Point) []string {
	var out []string
	for _, pt := range pts {
		if w := pt.Values.Str(param.Workload); w != "node" && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// ProgramsFor lists what role's host must have on its PATH for the
// points' peer workloads: each tool where it runs (fio on the server's
// host only), and ss on the server's host of a tool with a server (its
// readiness), with rdma beside it where the server listens through
// rdma_cm. node run, deployed with node, bounds a tool's life.
func ProgramsFor(pts []plan.Point, roleName string) []Program {
	var out []Program
	add := func(p Program) {
		if !slices.ContainsFunc(out, func(q Program) bool { return q.Binary == p.Binary }) {
			out = append(out, p)
		}
	}
	for _, w := range PeerWorkloads(pts) {
		t, err := peer.Lookup(w)
		if err != nil || !slices.Contains(t.Roles, roleName) {
			continue
		}
		add(Program{Workload: w, Binary: t.Binary, Debian: t.Debian, RHEL: t.RHEL, Version: true})
		if t.HasServer && roleName == "server" {
			add(Program{Workload: w, Binary: peer.ReadyCommand[0], Debian: "iproute2", RHEL: "iproute"})
			if overCM(pts, w) {
				add(Program{Workload: w, Binary: peer.CMReadyCommand[0], Debian: "iproute2", RHEL: "iproute"})
			}
		}
	}
	return out
}

// overCM reports whether a point of workload w connects through rdma_cm:
// its server's readiness is then rdma's (peer.CMReadyCommand), not ss's.
func overCM(pts []plan.Point, w string) bool {
	return slices.ContainsFunc(pts, func(pt plan.Point) bool {
		v := pt.Values
		return v.Str(param.Workload) == w && v.Str(param.Transport) == results.TransportRDMA && v.Str(param.Connect) == results.ConnectCM
	})
}

// CheckPrograms refuses an exec, before any point, whose hosts lack a
// program its peer workloads need.
func CheckPrograms(ctx context.Context, s *hostset.Set, pts []plan.Point) error {
	return s.EachRole(func(_ int, t role.Target) error {
		missing, err := MissingModules(ctx, t.Host, ModulesFor(pts, t.Role))
		if err != nil {
			return t.Wrap(role.Facts, err)
		}
		if len(missing) > 0 {
			m := missing[0]
			return hint.Wrap(t.Errorf(role.Facts, "workload %s needs the kernel module %s, which the host has neither loaded nor can load", m.Workload, m.Name), ModuleHint(m))
		}
		progs := ProgramsFor(pts, t.Role)
		if len(progs) == 0 {
			return nil
		}
		facts, err := Programs(ctx, t.Host, progs)
		if err != nil {
			return t.Wrap(role.Facts, err)
		}
		if m := Missing(progs, facts); len(m) > 0 {
			return hint.Wrap(t.Errorf(role.Facts, "workload %s needs %s, which is not on the host's PATH", m[0].Workload, m[0].Binary), m[0].Install())
		}
		return nil
	})
}

// ProgramCells are a check row's cells for each peer workload: the tool's
// version where it runs, "missing" with the packages, "-" where it does
// not run, and whether the kernel has the workload's in-band
// authentication where it has one; and a problem per missing program.
func ProgramCells(ctx context.Context, t role.Target, pts []plan.Point) (map[string]string, []Problem) {
	cells := map[string]string{}
	mods, problems := moduleCells(ctx, t, pts, cells)
	problems = append(problems, programCells(ctx, t, pts, mods, cells)...)
	authCells(ctx, t, pts, mods, cells)
	return cells, problems
}

// programCells sets the cells of ProgramCells's programs, and returns a
// problem per missing program.
func programCells(ctx context.Context, t role.Target, pts []plan.Point, mods, cells map[string]string) []Problem {
	var problems []Problem
	progs := ProgramsFor(pts, t.Role)
	if len(progs) == 0 {
		return problems
	}
	facts, err := Programs(ctx, t.Host, progs)
	if err != nil {
		return append(problems, Problem{Check: "programs", Msg: err.Error(), Hint: "check the host has a POSIX sh"})
	}
	for _, p := range progs {
		f := facts[p.Binary]
		if f.Path == "" {
			problems = append(problems, Problem{Check: p.Workload, Msg: fmt.Sprintf("%s is not on the host's PATH", p.Binary), Hint: p.Install()})
		}
		if !p.Version {
			continue
		}
		switch {
		case mods[p.Workload] != "":
			// the missing module, said already
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
	return problems
}

// authCells adds to the cell of each peer workload with in-band
// authentication (peer.Tool.Auth) that runs on t's role whether t's
// kernel has it ("DH-HMAC-CHAP", "no DH-HMAC-CHAP"), unless the cell
// says a module is missing. Without it the workload still runs, less
// guarded, as docs/security.md says.
func authCells(ctx context.Context, t role.Target, pts []plan.Point, missing, cells map[string]string) {
	for _, w := range PeerWorkloads(pts) {
		tool, err := peer.Lookup(w)
		if err != nil || tool.Auth == nil || missing[w] != "" || !(slices.Contains(tool.Roles, t.Role) || (tool.HasServer && t.Role == "server")) {
			continue
		}
		a := tool.Auth(t.Role)
		say := a.Name
		if ok, err := HasAuth(ctx, t.Host, a); err != nil {
			say = a.Name + " unknown"
		} else if !ok {
			say = "no " + a.Name
		}
		if cells[w] == "" {
			cells[w] = say
		} else {
			cells[w] += ", " + say
		}
	}
}

// moduleCells sets the cell of each peer workload whose kernel modules t's
// host lacks to "missing module M", and returns those cells and a
// problem for each.
func moduleCells(ctx context.Context, t role.Target, pts []plan.Point, cells map[string]string) (map[string]string, []Problem) {
	missing, err := MissingModules(ctx, t.Host, ModulesFor(pts, t.Role))
	if err != nil {
		return nil, []Problem{{Check: "modules", Msg: err.Error(), Hint: "check the host has a POSIX sh"}}
	}
	set := map[string]string{}
	var problems []Problem
	for _, m := range missing {
		if set[m.Workload] == "" {
			set[m.Workload] = "missing module " + m.Name
			cells[m.Workload] = set[m.Workload]
		}
		problems = append(problems, Problem{Check: m.Workload, Msg: fmt.Sprintf("kernel module %s is neither loaded nor loadable", m.Name), Hint: ModuleHint(m)})
	}
	return set, problems
}
