package sweep

// The disk's ceiling (docs/ssd.md#the-disks-ceiling): fio's O_DIRECT
// reads of the server's file (peer.CeilingProbe, peer.CeilingRuns), once
// per run and server host, just before the first cold point to run
// there. node prepare first makes the file as the point would (create:
// true) and drops it from the page cache; O_DIRECT leaves none of it
// there. No point runs meanwhile, so no point's disk window holds these
// reads. The best run lands in the manifest and on that host's cold rows.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/files/manifest"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
	"rdmasweep/runner/points/peer"
)

// Each ceiling run reads within the first CeilingMaxBytes of the file,
// for peer.CeilingRuntime after peer.CeilingRamp; the grid's runs keep
// at most CeilingInFlight of the probe's rate in flight.
const (
	CeilingMaxBytes = 1 << 30
	CeilingInFlight = 1.0 // seconds
)

// Ceilings measures and keeps each server host's ceiling for one exec.
type Ceilings struct {
	Targets []role.Target
	Rec     *manifest.Record
	Info    func(msg string)
	Warn    func(msg string)

	mu   sync.Mutex
	done map[string]bool // by host name: measured or given up on
}

// Before measures, when pt is a cold point, the ceiling of the file of
// each of pt's servers (a pool's hosts each serve) whose host has none
// yet.
func (c *Ceilings) Before(ctx context.Context, pt plan.Point) {
	if c == nil {
		return
	}
	for _, t := range c.Targets {
		serves := strings.HasPrefix(t.Role, "server") || strings.HasPrefix(t.Role, "pool")
		if !serves || t.Host == nil || !slices.ContainsFunc(pt.Hosts.Roles(), func(r plan.Role) bool { return r.Name == t.Role }) {
			continue
		}
		if v := pt.For(t.Role); v.Str(param.Cache) == "cold" {
			c.measure(ctx, t, v)
		}
	}
}

// Set sets disk_ceiling_mb_s on rows from the ceilings measured so far.
func (c *Ceilings) Set(rows []results.Row) {
	if c == nil {
		return
	}
	by := c.Rec.Ceilings()
	for i := range rows {
		rows[i].SetDiskCeiling(by)
	}
}

// measure runs the ceiling on t's host once, and records the best run.
func (c *Ceilings) measure(ctx context.Context, t role.Target, v results.Values) {
	c.mu.Lock()
	defer c.mu.Unlock()
	host := t.Host.Name()
	p := peer.FromValues(v)
	if c.done[host] || p.File == "" || p.FileSize <= 0 {
		return
	}
	if c.done == nil {
		c.done = map[string]bool{}
	}
	c.done[host] = true
	if _, err := t.Host.Run(ctx, []string{"fio", "--version"}); err != nil {
		c.Warn(fmt.Sprintf("%s: no fio, so disk_ceiling_mb_s stays empty: install the fio package there (%v)", t.Label, err))
		return
	}
	if _, err := t.Host.Run(ctx, prepareArgv(t, v)); err != nil {
		c.Warn(fmt.Sprintf("%s: %s could not be made ready for the disk ceiling, so disk_ceiling_mb_s stays empty: %v%s", t.Label, p.File, err, stderrOf(err)))
		return
	}
	// tmpfs may take O_DIRECT (Linux 6.6 on) and would give memory's
	// speed as the disk's.
	if out, err := t.Host.Run(ctx, []string{"stat", "-f", "-c", "%T", "--", p.File}); err == nil {
		if fs := strings.TrimSpace(string(out)); fs == "tmpfs" || fs == "ramfs" {
			c.Warn(fmt.Sprintf("%s: %s is on %s, with no disk under it, so disk_ceiling_mb_s stays empty", t.Label, p.File, fs))
			return
		}
	}
	c.Info(fmt.Sprintf("measuring the disk ceiling of %s:%s before its first cold point (fio O_DIRECT)", host, p.File))
	dc, err := ceiling(ctx, t.Host, p.File, min(p.FileSize, CeilingMaxBytes))
	if err != nil {
		c.Warn(fmt.Sprintf("%s: the disk ceiling of %s was not measured, so disk_ceiling_mb_s stays empty: %v", t.Label, p.File, err))
		return
	}
	dc.Host = host
	c.Info(fmt.Sprintf("disk ceiling of %s:%s: %.0f MB/s (fio O_DIRECT, best of %d runs)", host, p.File, dc.MBs, len(dc.Runs)))
	if err := c.Rec.AddCeiling(dc); err != nil {
		c.Warn(fmt.Sprintf("the manifest lacks the disk ceiling of %s: %v", t.Label, err))
	}
}

// prepareArgv is node prepare of the point's file on t, cold: made as
// the point's server would make it, and out of the page cache.
func prepareArgv(t role.Target, v results.Values) []string {
	argv := []string{t.NodePath, "prepare", "--transport", results.TransportTCP}
	for _, id := range []param.ID{param.File, param.FileSize, param.Create} {
		argv = append(argv, results.ParamOf(id).Argv(results.TransportTCP, v)...)
	}
	return append(argv, "--cache", "cold")
}

// ceiling runs the probe over the first size bytes of file on h, then
// the grid's runs it allows.
func ceiling(ctx context.Context, h remote.Host, file string, size int64) (manifest.DiskCeiling, error) {
	dc := manifest.DiskCeiling{File: file}
	probe := peer.CeilingProbe(file, size)
	if probe == nil {
		return dc, fmt.Errorf("%s holds less than one %d-byte block", file, peer.CeilingProbeBlock)
	}
	run := func(argv []string) (float64, error) {
		out, err := h.Run(ctx, argv)
		if err != nil {
			return 0, fmt.Errorf("run %s: %w%s", strings.Join(argv, " "), err, stderrOf(err))
		}
		mbs, _, err := peer.Ceiling([][]byte{out})
		if err != nil {
			return 0, err
		}
		dc.Runs = append(dc.Runs, manifest.CeilingRun{Argv: argv, MBs: mbs})
		return mbs, nil
	}
	probeMBs, err := run(probe)
	if err != nil {
		return dc, err
	}
	dc.Runs[0].Probe = true
	// The grid's best is the ceiling. The probe only sizes the grid: it
	// reads its range round again for its time, and what sits below
	// O_DIRECT (a drive's or a hypervisor's cache) can serve a second
	// round; it stands for the disk only when no grid run fits.
	inFlight := int64(probeMBs * 1e6 * CeilingInFlight)
	for _, argv := range peer.CeilingRuns(file, size, inFlight) {
		mbs, err := run(argv)
		if err != nil {
			return dc, err
		}
		dc.MBs = max(dc.MBs, mbs)
	}
	if len(dc.Runs) == 1 {
		dc.MBs = probeMBs
	}
	if !(dc.MBs > 0) {
		return dc, fmt.Errorf("fio read nothing from %s", file)
	}
	return dc, nil
}

// stderrOf is a failed command's stderr, for the warning: fio says there
// why O_DIRECT was refused (tmpfs: Invalid argument).
func stderrOf(err error) string {
	var ee *remote.ExitError
	if !errors.As(err, &ee) || len(ee.Stderr) == 0 {
		return ""
	}
	return ": " + strings.TrimSpace(string(ee.Stderr))
}
