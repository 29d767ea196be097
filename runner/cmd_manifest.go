package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/hostfacts"
	"rdmasweep/runner/manifest"
	"rdmasweep/runner/role"
)

// runManifest is the exec's provenance, RUN_ID.json beside the CSV: the
// plan (sha256, text, git describe) and each role's host facts, gathered
// in parallel with one command per role; exec writes it after connect and
// before the first row, so every row's run_id has a manifest. It then
// grows as points run: the RDMA path each role used is written in when a
// role first reports it (a whole new file each time, renamed over).
type runManifest struct {
	path  string
	m     *manifest.Manifest
	mu    sync.Mutex
	roles map[string]int // role name → index in m.Hosts
}

// collectManifest gathers the manifest of this exec; set are the --set
// assignments applied over the plan's text, recorded so the run can be
// repeated exactly.
func collectManifest(ctx context.Context, p *plan.Plan, r *roles, runID, csvPath string, set ...string) (*runManifest, error) {
	m := &manifest.Manifest{
		RunID:         runID,
		CreatedAt:     time.Now().UTC().Format(time.RFC3339),
		RunnerVersion: version,
		Plan:          manifest.ForPlan(ctx, p.Path, p.Name, p.Source, set),
		Hosts:         make([]manifest.Host, len(r.list)),
	}
	rm := &runManifest{path: manifest.PathFor(csvPath, runID), m: m, roles: map[string]int{}}
	var queries []manifest.Query
	for i, s := range p.Hosts.Roles() {
		n := r.nodes[r.list[i].Host]
		q := manifest.Query{Role: s.Name, NodePath: r.list[i].NodePath, Binary: n.Path, BinaryArch: n.Arch, CPUs: s.Host.CPUs}
		if i < len(p.Hosts.Servers) {
			q.File = p.Base.Str(param.File)
		}
		queries = append(queries, q)
		rm.roles[s.Name] = i
	}
	err := parallel(len(queries), func(i int) error {
		t := r.list[i]
		h, err := manifest.Collect(ctx, t.Host, queries[i])
		if err != nil {
			return t.Wrap(role.Facts, err)
		}
		m.Hosts[i] = h
		return nil
	})
	if err != nil {
		return nil, firstError(err)
	}
	return rm, nil
}

// warnClocks warns, once per host, of a clock certainly beyond
// clockLimit from the runner's.
func (rm *runManifest) warnClocks(r *roles, ui *voice) {
	seen := map[string]bool{}
	for i, h := range rm.m.Hosts {
		if h.Clock == nil || seen[h.Name] {
			continue
		}
		seen[h.Name] = true
		c := hostfacts.Clock{Offset: time.Duration(h.Clock.OffsetNs), Uncertainty: time.Duration(h.Clock.UncertaintyNs)}
		if c.Disagrees(clockLimit) {
			ui.warnf("%s: %s", r.list[i].Label, clockWarning(c))
		}
	}
}

// kernels is each role's kernel, by role name.
func (rm *runManifest) kernels() map[string]string {
	out := map[string]string{}
	for name, i := range rm.roles {
		out[name] = rm.m.Hosts[i].Kernel
	}
	return out
}

// write writes the manifest whole.
func (rm *runManifest) write() error {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if err := manifest.Write(rm.path, rm.m); err != nil {
		// Before the first point, stopping loses nothing, while rows
		// without their manifest would lose what they were measured on.
		return withHint(fmt.Errorf("write manifest %s: %w", rm.path, err), "the manifest goes beside the CSV; free space there or pass another --out")
	}
	return nil
}

// addPath records an RDMA path role t reported, when it is new for the
// role, and rewrites the manifest; a failed rewrite is only warned about,
// since the rows are what must not be lost.
func (rm *runManifest) addPath(t role.Target, p *results.RDMAPath, warn func(string, ...any)) {
	// What varies by point is in the CSV's columns; the manifest keeps
	// what the host and fabric gave, max_rd_atomic included (auto leaves
	// it to the devices, and the column then is empty).
	q := *p
	q.QueueDepthPerQP, q.CQModeration, q.RelaxedOrdering = 0, 0, nil
	rm.mu.Lock()
	i, ok := rm.roles[t.Role]
	if !ok || slices.Contains(rm.m.Hosts[i].RDMA, q) {
		rm.mu.Unlock()
		return
	}
	rm.m.Hosts[i].RDMA = append(rm.m.Hosts[i].RDMA, q)
	rm.mu.Unlock()
	if err := rm.write(); err != nil {
		warn("the manifest lacks the RDMA path of %s: %v", t.Label, err)
	}
}
