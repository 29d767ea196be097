package preflight

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"rdmasweep/plan"
	"rdmasweep/results/param"
	"rdmasweep/runner/hosts/remote"
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

// modulesScript prints each module of "$@" that is neither loaded
// (/sys/module, with - as _) nor found by modprobe -n.
const modulesScript = `for m in "$@"; do
  u=$(printf %s "$m" | tr - _)
  [ -d "/sys/module/$u" ] || modprobe -n -q "$m" 2>/dev/null || /sbin/modprobe -n -q "$m" 2>/dev/null || echo "$m"
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
		args = append(args, m.Name)
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

// ModuleHint is what to do about a missing module.
func ModuleHint(m Module) string {
	return fmt.Sprintf("load it as root (modprobe %s), or install the kernel's extra modules (Ubuntu: linux-modules-extra-$(uname -r))", m.Name)
}
