// Package verdict judges rows against a plan's expectations into the
// verdict columns: pass when every expectation that applies holds, fail
// when one does not, unknown when a figure or the line rate a bound needs
// is missing (never pass), and empty when none applies.
package verdict

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"rdmasweep/plan"
	"rdmasweep/results"
)

// Judge sets r's Verdict and VerdictDetail from exps. The detail holds a
// clause for each expectation that failed or could not be judged.
func Judge(r *results.Row, exps []plan.Expectation) {
	r.Verdict, r.VerdictDetail = "", ""
	var fails, unknowns []string
	applied := false
	for _, e := range exps {
		if !e.Applies(r.Param) {
			continue
		}
		applied = true
		unknown, clause := judgeOne(r, e)
		switch {
		case clause == "":
		case unknown:
			unknowns = append(unknowns, clause)
		default:
			fails = append(fails, clause)
		}
	}
	switch {
	case !applied:
	case len(fails) > 0:
		r.Verdict, r.VerdictDetail = results.VerdictFail, strings.Join(append(fails, unknowns...), "; ")
	case len(unknowns) > 0:
		r.Verdict, r.VerdictDetail = results.VerdictUnknown, strings.Join(unknowns, "; ")
	default:
		r.Verdict = results.VerdictPass
	}
	judgeCold(r)
}

// judgeCold makes the verdict of a cold row that is not proven cold
// (results.Row.NotCold) cold, with the reason first in the detail; a
// failed one stays failed, the reason added.
func judgeCold(r *results.Row) {
	why := r.NotCold()
	if why == "" {
		return
	}
	if r.Verdict != results.VerdictFail {
		r.Verdict = results.VerdictCold
	}
	r.VerdictDetail = strings.TrimSuffix(why+"; "+r.VerdictDetail, "; ")
}

// judgeOne is "" when e holds; otherwise a clause saying why, with
// unknown true when e could not be judged (unknown) and false when it failed.
func judgeOne(r *results.Row, e plan.Expectation) (unknown bool, clause string) {
	v, has := r.Metric(e.Metric)
	if !has {
		why := "no figure"
		if r.Status != results.StatusOK {
			why = "the run failed"
		}
		return true, fmt.Sprintf("%s unknown: %s", e.Metric, why)
	}
	bound, boundText := e.Bound, num(e.Bound)
	if e.LineRate {
		if r.LineRateMBs == nil {
			why := r.LineRateUnknown
			if why == "" {
				why = "not reported"
			}
			return true, fmt.Sprintf("line_rate unknown: %s", why)
		}
		bound = e.Bound * *r.LineRateMBs
		boundText = fmt.Sprintf("%s × line_rate %s", strconv.FormatFloat(e.Bound, 'g', -1, 64), num(*r.LineRateMBs))
	}
	switch {
	case e.AtLeast && v < bound:
		return false, fmt.Sprintf("%s %s < %s", e.Metric, num(v), boundText)
	case !e.AtLeast && v > bound:
		return false, fmt.Sprintf("%s %s > %s", e.Metric, num(v), boundText)
	}
	return false, ""
}

func num(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

// JudgeRows judges each row of one run of a point. Without expectations
// only a cold row that is not proven cold gets a verdict (cold).
func JudgeRows(rows []results.Row, exps []plan.Expectation) {
	for i := range rows {
		Judge(&rows[i], exps)
	}
}

// Failed counts the rows whose verdict is fail.
func Failed(rows []results.Row) int {
	n := 0
	for _, r := range rows {
		if r.Verdict == results.VerdictFail {
			n++
		}
	}
	return n
}

// Unjudged counts the rows that an expectation without unknown: pass
// could not judge: the verdict unknown, which the plan did not accept.
func Unjudged(rows []results.Row, exps []plan.Expectation) int {
	n := 0
	for i := range rows {
		if rows[i].Verdict != results.VerdictUnknown {
			continue
		}
		for _, e := range exps {
			if unknown, clause := judgeOne(&rows[i], e); !e.UnknownPasses && unknown && clause != "" && e.Applies(rows[i].Param) {
				n++
				break
			}
		}
	}
	return n
}

// WriteSummary prints, after a blank line that parts it from the summary
// table above it, pass/total per point and scope for the rows that were
// judged, and the first detail of a point that did not all pass; nothing
// when no row was.
func WriteSummary(w io.Writer, rows []results.Row) error {
	type tally struct {
		first               results.Row
		pass, n             int
		fail, unknown, cold int
		detail              string
	}
	anyCold := false
	var order []string
	ts := map[string]*tally{}
	for _, r := range rows {
		if r.Verdict == "" {
			continue
		}
		k := r.PointKey + "/" + r.Scope
		t, ok := ts[k]
		if !ok {
			t = &tally{first: r}
			ts[k] = t
			order = append(order, k)
		}
		t.n++
		switch r.Verdict {
		case results.VerdictPass:
			t.pass++
		case results.VerdictFail:
			t.fail++
		case results.VerdictCold:
			t.cold++
			anyCold = true
		default:
			t.unknown++
		}
		if t.detail == "" {
			t.detail = r.VerdictDetail
		}
	}
	if len(order) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	firsts := make([]results.Row, len(order))
	for i, k := range order {
		firsts[i] = ts[k].first
	}
	vary := varying(firsts)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// COLD, only when a row has it: cold rows not proven cold.
	coldHead, coldCell := "", func(*tally) string { return "" }
	if anyCold {
		coldHead, coldCell = "COLD\t", func(t *tally) string { return strconv.Itoa(t.cold) + "\t" }
	}
	fmt.Fprintln(tw, "POINT\tPASS\tFAIL\tUNKNOWN\t"+coldHead+"DETAIL")
	for _, k := range order {
		t := ts[k]
		fmt.Fprintf(tw, "%s\t%d/%d\t%d\t%d\t%s%s\n", label(t.first, vary), t.pass, t.n, t.fail, t.unknown, coldCell(t), t.detail)
	}
	return tw.Flush()
}

// varying are the parameters whose cells differ among rows, in schema
// order: what tells one point from another.
func varying(rows []results.Row) []*results.Param {
	var out []*results.Param
	for _, p := range results.Params() {
		for _, r := range rows[1:] {
			if r.Param(p.Name) != rows[0].Param(p.Name) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

func label(r results.Row, vary []*results.Param) string {
	var parts []string
	for _, p := range vary {
		parts = append(parts, p.Name+"="+p.Display(r.Param(p.Name)))
	}
	if len(parts) == 0 {
		parts = append(parts, r.PointKey)
	}
	if r.Scope == results.ScopeAggregate {
		parts = append(parts, "aggregate")
	}
	return strings.Join(parts, " ")
}

// LineRateCell is a row's line rate for runner check's data path cell:
// "line rate 1250.0 MB/s", or "line rate unknown (why)".
func LineRateCell(r results.Row) string {
	if r.LineRateMBs != nil {
		return "line rate " + num(*r.LineRateMBs) + " MB/s"
	}
	why := r.LineRateUnknown
	if why == "" {
		why = "not reported"
	}
	return "line rate unknown (" + why + ")"
}
