package summary

// Ratios against a baseline: `runner summary --baseline workload=iperf3`
// puts each point beside the baseline's point with the same value of every
// other parameter, so node and its peer are compared where they ran under
// the same settings, side by side in one run.

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

// Baseline names the parameter whose value the others are compared with,
// and that value: workload=ib_read_bw; and the column compared (Metric,
// a numeric column; "" is end_to_end_mb_s where every row compared is
// cold and has it, the file's way from the disk, else bandwidth_mb_s).
type Baseline struct{ Param, Value, Metric string }

// metric is the column b compares over ratios, and each row's figure of
// it (nil where the row has none).
func (b Baseline) metric(ratios []Ratio) (string, func(results.Row) *float64) {
	col := b.Metric
	if col == "" {
		col = "bandwidth_mb_s"
		if allColdEndToEnd(ratios) {
			col = "end_to_end_mb_s"
		}
	}
	return col, func(r results.Row) *float64 {
		if v, ok := r.Metric(col); ok {
			return &v
		}
		return nil
	}
}

// ParseBaseline reads "name=value"; name must be a parameter with a
// column.
func ParseBaseline(s string) (Baseline, error) {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" || value == "" {
		return Baseline{}, fmt.Errorf("--baseline must be name=value, e.g. workload=ib_read_bw (got %q)", s)
	}
	if results.ParamColumn(name) == "" {
		return Baseline{}, fmt.Errorf("--baseline: %q is not a parameter with a CSV column", name)
	}
	return Baseline{Param: name, Value: value}, nil
}

// cell is row's value of param as the CSV means it: a workload left empty
// by an older rdmasweep was node.
func cell(r results.Row, name string) string {
	if name == param.Workload.String() {
		return r.Workload()
	}
	return r.Param(name)
}

// matchKey is a row's value of every parameter column but param: the rows
// of two groups are compared when it is equal. The hosts are not
// parameters (fio reads on the server's host, so its client differs).
func matchKey(r results.Row, param string) string {
	var parts []string
	for _, col := range results.Columns {
		if p := results.ColumnParam(col); p != nil && p.Name != param {
			parts = append(parts, p.Name+"="+cell(r, p.Name))
		}
	}
	return strings.Join(parts, " ")
}

// covers reports whether baseline row b stands for row r: every
// parameter column but param equal, or empty in either. An empty cell is
// a parameter that row's workload does not use (a peer's pipeline),
// which the plan expanded once for every value the other may have: a
// peer baseline covers node's rows, and a node baseline a peer's.
func covers(b, r results.Row, param string) bool {
	for _, col := range results.Columns {
		p := results.ColumnParam(col)
		if p == nil || p.Name == param {
			continue
		}
		if c, rc := cell(b, p.Name), cell(r, p.Name); c != "" && rc != "" && c != rc {
			return false
		}
	}
	return true
}

// Ratio is one group beside its baseline group.
type Ratio struct {
	Group, Base *Group // Base is nil when no baseline group matches
}

// Match pairs every group that is not the baseline with the baseline
// group of the same other parameters, in the groups' order; failing that,
// with the first baseline group that covers it (a parameter the baseline
// does not use left empty).
func Match(groups []Group, b Baseline) []Ratio {
	base := map[string]*Group{}
	var bases []*Group
	for i := range groups {
		if g := &groups[i]; cell(g.First, b.Param) == b.Value && len(g.OK) > 0 {
			bases = append(bases, g)
			if _, seen := base[matchKey(g.First, b.Param)]; !seen {
				base[matchKey(g.First, b.Param)] = g
			}
		}
	}
	var out []Ratio
	for i := range groups {
		g := &groups[i]
		if cell(g.First, b.Param) == b.Value || len(g.OK) == 0 {
			continue
		}
		r := Ratio{Group: g, Base: base[matchKey(g.First, b.Param)]}
		for _, bg := range bases {
			if r.Base != nil {
				break
			}
			if covers(bg.First, g.First, b.Param) {
				r.Base = bg
			}
		}
		out = append(out, r)
	}
	return out
}

// allColdEndToEnd reports whether every ok row of every compared pair of
// groups is cold and has end_to_end_mb_s.
func allColdEndToEnd(ratios []Ratio) bool {
	n := 0
	for _, r := range ratios {
		for _, g := range []*Group{r.Group, r.Base} {
			if g == nil {
				continue
			}
			for _, row := range g.OK {
				if row.Param(param.Cache.String()) != "cold" || row.EndToEndMBs == nil {
					return false
				}
				n++
			}
		}
	}
	return n > 0
}

// pairRatios are the ratios of fig on r's rows to its baseline's rows of
// the same run and repetition: pairs that ran side by side, in run order.
// A group whose rows have no such partner counts by its means.
func pairRatios(r Ratio, fig func(results.Row) *float64) []float64 {
	base := map[string]float64{}
	for _, b := range r.Base.OK {
		base[fmt.Sprintf("%s/%d", b.RunID, b.Repetition)] = deref(fig(b))
	}
	var out []float64
	for _, g := range r.Group.OK {
		if bw, ok := base[fmt.Sprintf("%s/%d", g.RunID, g.Repetition)]; ok && bw > 0 && !math.IsNaN(deref(fig(g))) {
			out = append(out, deref(fig(g))/bw)
		}
	}
	if len(out) == 0 {
		if x := meanOf(r.Group, fig) / meanOf(r.Base, fig); !math.IsNaN(x) && !math.IsInf(x, 0) {
			out = append(out, x)
		}
	}
	return out
}

