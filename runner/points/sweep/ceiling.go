package sweep

// The disk's ceiling (docs/ssd.md#the-disks-ceiling): fio's O_DIRECT
// reads of the server's file (peer.CeilingRuns), once per run and server
// host, the first time a cold point has run there: its node serve or
// prepare made the file, which need not exist before (create: true), and
// O_DIRECT leaves none of it in the page cache for the next cold point.
// The best run lands in the manifest and on that host's cold rows.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/files/manifest"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
	"rdmasweep/runner/points/peer"
)

// Each ceiling run reads at most CeilingMaxBytes of the file, for at most
// CeilingRuntime: the whole grid costs at most 8 × that.
const (
	CeilingMaxBytes = 1 << 30
	CeilingRuntime  = "2s"
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

// Set sets disk_ceiling_mb_s on rows, pt's, measuring the ceiling of its
// servers' files first (a pool's hosts each serve) when rows hold an ok
// cold row, on each host not measured yet.
func (c *Ceilings) Set(ctx context.Context, pt plan.Point, rows []results.Row) {
	if c == nil {
		return
	}
	cold := false
	for _, r := range rows {
		cold = cold || (r.Status == results.StatusOK && r.Param("cache") == "cold")
	}
	if !cold {
		return
	}
	for _, t := range c.Targets {
		serves := strings.HasPrefix(t.Role, "server") || strings.HasPrefix(t.Role, "pool")
		if serves && t.Host != nil && slices.ContainsFunc(pt.Hosts.Roles(), func(r plan.Role) bool { return r.Name == t.Role }) {
			c.measure(ctx, t, peer.FromValues(pt.For(t.Role)))
		}
	}
	by := c.Rec.Ceilings()
	for i := range rows {
		rows[i].SetDiskCeiling(by)
	}
}

// measure runs the ceiling's grid on t's host once, and records the best.
func (c *Ceilings) measure(ctx context.Context, t role.Target, p peer.Params) {
	c.mu.Lock()
	defer c.mu.Unlock()
	host := t.Host.Name()
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
	// tmpfs may take O_DIRECT (Linux 6.6 on) and would give memory's
	// speed as the disk's.
	if out, err := t.Host.Run(ctx, []string{"stat", "-f", "-c", "%T", "--", p.File}); err == nil {
		if fs := strings.TrimSpace(string(out)); fs == "tmpfs" || fs == "ramfs" {
			c.Warn(fmt.Sprintf("%s: %s is on %s, with no disk under it, so disk_ceiling_mb_s stays empty", t.Label, p.File, fs))
			return
		}
	}
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

// ceiling runs peer.CeilingRuns over the first size bytes of file on h,
// each bounded by CeilingRuntime.
func ceiling(ctx context.Context, h remote.Host, file string, size int64) (manifest.DiskCeiling, error) {
	dc := manifest.DiskCeiling{File: file}
	var reports [][]byte
	for _, argv := range peer.CeilingRuns(file, size) {
		argv = append(argv, "--runtime="+CeilingRuntime)
		out, err := h.Run(ctx, argv)
		if err != nil {
			return dc, fmt.Errorf("run %s: %w%s", strings.Join(argv, " "), err, stderrOf(err))
		}
		mbs, _, err := peer.Ceiling([][]byte{out})
		if err != nil {
			return dc, err
		}
		reports = append(reports, out)
		dc.Runs = append(dc.Runs, manifest.CeilingRun{Argv: argv, MBs: mbs})
	}
	mbs, _, err := peer.Ceiling(reports)
	if err != nil {
		return dc, err
	}
	if !(mbs > 0) {
		return dc, fmt.Errorf("fio read nothing from %s", file)
	}
	dc.MBs = mbs
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
