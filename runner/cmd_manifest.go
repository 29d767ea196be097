package main

import (
	"context"
	"fmt"
	"time"

	"rdmasweep/plan"
	"rdmasweep/runner/manifest"
	"rdmasweep/runner/role"
)

// writeManifest records the exec's provenance as RUN_ID.json beside the
// CSV: the plan (sha256, text, git describe) and each role's host facts,
// gathered in parallel with one command per role. exec calls it after
// connect and before the first row, so every row's run_id has a manifest.
// set are the --set assignments applied over the plan's text, recorded so
// the run can be repeated exactly.
func writeManifest(ctx context.Context, p *plan.Plan, r *roles, runID, csvPath string, set ...string) error {
	m := &manifest.Manifest{
		RunID:         runID,
		CreatedAt:     time.Now().UTC().Format(time.RFC3339),
		RunnerVersion: version,
		Plan:          manifest.ForPlan(ctx, p.Path, p.Name, p.Source, set),
		Hosts:         make([]manifest.Host, len(r.list)),
	}
	var queries []manifest.Query
	for i, s := range p.Hosts.Roles() {
		q := manifest.Query{Role: s.Name, NodePath: r.list[i].NodePath, CPUs: s.Host.CPUs}
		if s.Name == "server" {
			q.File = p.Base.Str("file")
		}
		queries = append(queries, q)
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
		return firstError(err)
	}
	path := manifest.PathFor(csvPath, runID)
	if err := manifest.Write(path, m); err != nil {
		// No point has run yet: stopping here loses nothing, while rows
		// without their manifest would lose what they were measured on.
		return withHint(fmt.Errorf("write manifest %s: %w", path, err), "the manifest goes beside the CSV; free space there or pass another --out")
	}
	return nil
}
