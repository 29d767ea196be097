package preflight

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"rdmasweep/plan"
	"rdmasweep/results/param"
	"rdmasweep/runner/hosts/hostset"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
	"rdmasweep/runner/points/peer"
)

// Module is a kernel module a role's host needs for a peer workload.
type Module struct {
	Workload, Name string
}

// ModulesFor lists the kernel modules role's host needs for the points'
// peer workloads (peer.Tool.Modules), each once, in plan order.
func ModulesFor(pts []plan.Point, roleName string) []Module {
	var out []Module
	for _, pt := range pts {
		w := pt.Values.Str(param.Workload)
		t, err := peer.Lookup(w)
		if err != nil || t.Modules == nil {
			continue
		}
		for _, m := range t.Modules(roleName, pt.Values.Str(param.Transport)) {
			if !slices.ContainsFunc(out, func(x Module) bool { return x.Name == m }) {
				out = append(out, Module{Workload: w, Name: m})
			}
		}
	}
	return out
}

// modulesScript prints the name of each "name:dir" of "$@" that is
// neither loaded (/sys/module/dir, the name with _ for -) nor built in
// nor a file the running kernel's modules.dep lists, under either
// spelling. modprobe -n is not asked: busybox's has no -n, and kmod's
// trusts an index that may name a file that is gone.
const modulesScript = `k=/lib/modules/$(uname -r)
for a in "$@"; do
  m=${a%%:*} u=${a#*:} found=
  [ -d "/sys/module/$u" ] && continue
  for n in "$m" "$u"; do
    grep -q -e "/$n\.ko" "$k/modules.builtin" 2>/dev/null && found=1
    p=$(grep -m1 -e "/$n\.ko[.a-z]*:" "$k/modules.dep" 2>/dev/null) && [ -e "$k/${p%%:*}" ] && found=1
  done
  [ -n "$found" ] || echo "$m"
done
`

// MissingModules returns those of mods that h neither has loaded nor can
// load, with one command.
func MissingModules(ctx context.Context, h remote.Host, mods []Module) ([]Module, error) {
	if len(mods) == 0 {
		return nil, nil
	}
	args := []string{"sh", "-c", modulesScript, "sh"}
	for _, m := range mods {
		args = append(args, m.Name+":"+strings.ReplaceAll(m.Name, "-", "_"))
	}
	out, err := h.Run(ctx, args)
	if err != nil {
		return nil, fmt.Errorf("look for kernel modules: %w", err)
	}
	var missing []Module
	for _, l := range strings.Fields(string(out)) {
		if i := slices.IndexFunc(mods, func(m Module) bool { return m.Name == l }); i >= 0 {
			missing = append(missing, mods[i])
		}
	}
	return missing, nil
}

// authScript prints yes when module $2 of the module tree $1 (default:
// the running kernel's) depends on $3, by its modules.dep entry, or $3 is
// built in; else no.
const authScript = `k=$1; [ -n "$k" ] || k=/lib/modules/$(uname -r)
if grep -q -e "/$3\.ko" "$k/modules.builtin" 2>/dev/null || grep -q -e "/$2\.ko[.a-z]*:.*/$3\.ko" "$k/modules.dep" 2>/dev/null; then echo yes; else echo no; fi
`

// HasAuth reports whether h's kernel has the in-band authentication a.
func HasAuth(ctx context.Context, h remote.Host, a peer.KernelAuth) (bool, error) {
	return hasAuthIn(ctx, h, "", a)
}

// hasAuthIn is HasAuth over the module tree dir ("": the running
// kernel's).
func hasAuthIn(ctx context.Context, h remote.Host, dir string, a peer.KernelAuth) (bool, error) {
	out, err := h.Run(ctx, []string{"sh", "-c", authScript, "sh", dir, a.Module, a.Needs})
	if err != nil {
		return false, fmt.Errorf("look for %s in the kernel: %w", a.Name, err)
	}
	return strings.TrimSpace(string(out)) == "yes", nil
}

// ModuleHint is what to do about a missing module.
func ModuleHint(m Module) string {
	return fmt.Sprintf("load it as root (modprobe %s), or install the kernel's extra modules (Ubuntu: linux-modules-extra-$(uname -r))", m.Name)
}

// CleanPeers runs each peer workload's Clean argv of pts on every role's
// host, as its node (peer.NodeProgram), saying what each removed: what a
// killed run of the peer left there, before an exec's first point.
func CleanPeers(ctx context.Context, s *hostset.Set, pts []plan.Point, info func(string)) error {
	var argvs [][]string
	for _, w := range PeerWorkloads(pts) {
		if t, err := peer.Lookup(w); err == nil && len(t.Clean) > 0 {
			argvs = append(argvs, t.Clean)
		}
	}
	if len(argvs) == 0 {
		return nil
	}
	return s.EachRole(func(_ int, t role.Target) error {
		for _, argv := range argvs {
			if argv[0] == peer.NodeProgram {
				argv = append([]string{t.NodePath}, argv[1:]...)
			}
			out, err := t.Host.Run(ctx, argv)
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if strings.HasPrefix(l, "removed ") {
					info(t.Label + ": " + l + " (a killed run's)")
				}
			}
			if err != nil {
				return t.Wrap(role.Facts, fmt.Errorf("%s: %w", strings.Join(argv, " "), err))
			}
		}
		return nil
	})
}
