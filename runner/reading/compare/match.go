package compare

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"rdmasweep/internal/stat"
	"rdmasweep/plan"
	"rdmasweep/results"
)

// DefaultMetrics are compared when none is named.
var DefaultMetrics = []string{"bandwidth_mb_s", "lat_p50_us", "lat_p99_us"}

// Cond is one parameter at one value, as a plan writes it:
// registration=odp, block_size=4KiB.
type Cond struct{ Param, Value string }

func (c Cond) String() string { return c.Param + "=" + c.Value }

// holds reports whether row's cell of the parameter is the value, read in
// the parameter's own syntax (4KiB is the cell 4096).
func (c Cond) holds(r results.Row) bool {
	cell := r.Param(c.Param)
	if c.Param == "workload" {
		cell = r.Workload()
	}
	if cell == c.Value {
		return true
	}
	p := results.ParamByName(c.Param)
	switch {
	case p.Kind == results.KindSize:
		n, err := results.ParseSize(c.Value)
		return err == nil && strconv.FormatInt(n, 10) == cell
	case p.Display(cell) == c.Value:
		return true
	}
	return false
}

// ParseCond reads name=value; name must be a parameter with a column.
func ParseCond(s string) (Cond, error) {
	name, value, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok || name == "" || value == "" {
		return Cond{}, fmt.Errorf("%q is not name=value, e.g. registration=odp", s)
	}
	if results.ParamColumn(name) == "" {
		return Cond{}, fmt.Errorf("%q is not a parameter with a CSV column%s", name, plan.Suggest(name, columnParams()))
	}
	return Cond{Param: name, Value: value}, nil
}

// ParseBetween reads --between's OLD,NEW: two conditions, the old side's
// and the new side's.
func ParseBetween(s string) (old, new Cond, err error) {
	a, b, ok := strings.Cut(s, ",")
	if !ok {
		return Cond{}, Cond{}, fmt.Errorf("--between takes two conditions, old,new: registration=pinned,registration=odp (got %q)", s)
	}
	if old, err = ParseCond(a); err != nil {
		return Cond{}, Cond{}, fmt.Errorf("--between: %w", err)
	}
	if new, err = ParseCond(b); err != nil {
		return Cond{}, Cond{}, fmt.Errorf("--between: %w", err)
	}
	return old, new, nil
}

// Options say how rows are matched and what is compared.
type Options struct {
	// By names the parameters whose values match a point; empty: the
	// point key, or, with Between, every parameter but Between's.
	By []string
	// Between, when set, picks each side's rows from one set of rows.
	Between *[2]Cond
	// Metrics are the columns compared; empty: DefaultMetrics.
	Metrics []string
	// Alpha is the significance level; 0: 0.05.
	Alpha float64
}

// Point is one matched point's comparison of one metric.
type Point struct {
	// Params are the parameters both sides share, by plan name, as the
	// CSV has their cells.
	Params map[string]string
	// Scope is the rows' scope: client, or aggregate for a fan-in's sum.
	Scope  string
	Metric string
	stat.Comparison
}

// Result is a comparison: the matched points, each metric in turn, and
// what could not be matched.
type Result struct {
	Points []Point
	// Unmatched says, for each side, how many of its points have no
	// partner.
	UnmatchedOld, UnmatchedNew int
}

// group is one side's ok rows of one point and scope.
type group struct {
	key  string
	rows []results.Row
}

// Compare matches old's points with new's and compares each metric. Only
// rows with status ok count; a point's client and aggregate rows are
// compared apart.
func Compare(old, new []results.Row, o Options) (Result, error) {
	if len(o.Metrics) == 0 {
		o.Metrics = DefaultMetrics
	}
	if o.Alpha == 0 {
		o.Alpha = 0.05
	}
	for _, m := range o.Metrics {
		if !slices.Contains(results.MetricColumns(), m) {
			return Result{}, fmt.Errorf("metric %q is not a numeric result column%s", m, plan.Suggest(m, results.MetricColumns()))
		}
	}
	for _, p := range o.By {
		if results.ParamColumn(p) == "" {
			return Result{}, fmt.Errorf("--by: %q is not a parameter with a CSV column%s", p, plan.Suggest(p, columnParams()))
		}
	}
	if o.Between != nil {
		old, new = pick(old, o.Between[0]), pick(new, o.Between[1])
	}
	og, ng := groups(old, o), groups(new, o)
	var res Result
	seen := map[string]bool{}
	for _, a := range og {
		i := slices.IndexFunc(ng, func(b group) bool { return b.key == a.key })
		if i < 0 {
			res.UnmatchedOld++
			continue
		}
		seen[a.key] = true
		b := ng[i]
		shared := sharedParams(a.rows[0], b.rows[0])
		for _, m := range o.Metrics {
			xs, ys := values(a.rows, m), values(b.rows, m)
			if len(xs) == 0 || len(ys) == 0 {
				continue
			}
			res.Points = append(res.Points, Point{Params: shared, Scope: a.rows[0].Scope, Metric: m, Comparison: stat.Compare(xs, ys, o.Alpha)})
		}
	}
	for _, b := range ng {
		if !seen[b.key] {
			res.UnmatchedNew++
		}
	}
	if len(res.Points) == 0 {
		return res, fmt.Errorf("no point of the old rows matches one of the new with figures to compare (%d old and %d new points)", len(og), len(ng))
	}
	return res, nil
}

func pick(rows []results.Row, c Cond) []results.Row {
	var out []results.Row
	for _, r := range rows {
		if c.holds(r) {
			out = append(out, r)
		}
	}
	return out
}

// groups gathers the ok rows by match key and scope, in first-seen order.
func groups(rows []results.Row, o Options) []group {
	var gs []group
	at := map[string]int{}
	for _, r := range rows {
		if r.Status != results.StatusOK {
			continue
		}
		k := matchKey(r, o) + "\x00" + r.Scope
		i, ok := at[k]
		if !ok {
			i = len(gs)
			at[k] = i
			gs = append(gs, group{key: k})
		}
		gs[i].rows = append(gs[i].rows, r)
	}
	return gs
}

func matchKey(r results.Row, o Options) string {
	if len(o.By) > 0 {
		var parts []string
		for _, p := range o.By {
			parts = append(parts, p+"="+r.Param(p))
		}
		return strings.Join(parts, " ")
	}
	if o.Between == nil {
		return r.PointKey
	}
	var parts []string
	for _, p := range results.Params() {
		if results.ParamColumn(p.Name) == "" || p.Name == o.Between[0].Param || p.Name == o.Between[1].Param {
			continue
		}
		parts = append(parts, p.Name+"="+r.Param(p.Name))
	}
	return strings.Join(parts, " ")
}

// sharedParams are the parameter cells a and b agree on.
func sharedParams(a, b results.Row) map[string]string {
	m := map[string]string{}
	for name, cell := range a.Params {
		if cell != "" && b.Params[name] == cell {
			m[name] = cell
		}
	}
	return m
}

func values(rows []results.Row, metric string) []float64 {
	var xs []float64
	for _, r := range rows {
		if v, ok := r.Metric(metric); ok {
			xs = append(xs, v)
		}
	}
	return xs
}

func columnParams() []string {
	var names []string
	for _, p := range results.Params() {
		if results.ParamColumn(p.Name) != "" {
			names = append(names, p.Name)
		}
	}
	return names
}
