package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"rdmasweep/internal/words"
	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/files/resume"
	"rdmasweep/runner/hosts/deploy"
	"rdmasweep/runner/hosts/hostset"
	"rdmasweep/runner/hosts/remote/slurm"
	"rdmasweep/runner/points/peer"
	"rdmasweep/runner/points/planload"
	"rdmasweep/runner/points/sweep"
)

// The plan flags and the PLAN argument every command that reads a plan
// takes (runner/points/planload loads it), what a valid plan may still get wrong,
// and the table of its points.

// planOptions are the flags every command that reads a plan takes.
type planOptions struct {
	set, only listFlag
	maxPoints int
	launcher  string
	nodes     string // --nodes, where a command takes it (addNodesFlag)
}

func (o *planOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.launcher, "launcher", "", "start the roles with `ssh` or as steps of this slurm allocation (the plan's launcher: by default)")
	fs.Var(&o.set, "set", "set a parameter or dotted field: `name=value` (repeatable)")
	fs.Var(&o.only, "only", "run only points whose parameter has one of the values: `name=v1,v2` (repeatable)")
	fs.IntVar(&o.maxPoints, "max-points", 10000, "refuse an expansion of more than `N` points")
}

// addNodesFlag adds --nodes, for the commands that read a plan without
// running it: a slurm plan then loads outside an allocation.
func (o *planOptions) addNodesFlag(fs *flag.FlagSet) {
	fs.Func("nodes", "outside a Slurm allocation, take these nodes (a Slurm hostlist: `n[1-64]`) as the allocation's", func(list string) error {
		if _, err := slurm.Hostnames(list); err != nil {
			return fmt.Errorf("%w: write it as Slurm does, like n[1-8,10],gpu1", err)
		}
		o.nodes = list
		return nil
	})
}

// hostFlags are the flags of the commands that dial the plan's hosts.
type hostFlags struct {
	acceptNewHostKeys bool
}

func (o *hostFlags) addHostFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.acceptNewHostKeys, "accept-new-host-keys", false,
		"trust a host not yet in known_hosts on first contact and add its key there (the plan's ssh.host_key_policy wins; a changed key is still refused)")
}

// planName is how messages name the plan at path.
func planName(path string) string {
	if path == "" {
		return planload.EmbeddedName
	}
	return path
}

// loadPlanArg loads the plan named by the one positional argument, or the
// built-in default without one: the step every command that reads a plan
// begins with.
func loadPlanArg(ctx context.Context, g globals, o planOptions, pos []string) (path string, p *plan.Plan, pts []plan.Point, err error) {
	if len(pos) > 1 {
		return "", nil, nil, g.usageError("%s takes one plan file (got %d arguments)", g.fs.Name(), len(pos))
	}
	if len(pos) == 1 {
		path = pos[0]
	}
	p, pts, err = planload.Load(ctx, path, planload.Options{
		Set: o.set, Only: o.only, MaxPoints: o.maxPoints, Launcher: o.launcher, NodeBinary: deploy.BesideExecutable(), Nodes: o.nodes,
	})
	if err == nil && o.nodes != "" && p.Launcher != "slurm" {
		return "", nil, nil, g.usageError("--nodes stands for a Slurm allocation's nodes, and %s has launcher %s: drop --nodes, or add --launcher slurm", planName(path), p.Launcher)
	}
	return path, p, pts, err
}

// planWarnings are what a valid plan may still get wrong.
func planWarnings(ui *voice, p *plan.Plan, pts []plan.Point) {
	c := planload.Check(p, pts)
	if c.FewReads > 0 {
		ui.warnf("%s of %d make fewer than 1,000 reads (%s makes %d reads); figures from so few reads are noisy",
			words.Count(c.FewReads, "point"), len(pts), paramsText(c.Example), c.Example.ExpectedReads())
		ui.hintf("raise client.total, or read for a time with client.duration")
	}
	if c.ShortPeer > 0 {
		w := c.ShortExample.Values.Str(param.Workload)
		ui.warnf("%s of %d read for less than %d × %s's %s clock step (%s reads for %s), so their figures are quantized by more than 1 %%",
			words.Count(c.ShortPeer, "peer point"), len(pts), peer.MinSteps, w, c.ShortStep, paramsText(c.ShortExample), c.ShortExample.Values.Duration(param.Duration))
		ui.hintf("raise client.duration to %s or more", peer.MinSteps*c.ShortStep)
	}
	if c.Node != nil {
		warnNoRDMA(ui, *c.Node)
	}
	if c.InsecureKeys {
		ui.warnf("ssh.host_key_policy is insecure: host keys are not checked, so anyone on the path can pose as the hosts")
	}
	for _, u := range unusedSweeps(pts) {
		ui.infof("%s: %s not use it, so the plan expands each of their points once (shown as -)", u.param, andList(u.workloads, "does", "do"))
	}
}

