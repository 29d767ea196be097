// Package planload loads a plan as the runner runs it: the file named, or
// the built-in plans/loopback.yaml; --set and --launcher applied as the
// plan's own fields; under Slurm, the allocation's nodes (or --nodes) as
// the hosts and the addresses Slurm knows them by; and what each point's peer workload
// cannot take refused at the plan's positions (runner/points/peer). Every error
// of the plan and its expansion is a plan.ErrorList.
package planload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"rdmasweep/plan"
	"rdmasweep/plans"
	"rdmasweep/results/param"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/remote/slurm"
	"rdmasweep/runner/points/peer"
)

// EmbeddedName is how messages name the built-in default plan.
const EmbeddedName = plans.LoopbackName + " (built in)"

// Options are the plan flags every command that reads a plan takes.
type Options struct {
	Set, Only []string // --set name=value, --only name=v1,v2
	MaxPoints int      // refuse an expansion of more points
	Launcher  string   // --launcher: ssh or slurm; "" is the plan's
	// NodeBinary is node.binary when the plan names none.
	NodeBinary string
	// Nodes, a Slurm hostlist (--nodes), stands for the allocation's
	// nodes, so a slurm plan loads where no allocation is: each node is
	// then its own address.
	Nodes string
}

// Load loads, validates and expands the plan at path; "" is the plan
// built into the runner.
func Load(ctx context.Context, path string, o Options) (*plan.Plan, []plan.Point, error) {
	set := o.Set
	if o.Launcher != "" {
		// --launcher L is --set launcher=L, checked the same way.
		set = append(slices.Clone(set), "launcher="+o.Launcher)
	}
	var nodes []string
	if o.Nodes != "" {
		var err error
		if nodes, err = slurm.Hostnames(o.Nodes); err != nil {
			return nil, nil, fmt.Errorf("--nodes: %w: write it as Slurm does, like n[1-8,10],gpu1", err)
		}
	}
	var alloc *slurm.Allocation
	opts := plan.Options{Set: set, NodeBinary: o.NodeBinary, Allocation: func() ([]string, error) {
		if nodes != nil {
			return nodes, nil
		}
		a, err := slurm.FromEnv(ctx, os.Environ())
		if err != nil {
			return nil, err
		}
		alloc = a
		return a.Nodes(), nil
	}}
	hostName := func(address string) string {
		switch {
		case nodes != nil:
			return address
		case alloc != nil:
			// A node is dialled at the address Slurm knows it by.
			return alloc.NodeAddr(ctx, address)
		}
		return remote.ResolveHostName(address, "")
	}
	xo := plan.ExpandOptions{Only: o.Only, MaxPoints: o.MaxPoints, HostName: hostName, Check: checkWorkload, Unused: unusedByWorkload}
	if path == "" {
		return plan.ParseExpanded(EmbeddedName, plans.Loopback, opts, xo)
	}
	return plan.LoadExpanded(path, opts, xo)
}

// unusedByWorkload names the parameters a point's peer workload does not
// use (peer.Unused); node uses them all. An unknown workload uses them
// all too: checkWorkload refuses it.
func unusedByWorkload(pt plan.Point) []string {
	w := pt.Values.Str(param.Workload)
	if w == "node" {
		return nil
	}
	unused, _ := peer.Unused(w)
	return unused
}

// checkWorkload refuses what a point's peer workload cannot take: the
// rules are runner/points/peer's (peer.Check), the positions plan's.
func checkWorkload(pt plan.Point) []plan.Refusal {
	w := pt.Values.Str(param.Workload)
	if w == "node" {
		return nil
	}
	errs, err := peer.Check(w, peer.FromValues(pt.Values))
	if errors.Is(err, peer.ErrUnknown) {
		return []plan.Refusal{{Param: "workload", Msg: fmt.Sprintf("must be node or a peer workload: %s (got %q)", strings.Join(peer.Names(), ", "), w)}}
	}
	if err != nil {
		return []plan.Refusal{{Param: "workload", Msg: err.Error()}}
	}
	var out []plan.Refusal
	if pt.Hosts.Several() {
		// A peer runs one server and one client; its row is one pair's.
		out = append(out, plan.Refusal{Param: "clients", Msg: fmt.Sprintf(
			"workload %s runs one server and one client, and this point has %d clients and %d servers; list one host per role for the peers",
			w, pt.Clients(), len(pt.Hosts.Servers))})
	}
	for _, e := range errs {
		out = append(out, plan.Refusal{Param: e.Param, Msg: e.Error()})
	}
	return out
}
