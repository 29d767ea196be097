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
	"strings"

	"rdmasweep/results"
	"rdmasweep/runner/summary"
)

// Series is one line of the chart: the rows that share every splitting
// parameter, as one Point per x value in increasing order.
type Series struct {
	// Label names the series by its splitting parameters,
	// "transport=tcp cache=warm"; it is "all runs" when nothing splits.
	Label  string
	Params []Param
	Points []Point
}

// Param is one splitting parameter's value in a series.
type Param struct{ Name, Value string }

// Point is one x value of a series: the mean over its ok rows and the
// sample standard deviation (0 with one row), which the error bars show.
type Point struct {
	X            int64
	N            int // ok rows averaged
	BandwidthMBs Stat
	LatP50Us     Stat
	LatP99Us     Stat
}

// Stat is a mean and a sample standard deviation over the repeats.
type Stat = summary.Stat

// params are the columns that may split series, in label order: the
// summary's, but the x axis.
func params(x string) []summary.Param {
	var ps []summary.Param
	for _, p := range summary.Params {
		if p.Name != x {
			ps = append(ps, p)
		}
	}
	return ps
}

// ErrX is returned for an x axis that is not a numeric parameter with a
// column.
var ErrX = errors.New("not a numeric parameter of the CSV")

// XParams names the parameters the x axis may be.
func XParams() []string {
	var out []string
	for _, c := range results.Columns {
		if p := results.ColumnParam(c); p != nil && (p.Kind == results.KindSize || p.Kind == results.KindInt) {
			out = append(out, p.Name)
		}
	}
	return out
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
		if r.Status == results.StatusOK && r.BandwidthMBs != nil {
			ok = append(ok, r)
		}
	}
	split := splitting(ok, x)

	type acc struct {
		series Series
		byX    map[int64][]results.Row
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
			g = &acc{series: Series{Label: l, Params: ps}, byX: map[int64][]results.Row{}}
			groups[key] = g
			order = append(order, key)
		}
		g.byX[r.ParamInt(x)] = append(g.byX[r.ParamInt(x)], r)
	}

	var out []Series
	for _, key := range order {
		g := groups[key]
		var xs []int64
		for v := range g.byX {
			xs = append(xs, v)
		}
		sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
		for _, xv := range xs {
			rs := g.byX[xv]
			var bw, p50, p99 []float64
			for _, r := range rs {
				bw = append(bw, *r.BandwidthMBs)
				p50 = append(p50, deref(r.LatP50Us))
				p99 = append(p99, deref(r.LatP99Us))
			}
			g.series.Points = append(g.series.Points, Point{
				X: xv, N: len(rs),
				BandwidthMBs: summary.MeanSD(bw), LatP50Us: summary.MeanSD(p50), LatP99Us: summary.MeanSD(p99),
			})
		}
		out = append(out, g.series)
	}
	return out, nil
}

// splitting returns the parameters that take more than one value and are
// not a function of x: some x value sees two of their values.
func splitting(rows []results.Row, x string) []summary.Param {
	var out []summary.Param
	for _, p := range params(x) {
		seen := map[string]bool{}
		atX := map[int64]string{}
		independent := false
		for _, r := range rows {
			v := p.Value(r)
			seen[v] = true
			if prev, ok := atX[r.ParamInt(x)]; ok && prev != v {
				independent = true
			}
			atX[r.ParamInt(x)] = v
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
