package summary

import (
	"encoding/json"
	"io"
	"slices"

	"rdmasweep/internal/stat"
	"rdmasweep/results"
)

// PointJSON is one group of summary --format json: a point's rows of one
// scope, its parameters as the CSV's cells, and each numeric column its
// ok rows have, summed up.
type PointJSON struct {
	PointKey string            `json:"point_key"`
	Scope    string            `json:"scope"`
	Params   map[string]string `json:"params"`
	Runs     int               `json:"runs"`
	Failed   int               `json:"failed"`
	Metrics  map[string]Figure `json:"metrics"`
	BoundBy  string            `json:"bound_by,omitempty"`
	Verdicts map[string]int    `json:"verdicts,omitempty"`
}

// Figure is one column over a group's ok rows: how many had it, their
// mean, sample sd, median, least and most.
type Figure struct {
	N      int     `json:"n"`
	Mean   float64 `json:"mean"`
	SD     float64 `json:"sd"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// JSON is the groups as summary --format json gives them, in order.
func JSON(groups []Group) []PointJSON {
	out := make([]PointJSON, 0, len(groups))
	for _, g := range groups {
		pj := PointJSON{PointKey: g.Key, Scope: g.Scope, Params: map[string]string{}, Runs: len(g.OK), Failed: g.Failed, Metrics: map[string]Figure{}}
		for name, cell := range g.First.Params {
			if cell != "" {
				pj.Params[name] = cell
			}
		}
		for _, col := range results.MetricColumns() {
			var xs []float64
			for _, r := range g.OK {
				if v, ok := r.Metric(col); ok {
					xs = append(xs, v)
				}
			}
			if len(xs) == 0 {
				continue
			}
			m := stat.MeanSD(xs)
			pj.Metrics[col] = Figure{N: len(xs), Mean: m.Mean, SD: m.SD, Median: stat.Median(xs), Min: slices.Min(xs), Max: slices.Max(xs)}
		}
		if hasBoundBy([]Group{g}) {
			pj.BoundBy = boundBy(g)
		}
		if len(g.Verdicts) > 0 {
			pj.Verdicts = g.Verdicts
		}
		out = append(out, pj)
	}
	return out
}

// WriteJSON writes {"points":[…]}, one object per group (JSON).
func WriteJSON(w io.Writer, groups []Group) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Points []PointJSON `json:"points"`
	}{JSON(groups)})
}
