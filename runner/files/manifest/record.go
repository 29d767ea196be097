package manifest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/hint"
	"rdmasweep/runner/hosts/hostset"
	"rdmasweep/runner/hosts/role"
)

// Record is one exec's manifest as the exec writes it: gathered after
// connect and written before the first row, so every row's run_id has a
// manifest; then grown as points run, when a role first reports the RDMA
// path it used (a whole new file each time, renamed over). It is safe for
// concurrent use.
type Record struct {
	Path  string
	M     *Manifest
	mu    sync.Mutex
	roles map[string]int // role name → index in M.Hosts
}

// Exec is what names an exec in its manifest.
type Exec struct {
	RunID, CSVPath, RunnerVersion string
	// Set are the --set assignments applied over the plan's text,
	// recorded so the run can be repeated exactly.
	Set []string
}

// Gather collects the manifest of exec e of plan p on the roles of s, in
// parallel with one command per role.
func Gather(ctx context.Context, p *plan.Plan, s *hostset.Set, e Exec) (*Record, error) {
	m := &Manifest{
		RunID:         e.RunID,
		CreatedAt:     time.Now().UTC().Format(time.RFC3339),
		RunnerVersion: e.RunnerVersion,
		Plan:          ForPlan(ctx, p.Path, p.Name, p.Source, e.Set),
		Hosts:         make([]Host, len(s.Roles)),
	}
	rec := &Record{Path: PathFor(e.CSVPath, e.RunID), M: m, roles: map[string]int{}}
	var queries []Query
	for i, r := range p.Hosts.Roles() {
		n := s.Nodes[s.Roles[i].Host]
		q := Query{Role: r.Name, NodePath: s.Roles[i].NodePath, Binary: n.Path, BinaryArch: n.Arch, CPUs: r.Host.CPUs}
		if i < len(p.Hosts.Servers) {
			q.File = p.Base.Str(param.File)
		}
		queries = append(queries, q)
		rec.roles[r.Name] = i
	}
	err := s.EachRole(func(i int, t role.Target) error {
		h, err := Collect(ctx, t.Host, queries[i])
		if err != nil {
			return t.Wrap(role.Facts, err)
		}
		m.Hosts[i] = h
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// Kernels is each role's kernel, by role name.
func (rec *Record) Kernels() map[string]string {
	out := map[string]string{}
	for name, i := range rec.roles {
		out[name] = rec.M.Hosts[i].Kernel
	}
	return out
}

// Write writes the manifest whole.
func (rec *Record) Write() error {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if err := Write(rec.Path, rec.M); err != nil {
		// Before the first point, stopping loses nothing, while rows
		// without their manifest would lose what they were measured on.
		return hint.Wrap(fmt.Errorf("write manifest %s: %w", rec.Path, err), "the manifest goes beside the CSV; free space there or pass another --out")
	}
	return nil
}

// AddPath records an RDMA path role t reported, when it is new for the
// role, and rewrites the manifest; a failed rewrite is only warned about,
// since the rows are what must not be lost.
func (rec *Record) AddPath(t role.Target, p *results.RDMAPath, warn func(msg string)) {
	// What varies by point is in the CSV's columns; the manifest keeps
	// what the host and fabric gave, max_rd_atomic included (auto leaves
	// it to the devices, and the column then is empty).
	q := *p
	q.QueueDepthPerQP, q.CQModeration, q.RelaxedOrdering = 0, 0, nil
	rec.mu.Lock()
	i, ok := rec.roles[t.Role]
	// Paths compare by value: their optional fields (relaxed ordering
	// granted, the default ToS) are pointers, which == compares by address.
	same := func(r results.RDMAPath) bool { return reflect.DeepEqual(r, q) }
	if !ok || slices.ContainsFunc(rec.M.Hosts[i].RDMA, same) {
		rec.mu.Unlock()
		return
	}
	rec.M.Hosts[i].RDMA = append(rec.M.Hosts[i].RDMA, q)
	rec.mu.Unlock()
	if err := rec.Write(); err != nil {
		warn(fmt.Sprintf("the manifest lacks the RDMA path of %s: %v", t.Label, err))
	}
}

// NewRunID is sortable by time and unique: 20261202T150405Z-1a2b3c.
func NewRunID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}

// AddCeiling records a server file's disk ceiling and rewrites the
// manifest.
func (rec *Record) AddCeiling(dc DiskCeiling) error {
	rec.mu.Lock()
	rec.M.DiskCeilings = append(rec.M.DiskCeilings, dc)
	rec.mu.Unlock()
	return rec.Write()
}

// AddLinkCapacity records a link's measured capacity and rewrites the
// manifest.
func (rec *Record) AddLinkCapacity(lc LinkCapacity) error {
	rec.mu.Lock()
	rec.M.LinkCapacities = append(rec.M.LinkCapacities, lc)
	rec.mu.Unlock()
	return rec.Write()
}

// LinkCapacities are the link capacities measured so far, by
// results.LinkKey.
func (rec *Record) LinkCapacities() map[string]float64 {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := map[string]float64{}
	for _, lc := range rec.M.LinkCapacities {
		if lc.MBs > 0 {
			out[results.LinkKey(lc.Server, lc.Client, lc.Transport)] = lc.MBs
		}
	}
	return out
}

// Ceilings are the disk ceilings recorded so far, by host.
func (rec *Record) Ceilings() map[string]float64 {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.M.Ceilings()
}
