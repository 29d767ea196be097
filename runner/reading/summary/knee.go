package summary

// The knees of a search CSV: for each outer point (each combination of
// the parameters but the searched one), the value its walk found, read
// from the rows marked knee. The CSV alone says which parameter was
// searched: among the searchable parameters, the one whose removal groups
// the search rows into the fewest outer points.

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"rdmasweep/internal/stat"
	"rdmasweep/results"
)

// Knee is one outer point's knee.
type Knee struct {
	// Point are the parameters that tell the outer points apart, by their
	// plan names (empty with one outer point).
	Point map[string]string `json:"point"`
	Param string            `json:"param"`
	// Knee is the value found, or nil when the walk's first value already
	// failed (or its walk has not ended).
	Knee *int64 `json:"knee"`
	Runs int    `json:"runs"` // the runs at the knee that the medians are over
	// Medians are, at the knee, the median of every metric its ok rows
	// have, by column name.
	Medians map[string]float64 `json:"medians,omitempty"`
}

// Knees are the knees of rows, in order of each outer point's first row;
// none when no row has a search mark. Where several execs marked a knee
// for one outer point, the last in file order counts.
func Knees(rows []results.Row) []Knee {
	var marked []results.Row
	for _, r := range rows {
		if r.Search != "" {
			marked = append(marked, r)
		}
	}
	if len(marked) == 0 {
		return nil
	}
	prm := searched(marked)
	var order []string
	byOuter := map[string][]results.Row{}
	for _, r := range marked {
		k := r.Plan + " " + matchKey(r, prm)
		if _, ok := byOuter[k]; !ok {
			order = append(order, k)
		}
		byOuter[k] = append(byOuter[k], r)
	}
	var knees []Knee
	for _, k := range order {
		knees = append(knees, kneeOf(byOuter[k], prm))
	}
	setPoints(knees, order, byOuter)
	return knees
}

// kneeOf is the knee of one outer point's rows.
func kneeOf(rows []results.Row, prm string) Knee {
	kn := Knee{Param: prm, Point: map[string]string{}}
	last := -1
	for i, r := range rows {
		if r.Search == results.SearchKnee {
			last = i
		}
	}
	if last < 0 {
		return kn
	}
	v, run := rows[last].ParamInt(prm), rows[last].RunID
	kn.Knee = &v
	var at []results.Row
	scope := results.ScopeClient
	for _, r := range rows {
		if r.Search == results.SearchKnee && r.RunID == run && r.ParamInt(prm) == v {
			at = append(at, r)
			if r.Scope == results.ScopeAggregate {
				scope = r.Scope
			}
		}
	}
	figs := map[string][]float64{}
	for _, r := range at {
		if r.Scope != scope && r.Scope != "" {
			continue
		}
		kn.Runs++
		for _, col := range results.MetricColumns() {
			if x, ok := r.Metric(col); ok && r.Status == results.StatusOK {
				figs[col] = append(figs[col], x)
			}
		}
	}
	kn.Medians = map[string]float64{}
	for col, xs := range figs {
		kn.Medians[col] = stat.Median(xs)
	}
	return kn
}

// searched is the searched parameter of the marked rows: the searchable
// parameter column whose removal leaves the fewest outer points, one
// whose values vary first.
func searched(rows []results.Row) string {
	best, bestN, bestVaries := "", 0, false
	for _, p := range results.Params() {
		if !p.Sweep || (p.Kind != results.KindInt && p.Kind != results.KindSize) || results.ParamColumn(p.Name) == "" {
			continue
		}
		outer, values := map[string]bool{}, map[string]bool{}
		for _, r := range rows {
			outer[r.Plan+" "+matchKey(r, p.Name)] = true
			values[r.Param(p.Name)] = true
		}
		n, varies := len(outer), len(values) > 1
		if best == "" || n < bestN || (n == bestN && varies && !bestVaries) {
			best, bestN, bestVaries = p.Name, n, varies
		}
	}
	return best
}

// setPoints fills each knee's Point with the parameters whose values
// differ between the outer points.
func setPoints(knees []Knee, order []string, byOuter map[string][]results.Row) {
	for _, p := range Params {
		if len(knees) == 0 || p.Name == knees[0].Param {
			continue
		}
		first, differ := p.Value(byOuter[order[0]][0]), false
		for _, k := range order[1:] {
			differ = differ || p.Value(byOuter[k][0]) != first
		}
		if !differ {
			continue
		}
		for i, k := range order {
			knees[i].Point[p.Name] = p.Value(byOuter[k][0])
		}
	}
}

// WriteKneesJSON writes {"knees":[…]}, one object per outer point.
func WriteKneesJSON(w io.Writer, knees []Knee) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Knees []Knee `json:"knees"`
	}{knees})
}

// WriteKnees prints one line per outer point: its parameters, the knee,
// and the median p99 and bandwidth there.
func WriteKnees(w io.Writer, knees []Knee) error {
	if len(knees) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	var names []string
	for _, p := range Params {
		if _, ok := knees[0].Point[p.Name]; ok {
			names = append(names, p.Name)
		}
	}
	head := append(upper(names), "KNEE "+strings.ToUpper(knees[0].Param), "RUNS", "P99_US", "MB/S")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, k := range knees {
		var cells []string
		for _, n := range names {
			cells = append(cells, k.Point[n])
		}
		if k.Knee == nil {
			cells = append(cells, "none", "-", "-", "-")
		} else {
			cells = append(cells, fmt.Sprint(*k.Knee), fmt.Sprint(k.Runs), median(k, "lat_p99_us", 1), median(k, "bandwidth_mb_s", 1))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	return tw.Flush()
}

func upper(names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, strings.ToUpper(n))
	}
	return out
}

func median(k Knee, col string, prec int) string {
	x, ok := k.Medians[col]
	if !ok {
		return "-"
	}
	return num(x, prec)
}
