package check

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/files/manifest"
	"rdmasweep/runner/hosts/role"
	"rdmasweep/runner/points/peer"
	"rdmasweep/runner/points/preflight"
	"rdmasweep/runner/points/probe"
)

// Calibrate runs check --calibrate's comparison (probe.Calibrate) between
// each of the plan's clients and its server, pairs pairs a size, once the
// check found no problem: node and ib_read_bw over the plan's device, GID
// and connection. A pair whose hosts lack ib_read_bw, or that disagrees,
// files a problem on its client's row; with a problem already, nothing
// runs and there is no calibration. progress is told of each run. The
// runs' logs are in a directory of their own, returned when a size did
// not agree, and removed otherwise.
func (c *Table) Calibrate(ctx context.Context, pairs int, progress func(string)) (cals []manifest.Calibration, keptLogs string, err error) {
	if c.p.Transport() != results.TransportRDMA {
		return nil, "", fmt.Errorf("%s: calibration compares RDMA READs, and the plan's transport is %s", c.p.Path, c.p.Transport())
	}
	if c.Problems() > 0 {
		return nil, "", nil
	}
	pt := c.pts[0]
	pt.Values = pt.Values.With(param.Workload, peer.IBReadBW)
	if err := c.needPerftest(ctx, pt); err != nil || c.Problems() > 0 {
		return nil, "", err
	}
	logDir, err := os.MkdirTemp("", "rdmasweep-calibrate-")
	if err != nil {
		return nil, "", fmt.Errorf("create log directory: %w", err)
	}
	defer func() {
		if keptLogs == "" {
			os.RemoveAll(logDir)
		}
	}()
	env := probe.Env{Plan: c.p, Set: c.set, LogDir: logDir, Warn: func(string) {}, Choices: map[string]results.DeviceChoice{}}
	for _, row := range c.Rows {
		if row.choice != nil {
			env.Choices[row.Role] = *row.choice
		}
	}
	for _, pair := range preflight.Pairs(c.p) {
		say := func(what string) {
			if progress != nil {
				progress(fmt.Sprintf("%s → %s: %s", pair.Server.Name, pair.Client.Name, what))
			}
		}
		cal, ok := env.Calibrate(ctx, pt, pair, pairs, say)
		if !ok {
			return cals, "", context.Cause(ctx)
		}
		cal.Node = c.sums[c.rowIndex(pair.Server.Name)]
		cals = append(cals, cal)
		row := c.Rows[c.rowIndex(pair.Client.Name)]
		for _, s := range cal.Sizes {
			if !s.Agree {
				row.Problems = append(row.Problems, calibrationProblem(s))
				keptLogs = logDir
			}
		}
	}
	return cals, keptLogs, nil
}

// calibrationProblem is a size that did not agree, as check files it.
func calibrationProblem(s manifest.CalibrationSize) preflight.Problem {
	at := results.FormatSize(s.BlockSize)
	if s.Error != "" {
		return preflight.Problem{Check: "calibrate", Msg: fmt.Sprintf("at %s: %s", at, s.Error), Hint: "the probe logs say why; runner check without --calibrate proves the path first"}
	}
	return preflight.Problem{Check: "calibrate", Msg: fmt.Sprintf("at %s node/ib_read_bw is %.3f (%s), outside ±%.0f%%", at, s.Ratio, probe.CalibrationVerdict(s), probe.CalibrationTolerance*100),
		Hint: "node and perftest do not read alike on these hosts: compare their argv (docs/workloads.md) and CPUs, and report it with the calibration file before trusting node's figures here"}
}

// needPerftest files a problem on each row whose host lacks what
// ib_read_bw's role there needs.
func (c *Table) needPerftest(ctx context.Context, pt plan.Point) error {
	return c.set.EachRole(func(i int, t role.Target) error {
		progs := preflight.ProgramsFor([]plan.Point{pt}, t.Role)
		if len(progs) == 0 {
			return nil
		}
		facts, err := preflight.Programs(ctx, t.Host, progs)
		if err != nil {
			return t.Wrap(role.Facts, err)
		}
		for _, m := range preflight.Missing(progs, facts) {
			c.Rows[i].Problems = append(c.Rows[i].Problems, preflight.Problem{Check: "calibrate", Msg: fmt.Sprintf("%s is not on the host's PATH", m.Binary), Hint: m.Install()})
		}
		return nil
	})
}

// Problems counts the problems filed on every row.
func (c *Table) Problems() int {
	n := 0
	for _, row := range c.Rows {
		n += len(row.Problems)
	}
	return n
}

func (c *Table) rowIndex(name string) int {
	for i, row := range c.Rows {
		if row.Role == name {
			return i
		}
	}
	panic("check: no row for role " + name)
}

// WriteCalibrations prints each calibration's sizes: each program's MB/s
// in every pair, the median of the pairs' ratios, and the verdict.
func WriteCalibrations(w io.Writer, cs []manifest.Calibration) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tCLIENT\tBLOCK\tPAIRS\tNODE_MB_S\tIB_READ_BW_MB_S\tNODE/IB_READ_BW\tVERDICT")
	for _, c := range cs {
		for _, s := range c.Sizes {
			ratio := "-"
			if s.Ratio > 0 {
				ratio = fmt.Sprintf("%.3f", s.Ratio)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", c.Server, c.Client, results.FormatSize(s.BlockSize), len(s.NodeMBs),
				pairsCell(s.NodeMBs), pairsCell(s.PeerMBs), ratio, probe.CalibrationVerdict(s))
		}
	}
	return tw.Flush()
}

func pairsCell(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.1f", x)
	}
	return strings.Join(parts, " ")
}
