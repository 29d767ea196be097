// Package plot draws a CSV of runs as two panels against block size:
// bandwidth, and p50 and p99 latency, each with error bars from the
// repeats.
//
// The rows split into series by every parameter that varies independently
// of block size (transport, cache, queue depth, …). A parameter that varies
// only with block size, such as file_size zipped with it, is a property of
// the x axis, not a series: it is the same for every row at a given block
// size, so splitting by it would give one point per series.
package plot

import (
	"math"
	"sort"
	"strings"

	"rdmasweep/results"
	"rdmasweep/runner/summary"
)

// Series is one line of the chart: the rows that share every splitting
// parameter, as one Point per block size in increasing order.
type Series struct {
	// Label names the series by its splitting parameters,
	// "transport=tcp cache=warm"; it is "all runs" when nothing splits.
	Label  string
	Params []Param
	Points []Point
}

// Param is one splitting parameter's value in a series.
type Param struct{ Name, Value string }

// Point is one block size of a series: the mean over its ok rows and the
// sample standard deviation (0 with one row), which the error bars show.
type Point struct {
	BlockSize    int64
	N            int // ok rows averaged
	BandwidthMBs Stat
	LatP50Us     Stat
	LatP99Us     Stat
}

// Stat is a mean and a sample standard deviation over the repeats.
type Stat = summary.Stat

// params are the columns that may split series, in label order: the
// summary's, but block size, which is the x axis.
var params = func() []summary.Param {
	var ps []summary.Param
	for _, p := range summary.Params {
		if p.Name != "block_size" {
			ps = append(ps, p)
		}
	}
	return ps
}()

// Build turns rows into series. Only ok rows with a measurement count;
// failed rows are left out. Series are ordered by first appearance in
// rows, points by block size.
func Build(rows []results.Row) []Series {
	var ok []results.Row
	for _, r := range rows {
		if r.Status == results.StatusOK && r.BandwidthMBs != nil {
			ok = append(ok, r)
		}
	}
	split := splitting(ok)

	type acc struct {
		series Series
		byBS   map[int64][]results.Row
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
			g = &acc{series: Series{Label: l, Params: ps}, byBS: map[int64][]results.Row{}}
			groups[key] = g
			order = append(order, key)
		}
		g.byBS[r.ParamInt("block_size")] = append(g.byBS[r.ParamInt("block_size")], r)
	}

	var out []Series
	for _, key := range order {
		g := groups[key]
		var sizes []int64
		for bs := range g.byBS {
			sizes = append(sizes, bs)
		}
		sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
		for _, bs := range sizes {
			rs := g.byBS[bs]
			var bw, p50, p99 []float64
			for _, r := range rs {
				bw = append(bw, *r.BandwidthMBs)
				p50 = append(p50, deref(r.LatP50Us))
				p99 = append(p99, deref(r.LatP99Us))
			}
			g.series.Points = append(g.series.Points, Point{
				BlockSize: bs, N: len(rs),
				BandwidthMBs: summary.MeanSD(bw), LatP50Us: summary.MeanSD(p50), LatP99Us: summary.MeanSD(p99),
			})
		}
		out = append(out, g.series)
	}
	return out
}

// splitting returns the parameters that take more than one value and are
// not a function of block size: some block size sees two of their values.
func splitting(rows []results.Row) []summary.Param {
	var out []summary.Param
	for _, p := range params {
		seen := map[string]bool{}
		atBS := map[int64]string{}
		independent := false
		for _, r := range rows {
			v := p.Value(r)
			seen[v] = true
			if prev, ok := atBS[r.ParamInt("block_size")]; ok && prev != v {
				independent = true
			}
			atBS[r.ParamInt("block_size")] = v
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
