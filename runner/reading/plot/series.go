// Package plot draws a CSV of runs as two panels against a numeric
// parameter, block size by default (clients, to find a fan-in's knee):
// bandwidth, and p50 and p99 latency, each with error bars from the
// repeats.
//
// The rows split into series by every parameter that varies independently
// of the x axis (transport, cache, queue depth, scope, …). A parameter that
// varies only with it, such as file_size zipped with block size, is a
// property of the x axis, not a series: it is the same for every row at a
// given x, so splitting by it would give one point per series.
package plot

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"rdmasweep/internal/stat"
	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/reading/summary"
)

// Series is one line of the chart: the rows that share every splitting
// parameter, as one Point per x value in increasing order.
type Series struct {
	// Label names the series by its splitting parameters,
	// "transport=tcp cache=warm"; it is "all runs" when nothing splits.
	Label  string
	Params []Param
	Points []Point
	// Rate is the column the left panel draws (Rates); "" is
	// bandwidth_mb_s.
	Rate string
}

// Columns lists the columns the left panel can draw (runner plot -y):
// every numeric result column.
func Columns() []string { return results.MetricColumns() }

// BuildRate is Build with the numeric column y (one of Columns) in the
// left panel instead of bandwidth_mb_s; rows without a y cell are left
// out.
func BuildRate(rows []results.Row, x, y string) ([]Series, error) {
	if !slices.Contains(Columns(), y) {
		return nil, fmt.Errorf("%q: %w%s", y, ErrY, plan.Suggest(y, Columns()))
	}
	var with []results.Row
	for _, r := range rows {
		if v, ok := r.Metric(y); ok {
			r.BandwidthMBs = &v
			with = append(with, r)
		}
	}
	series, err := Build(with, x)
	for j := range series {
		series[j].Rate = y
	}
	return series, err
}

// Param is one splitting parameter's value in a series.
type Param struct{ Name, Value string }

// Point is one x value of a series: the mean over its ok rows and the
// sample standard deviation (0 with one row), which the error bars show.
type Point struct {
	X            float64 // the parameter's value: bytes, a count, or offered MB/s
	N            int     // ok rows averaged
	BandwidthMBs Stat
	LatP50Us     Stat
	LatP99Us     Stat
	// RespP50Us and RespP99Us are an open loop's response latency, from
	// each read's due time (NaN for a closed loop's rows).
	RespP50Us Stat
	RespP99Us Stat
	// Saturated counts the rows averaged whose queue depth held reads
	// back (results.Row.Saturated).
	Saturated int
}

// Stat is a mean and a sample standard deviation over the repeats.
type Stat = stat.Moments

// params are the columns that may split series, in label order: the
// summary's, but the x axis and the hosts (a series is a setting, never
// an address or a port).
func params(x string) []summary.Param {
	var ps []summary.Param
	for _, p := range summary.Params {
		if p.Name != x && p.Name != "server" && p.Name != "client" {
			ps = append(ps, p)
		}
	}
	return ps
}

// ErrX is returned for an x axis that is not a numeric parameter with a
// column.
var ErrX = errors.New("not a numeric parameter of the CSV")

// ErrY is wrapped when the column asked for is not one of Columns.
var ErrY = errors.New("not a numeric column of the CSV")

// ErrConstantX is wrapped when every row has the same x: no line to draw.
var ErrConstantX = errors.New("every row has the same value")

// XParams names the parameters the x axis may be.
func XParams() []string {
	var out []string
	for _, c := range results.Columns {
		if p := results.ColumnParam(c); p != nil && (p.Kind == results.KindSize || p.Kind == results.KindInt || p.Kind == results.KindRate) {
			out = append(out, p.Name)
		}
	}
	return out
}

// DefaultX is the x axis for rows when none is asked for: rate, when the
// rows offer more than one load (response latency against offered load),
// else block_size.
func DefaultX(rows []results.Row) string {
	rate := param.Rate.String()
	seen := map[string]bool{}
	for _, r := range rows {
		if v := r.Param(rate); v != "" {
			seen[v] = true
		}
	}
	if len(seen) > 1 {
		return rate
	}
	return param.BlockSize.String()
}

