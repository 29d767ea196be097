package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"golang.org/x/term"

	"rdmasweep/plan"
	"rdmasweep/plans"
	"rdmasweep/results"
	"rdmasweep/runner/deploy"
	"rdmasweep/runner/peer"
	"rdmasweep/runner/remote"
	"rdmasweep/runner/remote/slurm"
	"rdmasweep/runner/search"
)

// planOptions are the flags every command that reads a plan takes.
type planOptions struct {
	set, only listFlag
	maxPoints int
	launcher  string
}

func (o *planOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.launcher, "launcher", "", "start the roles with `ssh` or as steps of this slurm allocation (the plan's launcher: by default)")
	fs.Var(&o.set, "set", "set a parameter or dotted field: `name=value` (repeatable)")
	fs.Var(&o.only, "only", "run only points whose parameter has one of the values: `name=v1,v2` (repeatable)")
	fs.IntVar(&o.maxPoints, "max-points", 10000, "refuse an expansion of more than `N` points")
}

// embeddedName is how messages name the built-in default plan.
const embeddedName = plans.LoopbackName + " (built in)"

// planArg is the PLAN argument: none means the built-in default.
func planArg(fs *flag.FlagSet, pos []string) (string, error) {
	if len(pos) > 1 {
		fs.Usage()
		return "", usageErrorf("%s takes one plan file (got %d arguments)", fs.Name(), len(pos))
	}
	if len(pos) == 0 {
		return "", nil
	}
	return pos[0], nil
}

// planName is how messages name the plan at path.
func planName(path string) string {
	if path == "" {
		return embeddedName
	}
	return path
}

// planCommand adds the plan flags to fs (which holds the command's own),
// parses args, and loads the plan named by the one positional argument:
// the steps every command that reads a plan shares.
func planCommand(ctx context.Context, fs *flag.FlagSet, o *planOptions, args []string) (path string, p *plan.Plan, pts []plan.Point, err error) {
	o.addFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return "", nil, nil, errUsage
	}
	if path, err = planArg(fs, pos); err != nil {
		return "", nil, nil, err
	}
	p, pts, err = loadPlan(ctx, path, *o)
	return path, p, pts, err
}

// loadPlan loads, validates and expands path. Plan and expansion errors
// are a plan.ErrorList.
//
// An empty path means the plan built into the runner, plans/loopback.yaml.
func loadPlan(ctx context.Context, path string, o planOptions) (*plan.Plan, []plan.Point, error) {
	set := o.set
	if o.launcher != "" {
		// --launcher L is --set launcher=L, checked the same way.
		set = append(slices.Clone(set), "launcher="+o.launcher)
	}
	var alloc *slurm.Allocation
	opts := plan.Options{Set: set, NodeBinary: defaultNodeBinary(), Allocation: func() ([]string, error) {
		a, err := slurm.FromEnv(ctx, os.Environ())
		if err != nil {
			return nil, err
		}
		alloc = a
		return a.Nodes(), nil
	}}
	var (
		p   *plan.Plan
		err error
	)
	if path == "" {
		p, err = plan.Parse(embeddedName, plans.Loopback, opts)
	} else {
		p, err = plan.Load(path, opts)
	}
	if err != nil {
		return nil, nil, err
	}
	hostName := func(address string) string { return remote.ResolveHostName(address, "") }
	if alloc != nil {
		// A node is dialled at the address Slurm knows it by.
		hostName = func(node string) string { return alloc.NodeAddr(ctx, node) }
	}
	pts, err := plan.Expand(p, plan.ExpandOptions{Only: o.only, MaxPoints: o.maxPoints, HostName: hostName, Check: checkWorkload})
	if err != nil {
		return nil, nil, err
	}
	return p, pts, nil
}

