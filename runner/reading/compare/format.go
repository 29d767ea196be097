package compare

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"rdmasweep/internal/stat"
	"rdmasweep/results"
)

// Formats are the forms Write takes.
var Formats = []string{"text", "csv", "json"}

// Write prints res in format: text, a table as benchstat's (the centre ±
// its interval in percent, the change or ~, the p-value and the sample
// sizes); csv, one row per point and metric; json, one object per line
// for each point and metric.
func Write(w io.Writer, res Result, format string) error {
	switch format {
	case "text":
		return writeText(w, res)
	case "csv":
		return writeCSV(w, res)
	case "json":
		return writeJSON(w, res)
	}
	return fmt.Errorf("unknown format %q (known: %s)", format, strings.Join(Formats, ", "))
}

// varying names, in schema order, the parameters whose cells differ among
// the points: what tells one line of the text table from another.
func varying(pts []Point) []*results.Param {
	var out []*results.Param
	for _, p := range results.Params() {
		if results.ParamColumn(p.Name) == "" {
			continue
		}
		for _, pt := range pts[1:] {
			if pt.Params[p.Name] != pts[0].Params[p.Name] {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

func pointLabel(pt Point, vary []*results.Param) string {
	var parts []string
	for _, p := range vary {
		parts = append(parts, p.Name+"="+p.Display(pt.Params[p.Name]))
	}
	if pt.Scope == results.ScopeAggregate {
		parts = append(parts, "aggregate")
	}
	if len(parts) == 0 {
		return "all"
	}
	return strings.Join(parts, " ")
}

func writeText(w io.Writer, res Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	vary := varying(res.Points)
	fmt.Fprintln(tw, "point\tmetric\told\t\tnew\t\tdelta\t\t")
	for _, pt := range res.Points {
		fmt.Fprintf(tw, "%s\t%s\t%s\t± %s\t%s\t± %s\t%s\t%s\t\n", pointLabel(pt, vary), pt.Metric,
			num(pt.Old.Center), pctRange(pt.Old), num(pt.New.Center), pctRange(pt.New),
			delta(pt.Comparison), pn(pt.Comparison))
	}
	return tw.Flush()
}

// num is a figure with four significant digits, as a person reads it.
func num(x float64) string { return strconv.FormatFloat(x, 'f', decimals(x), 64) }

func decimals(x float64) int {
	switch a := math.Abs(x); {
	case a >= 1000:
		return 0
	case a >= 100:
		return 1
	case a >= 10:
		return 2
	}
	return 3
}

// pctRange is the interval's half width in percent of the centre, as
// benchstat prints it; ∞ when the sample is too small for one.
func pctRange(s stat.Summary) string {
	if !s.HasInterval() {
		return "∞"
	}
	if s.Center == 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f%%", 100*math.Max(s.Hi/s.Center-1, 1-s.Lo/s.Center))
}

// delta is the change in percent, or ~ when it is not significant.
func delta(s stat.Comparison) string {
	switch {
	case !s.Significant:
		return "~"
	case math.IsNaN(s.DeltaPct):
		return "?"
	}
	return fmt.Sprintf("%+.2f%%", s.DeltaPct)
}

func pn(s stat.Comparison) string {
	n := fmt.Sprintf("n=%d+%d", s.Old.N, s.New.N)
	if s.Old.N == s.New.N {
		n = fmt.Sprintf("n=%d", s.Old.N)
	}
	return fmt.Sprintf("(p=%.3f %s)", s.P, n)
}

// paramNames are the parameters any point has, in schema order.
func paramNames(pts []Point) []string {
	var names []string
	for _, p := range results.Params() {
		for _, pt := range pts {
			if _, ok := pt.Params[p.Name]; ok {
				names = append(names, p.Name)
				break
			}
		}
	}
	return names
}

var statColumns = []string{"scope", "metric", "old_center", "old_lo", "old_hi", "new_center", "new_lo", "new_hi",
	"delta_pct", "p_value", "significant", "n_old", "n_new"}

func writeCSV(w io.Writer, res Result) error {
	cw := csv.NewWriter(w)
	names := paramNames(res.Points)
	if err := cw.Write(append(append([]string(nil), names...), statColumns...)); err != nil {
		return err
	}
	for _, pt := range res.Points {
		rec := make([]string, 0, len(names)+len(statColumns))
		for _, n := range names {
			rec = append(rec, pt.Params[n])
		}
		rec = append(rec, pt.Scope, pt.Metric,
			cell(pt.Old.Center), cell(pt.Old.Lo), cell(pt.Old.Hi),
			cell(pt.New.Center), cell(pt.New.Lo), cell(pt.New.Hi),
			cell(pt.DeltaPct), cell(pt.P), strconv.FormatBool(pt.Significant),
			strconv.Itoa(pt.Old.N), strconv.Itoa(pt.New.N))
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// cell is x in its shortest exact form, empty when it is not finite (no
// interval, no old centre to divide by).
func cell(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return ""
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}

// jsonPoint is one line of --format json. A figure that does not exist
// (no interval, no old centre) is null.
type jsonPoint struct {
	Params      map[string]string `json:"params"`
	Scope       string            `json:"scope"`
	Metric      string            `json:"metric"`
	OldCenter   float64           `json:"old_center"`
	OldLo       *float64          `json:"old_lo"`
	OldHi       *float64          `json:"old_hi"`
	NewCenter   float64           `json:"new_center"`
	NewLo       *float64          `json:"new_lo"`
	NewHi       *float64          `json:"new_hi"`
	DeltaPct    *float64          `json:"delta_pct"`
	PValue      float64           `json:"p_value"`
	Significant bool              `json:"significant"`
	NOld        int               `json:"n_old"`
	NNew        int               `json:"n_new"`
	Warnings    []string          `json:"warnings,omitempty"`
}

func finite(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

func writeJSON(w io.Writer, res Result) error {
	enc := json.NewEncoder(w)
	for _, pt := range res.Points {
		if err := enc.Encode(jsonPoint{
			Params: pt.Params, Scope: pt.Scope, Metric: pt.Metric,
			OldCenter: pt.Old.Center, OldLo: finite(pt.Old.Lo), OldHi: finite(pt.Old.Hi),
			NewCenter: pt.New.Center, NewLo: finite(pt.New.Lo), NewHi: finite(pt.New.Hi),
			DeltaPct: finite(pt.DeltaPct), PValue: pt.P, Significant: pt.Significant,
			NOld: pt.Old.N, NNew: pt.New.N, Warnings: pt.Warnings,
		}); err != nil {
			return err
		}
	}
	return nil
}