// Build turns rows into series along x (a name of XParams). Only ok rows
// with a measurement count; failed rows are left out. Series are ordered
// by first appearance in rows, points by x.
func Build(rows []results.Row, x string) ([]Series, error) {
	if !slices.Contains(XParams(), x) {
		return nil, fmt.Errorf("%q: %w (one of %s)", x, ErrX, strings.Join(XParams(), ", "))
	}
	var ok []results.Row
	for _, r := range rows {
		// A closed loop's row has no offered load to place it at.
		if r.Status == results.StatusOK && r.BandwidthMBs != nil && r.Param(x) != "" {
			ok = append(ok, r)
		}
	}
	if xs := distinctX(ok, x); xs == 1 {
		return nil, fmt.Errorf("%s: %w%s", x, ErrConstantX, varyingHint(ok, x))
	}
	split := splitting(ok, x)

	type acc struct {
		series Series
		byX    map[float64][]results.Row
	}
	var order []string
	groups := map[string]*acc{}
	for _, r := range ok {
		var ps []Param
		var label []string
		for _, p := range split {
			v := p.Value(r)
			ps = append(ps, Param{Name: p.Name, Value: v})
			label = append(label, p.Name+"="+v)
		}
		key := strings.Join(label, " ")
		g := groups[key]
		if g == nil {
			l := key
			if l == "" {
				l = "all runs"
			}
			g = &acc{series: Series{Label: l, Params: ps}, byX: map[float64][]results.Row{}}
			groups[key] = g
			order = append(order, key)
		}
		g.byX[xOf(r, x)] = append(g.byX[xOf(r, x)], r)
	}

	var out []Series
	for _, key := range order {
		g := groups[key]
		var xs []float64
		for v := range g.byX {
			xs = append(xs, v)
		}
		sort.Float64s(xs)
		for _, xv := range xs {
			g.series.Points = append(g.series.Points, pointOf(xv, g.byX[xv]))
		}
		out = append(out, g.series)
	}
	return out, nil
}

// pointOf is the point at x of rows.
func pointOf(x float64, rows []results.Row) Point {
	var bw, p50, p99, r50, r99 []float64
	sat := 0
	for _, r := range rows {
		bw = append(bw, *r.BandwidthMBs)
		p50 = append(p50, deref(r.LatP50Us))
		p99 = append(p99, deref(r.LatP99Us))
		r50 = append(r50, deref(r.RespP50Us))
		r99 = append(r99, deref(r.RespP99Us))
		if r.Saturated != nil && *r.Saturated {
			sat++
		}
	}
	return Point{
		X: x, N: len(rows), Saturated: sat,
		BandwidthMBs: stat.MeanSD(bw), LatP50Us: stat.MeanSD(p50), LatP99Us: stat.MeanSD(p99),
		RespP50Us: stat.MeanSD(r50), RespP99Us: stat.MeanSD(r99),
	}
}

// xOf is row r's value of parameter x: its cell as a number (bytes, a
// count, or a rate's offered MB/s).
func xOf(r results.Row, x string) float64 {
	f, _ := strconv.ParseFloat(r.Param(x), 64)
	return f
}

// distinctX counts the values of x among rows.
func distinctX(rows []results.Row, x string) int {
	seen := map[float64]bool{}
	for _, r := range rows {
		seen[xOf(r, x)] = true
	}
	return len(seen)
}

// varyingHint names the numeric parameters that do vary among rows, for
// -x.
func varyingHint(rows []results.Row, x string) string {
	var vary []string
	for _, name := range XParams() {
		if name != x && distinctX(rows, name) > 1 {
			vary = append(vary, name)
		}
	}
	if len(vary) == 0 {
		return "; no numeric parameter varies, so there is no axis to draw along (runner summary shows the runs)"
	}
	return "; plot along one that varies: -x " + strings.Join(vary, ", -x ")
}

// splitting returns the parameters that take more than one value and are
// not a function of x: some x value sees two of their values.
func splitting(rows []results.Row, x string) []summary.Param {
	var out []summary.Param
	for _, p := range params(x) {
		seen := map[string]bool{}
		atX := map[float64]string{}
		independent := false
		for _, r := range rows {
			v := p.Value(r)
			seen[v] = true
			if prev, ok := atX[xOf(r, x)]; ok && prev != v {
				independent = true
			}
			atX[xOf(r, x)] = v
		}
		if len(seen) > 1 && independent {
			out = append(out, p)
		}
	}
	return out
}

func deref(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}