// unusedSweep is a swept parameter that some workloads do not use.
type unusedSweep struct {
	param     string
	workloads []string
}

// unusedSweeps are the swept parameters that some points' workloads do
// not use (plan.Point.Unused), in the sweep's order, each with those
// workloads in plan order.
func unusedSweeps(pts []plan.Point) []unusedSweep {
	var out []unusedSweep
	for _, pt := range pts {
		for _, sp := range pt.Swept {
			if !slices.Contains(pt.Unused, sp.Name) {
				continue
			}
			i := slices.IndexFunc(out, func(u unusedSweep) bool { return u.param == sp.Name })
			if i < 0 {
				out = append(out, unusedSweep{param: sp.Name})
				i = len(out) - 1
			}
			if w := pt.Values.Str(param.Workload); !slices.Contains(out[i].workloads, w) {
				out[i].workloads = append(out[i].workloads, w)
			}
		}
	}
	return out
}

// andList is "a does", "a and b do", "a, b and c do".
func andList(xs []string, one, many string) string {
	switch len(xs) {
	case 0:
		return many
	case 1:
		return xs[0] + " " + one
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1] + " " + many
}

// warnNoRDMA warns, once per file, that an rdma plan gives hosts node n
// although n was built without rdma.
func warnNoRDMA(ui *voice, n deploy.Node) {
	built, lacks := planload.LacksRDMA(n)
	if !lacks || !ui.warnOnce("the plan asks for rdma, but %s was built without it (transports: %s)", n.Path, strings.Join(built, ", ")) {
		return
	}
	if n.Sibling {
		ui.hintf("build the RDMA node for %s with: make node-rdma-%s (it needs the cross compiler and %s's rdma-core, see docs/rdma.md)", n.Arch, n.GOARCH, n.GOARCH)
		return
	}
	ui.hintf("build the RDMA node with: make node-rdma")
}

// paramsText is a point's swept parameters, "block_size=4KiB cache=cold".
func paramsText(pt plan.Point) string {
	var parts []string
	for _, p := range pt.Swept {
		parts = append(parts, p.Name+"="+p.Value)
	}
	if len(parts) == 0 {
		return "the point"
	}
	return strings.Join(parts, " ")
}

// hostOptions are how the hosts of plan p report to the user: deploying
// an rdma plan's node built without rdma is warned of, and
// RDMASWEEP_SSH_DEBUG=1 shows SSH's own trace; and how their host keys
// are taken (--accept-new-host-keys, which the plan's own
// ssh.host_key_policy overrides, with a warning when they differ).
func hostOptions(p *plan.Plan, ui *voice, hf hostFlags) hostset.Options {
	o := hostset.Options{Info: ui.info, Warn: ui.warn, AcceptNewHostKeys: hf.acceptNewHostKeys}
	if hf.acceptNewHostKeys && p.SSH.HostKeyPolicy != "" && p.SSH.HostKeyPolicy != "accept-new" {
		ui.warnf("--accept-new-host-keys is ignored: the plan's ssh.host_key_policy is %s, and the plan wins (--set ssh.host_key_policy=accept-new overrides it)", p.SSH.HostKeyPolicy)
	}
	if os.Getenv("RDMASWEEP_SSH_DEBUG") != "" {
		o.Debug = func(msg string) { ui.infof("ssh: %s", msg) }
	}
	if p.Transport() == results.TransportRDMA {
		o.Chosen = func(n deploy.Node) { warnNoRDMA(ui, n) }
	}
	return o
}

// reportCost tells the user, before anything runs, what running todo
// (the jobs left of pts) will take: runs, rounds and links, and time.
func reportCost(ui *voice, p *plan.Plan, pts []plan.Point, todo []resume.Job) error {
	c, err := sweep.CostOf(p, pts, todo)
	if err != nil {
		return err
	}
	ui.infof("%s", c)
	return nil
}