// meanOf is the mean of a figure over a group's ok rows (NaN: none).
func meanOf(g *Group, f func(results.Row) *float64) float64 {
	if g == nil {
		return math.NaN()
	}
	var xs []float64
	for _, r := range g.OK {
		xs = append(xs, deref(f(r)))
	}
	return stat.MeanSD(xs).Mean
}

func bandwidth(r results.Row) *float64    { return r.BandwidthMBs }
func registration(r results.Row) *float64 { return r.RegistrationMBs }
func populate(r results.Row) *float64     { return r.PopulateMBs }

// fileRead is a node figure that reads the server's file, shown as NAME_MB/S
// and NAME/FIO beside a fio baseline.
type fileRead struct {
	name string
	rate func(results.Row) *float64
}

// fileReads are the figures that read the file: the pinned registration
// (which faults it in, unless populated first) and the populate.
var fileReads = []fileRead{{"REG", registration}, {"POP", populate}}

func cpuClient(r results.Row) *float64 { return r.CPUClient }
func cpuServer(r results.Row) *float64 { return r.CPUServer }

// WriteRatios prints each group beside its baseline: the mean bandwidth of
// both and their ratio, the CPU seconds per second of each role for both,
// and, when the rows have them, the registration and populate rates
// against the baseline's bandwidth when the baseline is fio (node's reads
// of the file against fio's read of the same file). The parameters that vary are shown, as in Write. Then, per
// compared value, the ratio of every pair that ran side by side (same run,
// same repetition) and their median.
func WriteRatios(w io.Writer, groups []Group, b Baseline) error {
	ratios := Match(groups, b)
	if len(ratios) == 0 {
		_, err := fmt.Fprintf(w, "no rows to compare with %s=%s\n", b.Param, b.Value)
		return err
	}
	var shown []Param
	for _, p := range Params {
		if p.Name == b.Param || p.Name == "plan" || p.Name == "server" || p.Name == "client" {
			continue
		}
		for _, r := range ratios[1:] {
			if p.Value(r.Group.First) != p.Value(ratios[0].Group.First) {
				shown = append(shown, p)
				break
			}
		}
	}
	// Pinned registration and populate read the file: they compare with
	// a baseline that reads the file too (fio, fio_matched), not with
	// one that reads memory.
	var reads []fileRead
	for _, fr := range fileReads {
		if b.Param == param.Workload.String() && (b.Value == "fio" || b.Value == "fio_matched") &&
			slices.ContainsFunc(ratios, func(r Ratio) bool { return !math.IsNaN(meanOf(r.Group, fr.rate)) }) {
			reads = append(reads, fr)
		}
	}
	head := []string{}
	for _, p := range shown {
		head = append(head, strings.ToUpper(p.Name))
	}
	base := strings.ToUpper(b.Value)
	col, fig := b.metric(ratios)
	name := "MB/S"
	if col != "bandwidth_mb_s" {
		name = strings.ToUpper(col)
	}
	head = append(head, strings.ToUpper(b.Param), name, base+"_"+name, "RATIO", "CPU_CLIENT", base, "CPU_SERVER", base)
	for _, fr := range reads {
		head = append(head, fr.name+"_MB/S", fr.name+"/"+base)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	byValue := map[string][]float64{}
	var order []string
	missing := 0
	for _, r := range ratios {
		var cells []string
		for _, p := range shown {
			cells = append(cells, p.Value(r.Group.First))
		}
		v := cell(r.Group.First, b.Param)
		bw, bbw := meanOf(r.Group, fig), meanOf(r.Base, fig)
		ratio := bw / bbw
		if r.Base == nil {
			missing++
		} else if pairs := pairRatios(r, fig); len(pairs) > 0 {
			if _, seen := byValue[v]; !seen {
				order = append(order, v)
			}
			byValue[v] = append(byValue[v], pairs...)
		}
		cells = append(cells, v, num(bw, 1), num(bbw, 1), num(ratio, 2),
			num(meanOf(r.Group, cpuClient), 2), num(meanOf(r.Base, cpuClient), 2),
			num(meanOf(r.Group, cpuServer), 2), num(meanOf(r.Base, cpuServer), 2))
		for _, fr := range reads {
			x := meanOf(r.Group, fr.rate)
			cells = append(cells, num(x, 1), num(x/meanOf(r.Base, bandwidth), 2))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, v := range order {
		xs := byValue[v]
		ratios := make([]string, len(xs))
		for i, x := range xs {
			ratios[i] = strconv.FormatFloat(x, 'f', 2, 64)
		}
		sorted := slices.Clone(xs)
		sort.Float64s(sorted)
		of := ""
		if col != "bandwidth_mb_s" {
			of = " of " + col
		}
		fmt.Fprintf(w, "%s / %s: median ratio%s %.2f over %d pairs run side by side (%s)\n", v, b.Value, of, stat.Median(sorted), len(xs), strings.Join(ratios, ", "))
	}
	if missing > 0 {
		fmt.Fprintf(w, "%d points have no %s=%s point with the same other parameters to compare with\n", missing, b.Param, b.Value)
	}
	return nil
}
