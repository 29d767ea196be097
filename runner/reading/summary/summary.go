// Package summary turns CSV rows into the end-of-run table: one line per
// point, with mean ± standard deviation over its repetitions, and the
// repetitions that stand out flagged by their modified z-score.
package summary

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"rdmasweep/internal/stat"
	"rdmasweep/results"
	"rdmasweep/results/param"
)

// Group is the rows of one point (one point_key) and scope (a client's
// row, or the aggregate of several), in file order.
type Group struct {
	Key    string // point key
	Scope  string
	First  results.Row // the first row, ok or not, for the parameters
	OK     []results.Row
	Failed int
	// Verdicts counts the group's rows, failed ones too, by verdict.
	Verdicts map[string]int
}

// Build groups rows by point key and scope, in order of first appearance.
// With several clients a point's client rows are one group and its
// aggregate rows another.
func Build(rows []results.Row) []Group {
	var groups []Group
	index := map[string]int{}
	for _, r := range rows {
		k := r.PointKey + "/" + r.Scope
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, Group{Key: r.PointKey, Scope: r.Scope, First: r})
		}
		if r.Status == results.StatusOK && r.BandwidthMBs != nil {
			groups[i].OK = append(groups[i].OK, r)
		} else {
			groups[i].Failed++
		}
		if r.Verdict != "" {
			if groups[i].Verdicts == nil {
				groups[i].Verdicts = map[string]int{}
			}
			groups[i].Verdicts[r.Verdict]++
		}
	}
	return groups
}

// Outliers returns the indexes of xs whose modified z-score exceeds 3.5
// (Iglewicz and Hoaglin). It needs at least 3 values. When the median
// absolute deviation is 0, the scale falls back to 1.253314 × the mean
// absolute deviation from the median.
func Outliers(xs []float64) []int {
	if len(xs) < 3 {
		return nil
	}
	med := stat.Median(xs)
	var meanAD float64
	for _, x := range xs {
		meanAD += math.Abs(x - med)
	}
	meanAD /= float64(len(xs))
	mad := stat.MAD(xs)
	var out []int
	for i, x := range xs {
		var z float64
		switch {
		case mad > 0:
			z = 0.6745 * (x - med) / mad
		case meanAD > 0:
			z = (x - med) / (1.253314 * meanAD)
		default:
			continue
		}
		if math.Abs(z) > 3.5 {
			out = append(out, i)
		}
	}
	return out
}

// Param is one parameter column of a row, as people read it.
type Param struct {
	Name  string
	Value func(r results.Row) string
}

// Params are the columns that tell points apart, in CSV order: the plan,
// the hosts, and every parameter column (results' schema), as people read
// them. The summary shows those that vary between points; runner plot
// splits series by them.
var Params = func() []Param {
	ps := []Param{{"plan", func(r results.Row) string { return r.Plan }}}
	for _, col := range results.Columns {
		switch p := results.ColumnParam(col); {
		case col == "server_host":
			ps = append(ps, Param{"server", func(r results.Row) string { return r.ServerHost }})
		case col == "client_host":
			ps = append(ps, Param{"client", func(r results.Row) string { return r.ClientHost }})
		case col == "scope":
			ps = append(ps, Param{"scope", func(r results.Row) string { return r.Scope }})
		case p != nil:
			ps = append(ps, Param{p.Name, func(r results.Row) string { return p.Display(r.Param(p.Name)) }})
		}
	}
	return ps
}()