// checkWorkload refuses what a point's peer workload cannot take: the
// rules are runner/peer's (peer.Check), the positions plan's.
func checkWorkload(pt plan.Point) []plan.Refusal {
	w := pt.Values.Str("workload")
	if w == "node" {
		return nil
	}
	errs, err := peer.Check(w, peer.FromValues(pt.Values))
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

// planWarnings are what a valid plan may still get wrong.
func planWarnings(ui *voice, p *plan.Plan, pts []plan.Point) {
	few := 0
	example := ""
	for _, pt := range pts {
		if n := pt.ExpectedReads(); n > 0 && n < 1000 {
			if few == 0 {
				example = fmt.Sprintf("%s makes %d reads", paramsText(pt), n)
			}
			few++
		}
	}
	if few > 0 {
		ui.warnf("%s of %d make fewer than 1,000 reads (%s); figures from so few reads are noisy", plural(few, "point"), len(pts), example)
		ui.hintf("raise client.total, or read for a time with client.duration")
	}
	// Which node a host gets depends on its architecture, known once the
	// host is reached (deploy warns then); a build of one node is known now.
	if p.Transport() == "rdma" {
		if nodes, err := deploy.FindNodes(p.Node.Binary); err == nil && len(nodes) == 1 {
			warnNoRDMA(ui, nodes[0])
		}
	}
	if p.SSH.HostKeyPolicy == "insecure" && slices.ContainsFunc(p.Hosts.Roles(), func(r plan.Role) bool { return !r.Host.IsLocal() }) {
		ui.warnf("ssh.host_key_policy is insecure: host keys are not checked, so anyone on the path can pose as the hosts")
	}
}

// warnNoRDMA warns, once per file, that an rdma plan gives hosts node n
// although n was built without rdma. It reads n's build information, so
// it also judges another architecture's node, which cannot run here.
func warnNoRDMA(ui *voice, n deploy.Node) {
	built, err := deploy.Transports(n.Path)
	if err != nil || contains(built, "rdma") {
		return
	}
	if !ui.warnOnce("the plan asks for rdma, but %s was built without it (transports: %s)", n.Path, strings.Join(built, ", ")) {
		return
	}
	if n.Sibling {
		ui.hintf("build the RDMA node for %s with: make node-rdma-%s (it needs the cross compiler and %s's rdma-core, see docs/rdma.md)", n.Arch, n.GOARCH, n.GOARCH)
		return
	}
	ui.hintf("build the RDMA node with: make node-rdma")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
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

func runValidate(ctx context.Context, args []string, stdout io.Writer, ui *voice) error {
	fs := newFlagSet("validate", "[flags] [PLAN]", ui.w)
	var o planOptions
	path, p, pts, err := planCommand(ctx, fs, &o, args)
	if err != nil {
		return err
	}
	planWarnings(ui, p, pts)
	fmt.Fprintf(stdout, "%s: valid: %s × %d repetition(s), transport %s\n", planName(path), plural(len(pts), "point"), p.Repeat, p.Transport())
	return nil
}

func runPlan(ctx context.Context, args []string, stdout io.Writer, ui *voice) error {
	fs := newFlagSet("plan", "[flags] [PLAN]", ui.w)
	var o planOptions
	_, p, pts, err := planCommand(ctx, fs, &o, args)
	if err != nil {
		return err
	}
	planWarnings(ui, p, pts)
	if p.Search != nil {
		ui.infof("%s", search.BoundText(search.FromPlan(p.Search, p.Repeat), len(pts)))
	}
	return writePointTable(stdout, pts)
}

// writePointTable prints every point with its key and every parameter
// that has a CSV column, as the summary shows them.
func writePointTable(w io.Writer, pts []plan.Point) error {
	var cols []*results.Param
	head := []string{"#", "KEY"}
	for _, c := range results.Columns {
		p := results.ColumnParam(c)
		if p == nil || !slices.ContainsFunc(pts, func(pt plan.Point) bool { return p.Display(pt.Cell(p)) != "-" }) {
			continue // a parameter no point has (registration on tcp) is left out
		}
		cols = append(cols, p)
		head = append(head, strings.ToUpper(p.Name))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(append(head, "READS"), "\t"))
	for _, pt := range pts {
		cells := []string{fmt.Sprint(pt.Index + 1), pt.Key}
		for _, p := range cols {
			cells = append(cells, p.Display(pt.Cell(p)))
		}
		reads := "-"
		if n := pt.ExpectedReads(); n > 0 {
			reads = fmt.Sprint(n)
		}
		fmt.Fprintln(tw, strings.Join(append(cells, reads), "\t"))
	}
	return tw.Flush()
}

// stderrIsTerminal reports whether w is a terminal, for the progress bar.
func stderrIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
