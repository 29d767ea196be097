package summary

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
)

// WritePoints prints every point (runner plan's table, and exec
// --dry-run's) with its key and every parameter
// that has a CSV column, as the summary shows them.
func WritePoints(w io.Writer, pts []plan.Point) error {
	var cols []*results.Param
	head := []string{"#", "KEY"}
	for _, c := range results.Columns {
		p := results.ColumnParam(c)
		if p == nil || !slices.ContainsFunc(pts, func(pt plan.Point) bool { return pointCell(pt, p) != "-" }) {
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
			cells = append(cells, pointCell(pt, p))
		}
		reads := "-"
		if n := pt.ExpectedReads(); n > 0 {
			reads = fmt.Sprint(n)
		}
		fmt.Fprintln(tw, strings.Join(append(cells, reads), "\t"))
	}
	return tw.Flush()
}

// pointCell is p's value in point pt as the summary shows it; a duration
// left to its auto word (warmup: steady), whose CSV cell is empty until
// the row records what it took, shows the word.
func pointCell(pt plan.Point, p *results.Param) string {
	if c := pt.Cell(p); c != "" || p.Kind != results.KindDuration || !p.Auto || pt.Values.Int(p.ID()) >= 0 {
		return p.Display(c)
	}
	return p.AutoText()
}

// PeerBaseline is the workload the others are compared with when the plan
// sweeps workload: its first peer (runner summary --baseline picks
// another).
func PeerBaseline(pts []plan.Point) (Baseline, bool) {
	seen := map[string]bool{}
	first := ""
	for _, pt := range pts {
		w := pt.Values.Str(param.Workload)
		seen[w] = true
		if first == "" && w != "node" {
			first = w
		}
	}
	return Baseline{Param: "workload", Value: first}, first != "" && len(seen) > 1
}