// Write prints the table. The parameter columns are those that differ
// between the groups (block_size when none do).
func Write(w io.Writer, groups []Group) error {
	if len(groups) == 0 {
		return nil
	}
	var shown []Param
	for _, p := range Params {
		first := ""
		for i, g := range groups {
			v := p.Value(rowOf(g))
			if i == 0 {
				first = v
			} else if v != first {
				shown = append(shown, p)
				break
			}
		}
	}
	if len(shown) == 0 {
		for _, p := range Params {
			if p.Name == param.BlockSize.String() {
				shown = []Param{p}
			}
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	var head []string
	for _, p := range shown {
		head = append(head, strings.ToUpper(p.Name))
	}
	head = append(head, "RUNS", "MB/S", "±SD", "P50_US", "P99_US", "±SD", "IOPS")
	open := openLoop(groups)
	if open {
		head = append(head, "RESP_P99_US")
	}
	bound := hasBoundBy(groups)
	if bound {
		head = append(head, "BOUND_BY")
	}
	head = append(head, "")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	var notes []string
	for _, g := range groups {
		var cells []string
		r := rowOf(g)
		for _, p := range shown {
			cells = append(cells, p.Value(r))
		}
		runs := strconv.Itoa(len(g.OK))
		if g.Failed > 0 {
			runs += fmt.Sprintf(" (%d failed)", g.Failed)
		}
		var bw, p50, p99, iops []float64
		for _, r := range g.OK {
			bw = append(bw, *r.BandwidthMBs)
			p50 = append(p50, deref(r.LatP50Us))
			p99 = append(p99, deref(r.LatP99Us))
			iops = append(iops, deref(r.IOPS))
		}
		b, l50, l99, io := stat.MeanSD(bw), stat.MeanSD(p50), stat.MeanSD(p99), stat.MeanSD(iops)
		flag := ""
		if out := union(Outliers(bw), Outliers(p99)); len(out) > 0 {
			flag = "!"
			var reps []string
			for _, i := range out {
				reps = append(reps, fmt.Sprintf("r%d (%.1f MB/s, p99 %.1f us)", g.OK[i].Repetition, bw[i], p99[i]))
			}
			notes = append(notes, fmt.Sprintf("! point %s: %s stand out (modified z-score > 3.5)", g.Key, strings.Join(reps, ", ")))
		}
		if note := saturatedNote(g); note != "" {
			flag += "S"
			notes = append(notes, note)
		}
		cells = append(cells, runs, num(b.Mean, 1), sd(b, len(bw), 1), num(l50.Mean, 1), num(l99.Mean, 1), sd(l99, len(p99), 1), num(io.Mean, 0))
		if open {
			cells = append(cells, num(respP99(g).Mean, 1))
		}
		if bound {
			cells = append(cells, boundBy(g))
		}
		cells = append(cells, flag)
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") // the flag is a column too
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	saturated := false
	for _, n := range notes {
		fmt.Fprintln(w, n)
		saturated = saturated || strings.HasPrefix(n, "S ")
	}
	if saturated {
		fmt.Fprintln(w, saturatedWhy)
	}
	return nil
}

func rowOf(g Group) results.Row { return g.First }

// hasBoundBy reports whether any ok row says what bound it (rows written
// before the column have none).
func hasBoundBy(groups []Group) bool {
	for _, g := range groups {
		for _, r := range g.OK {
			if r.BoundBy != "" {
				return true
			}
		}
	}
	return false
}

// boundBy is what bound the group's ok runs: the one value when they
// agree, else each value with its count ("link 2, unknown 1"), most first.
func boundBy(g Group) string {
	n := map[string]int{}
	var order []string
	for _, r := range g.OK {
		v := r.BoundBy
		if v == "" {
			v = "-"
		}
		if n[v] == 0 {
			order = append(order, v)
		}
		n[v]++
	}
	if len(order) == 1 {
		return order[0]
	}
	slices.SortStableFunc(order, func(a, b string) int { return n[b] - n[a] })
	parts := make([]string, len(order))
	for i, v := range order {
		parts[i] = fmt.Sprintf("%s %d", v, n[v])
	}
	return strings.Join(parts, ", ")
}

func deref(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

func num(x float64, prec int) string {
	if math.IsNaN(x) {
		return "-"
	}
	return strconv.FormatFloat(x, 'f', prec, 64)
}

func sd(s stat.Moments, n, prec int) string {
	if n < 2 {
		return "-"
	}
	return "±" + strconv.FormatFloat(s.SD, 'f', prec, 64)
}

func union(a, b []int) []int {
	seen := map[int]bool{}
	var out []int
	for _, i := range append(a, b...) {
		if !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	sort.Ints(out)
	return out
}

// openLoop reports whether any of groups' rows is an open loop's, with
// response latency.
func openLoop(groups []Group) bool {
	for _, g := range groups {
		for _, r := range g.OK {
			if r.RespP99Us != nil {
				return true
			}
		}
	}
	return false
}

// respP99 is the mean response p99 of g's runs; NaN for a closed loop.
func respP99(g Group) stat.Moments {
	var xs []float64
	for _, r := range g.OK {
		xs = append(xs, deref(r.RespP99Us))
	}
	return stat.MeanSD(xs)
}

// saturatedWhy follows the notes of saturated points, once.
const saturatedWhy = "S: queue_depth reads were in flight when more than 1 % of the reads fell due, so those were posted late: the load was not offered as scheduled, and their wait is in the response latency (docs/load.md)"

// saturatedNote says which of g's runs were saturated: their queue depth
// held back more than 1 % of the reads as they fell due, so the open loop
// did not offer the load as scheduled, whatever its bandwidth. "" when
// none was.
func saturatedNote(g Group) string {
	var reps []string
	for _, r := range g.OK {
		if r.Saturated != nil && *r.Saturated {
			reps = append(reps, fmt.Sprintf("r%d (%.1f MB/s carried of %s offered, response p99 %.1f us)",
				r.Repetition, deref(r.BandwidthMBs), r.Param(param.Rate.String()), deref(r.RespP99Us)))
		}
	}
	if len(reps) == 0 {
		return ""
	}
	return fmt.Sprintf("S point %s: saturated in %d of %d runs: %s", g.Key, len(reps), len(g.OK), strings.Join(reps, ", "))
}
