package plan

// The expect list: what a row's figures must meet, judged by the runner
// into the verdict columns.
//
//	expect:
//	  - metric: bandwidth_mb_s
//	    at_least: 0.9 line_rate      # or a number: 10000, or a rate: 10GB/s
//	  - metric: lat_p99_us
//	    at_most: 4.5
//	    where: {block_size: "<= 4KiB"}

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"rdmasweep/results"
)

var expectKeys = []string{"metric", "at_least", "at_most", "where", "unknown"}

// Expectation is one entry of the plan's expect list.
type Expectation struct {
	Metric string // a numeric result column (results.MetricColumns)
	// AtLeast: the figure must be >= the bound; else <= it.
	AtLeast bool
	// Bound is the limit in the metric's unit, or, with LineRate, the
	// fraction of the server's line rate.
	Bound    float64
	LineRate bool
	Where    []Where
	// Text is the bound as written, for messages.
	Text string
	// UnknownPasses (unknown: pass) lets a row this expectation cannot
	// judge (no figure, no line rate) end an exec with 0; by default
	// (unknown: fail) exec exits 3 as for a failed row.
	UnknownPasses bool
}

// Where narrows an expectation to the rows whose parameter compares with
// a value: block_size "<= 4KiB", transport "rdma".
type Where struct {
	Param string
	Op    string // one of whereOps
	N     int64  // sizes (bytes) and ints
	S     string // enums, bools and strings
}

var whereOps = []string{"<=", ">=", "!=", "==", "<", ">"}

// Holds reports whether a row's cell of the parameter meets w.
func (w Where) Holds(cell string) bool {
	p := results.ParamByName(w.Param)
	if p.Kind != results.KindSize && p.Kind != results.KindInt {
		return (cell == w.S) == (w.Op == "==")
	}
	n, err := strconv.ParseInt(cell, 10, 64)
	if err != nil {
		return false
	}
	switch w.Op {
	case "<=":
		return n <= w.N
	case ">=":
		return n >= w.N
	case "<":
		return n < w.N
	case ">":
		return n > w.N
	case "!=":
		return n != w.N
	}
	return n == w.N
}

// Applies reports whether every where of e holds for the cells.
func (e Expectation) Applies(cell func(param string) string) bool {
	for _, w := range e.Where {
		if !w.Holds(cell(w.Param)) {
			return false
		}
	}
	return true
}

// expect reads the expect list.
func (l *loader) expect(n *yaml.Node, p *Plan) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		l.errorf(n, "expect", "must be a list of expectations, each with metric and at_least or at_most (got %s)", describe(n))
		return
	}
	for i, item := range n.Content {
		if e, ok := l.expectation(item, fmt.Sprintf("expect[%d]", i)); ok {
			p.Expect = append(p.Expect, e)
		}
	}
}

func (l *loader) expectation(n *yaml.Node, path string) (Expectation, bool) {
	f, ok := l.mapping(n, path, expectKeys)
	if !ok {
		return Expectation{}, false
	}
	var e Expectation
	metric, ok := l.metric(f, path, resolve(n), "bandwidth_mb_s or lat_p99_us")
	e.Metric = metric
	_, least := f["at_least"]
	_, most := f["at_most"]
	key := "at_least"
	switch {
	case least && most:
		l.errorf(f["at_most"].key, join(path, "at_most"), "give at_least or at_most, not both (write two expectations for a range)")
		return e, false
	case most:
		key = "at_most"
	case !least:
		l.errorf(resolve(n), path, "needs at_least or at_most")
		return e, false
	}
	e.AtLeast = key == "at_least"
	bn, bok := l.scalar(f[key].val, join(path, key), "a number, a rate like 10GB/s, or a fraction of line_rate like 0.9 line_rate")
	if bok {
		bok = l.bound(bn, join(path, key), &e)
	} else if isNull(resolve(f[key].val)) {
		l.errorf(f[key].key, join(path, key), "must have a value")
	}
	wok := l.where(f["where"].val, join(path, "where"), &e)
	uok := true
	if f["unknown"].val != nil {
		var u string
		u, uok = l.enum(f, "unknown", path, []string{"fail", "pass"})
		e.UnknownPasses = u == "pass"
	}
	return e, ok && bok && wok && uok
}

// metric reads f's metric, which must name a numeric result column; when
// it is missing, the error is at missingAt, with example as the hint.
func (l *loader) metric(f map[string]field, path string, missingAt *yaml.Node, example string) (string, bool) {
	metric, mn, ok := l.str(f, "metric", path)
	switch {
	case !ok:
		l.errorf(missingAt, join(path, "metric"), "required: a numeric result column such as %s", example)
	case !slices.Contains(results.MetricColumns(), metric):
		l.errorf(mn, join(path, "metric"), "%q is not a numeric result column%s", metric, suggest(metric, results.MetricColumns()))
		ok = false
	}
	return metric, ok
}

// bound reads a number, a rate (only for a MB/s metric) or "F line_rate".
func (l *loader) bound(n *yaml.Node, path string, e *Expectation) bool {
	e.Text = n.Value
	s := strings.TrimSpace(n.Value)
	mbs := strings.HasSuffix(e.Metric, "_mb_s")
	if frac, ok := strings.CutSuffix(s, "line_rate"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(frac), 64)
		if strings.TrimSpace(frac) == "" {
			f, err = 1, nil
		}
		switch {
		case err != nil || !(f > 0):
			l.errorf(n, path, "must be a positive fraction of line_rate, like 0.9 line_rate (got %q)", s)
			return false
		case !mbs:
			l.errorf(n, path, "line_rate is in MB/s and %s is not; use a number in its own unit", e.Metric)
			return false
		}
		e.Bound, e.LineRate = f, true
		return true
	}
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		e.Bound = v
		return true
	}
	v, err := ParseRate(s)
	switch {
	case err != nil:
		l.errorf(n, path, "must be a number, a rate like 10GB/s, or a fraction of line_rate like 0.9 line_rate (got %q)", s)
		return false
	case !mbs:
		l.errorf(n, path, "a rate fits only a MB/s metric, and %s is not one; use a number in its own unit", e.Metric)
		return false
	}
	e.Bound = v
	return true
}

// rateUnits are the units a rate takes, in MB/s (10^6 bytes a second).
var rateUnits = []struct {
	suffix string
	mbs    float64
}{
	{"KiB/s", 1024.0 / 1e6}, {"MiB/s", 1 << 20 / 1e6}, {"GiB/s", (1 << 30) / 1e6},
	{"KB/s", 1e-3}, {"MB/s", 1}, {"GB/s", 1e3}, {"TB/s", 1e6},
	{"Kb/s", 1e-3 / 8}, {"Mb/s", 1.0 / 8}, {"Gb/s", 1e3 / 8}, {"Tb/s", 1e6 / 8},
	{"B/s", 1e-6},
}

// ParseRate reads a rate such as 10GB/s, 100Gb/s or 1.5GiB/s into MB/s.
func ParseRate(s string) (float64, error) {
	for _, u := range rateUnits {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			if err != nil || v < 0 {
				break
			}
			return v * u.mbs, nil
		}
	}
	return 0, fmt.Errorf("%q is not a rate like 10GB/s, 100Gb/s or 1.5GiB/s", s)
}

// where reads an expectation's where mapping: parameter → "OP VALUE" or a
// bare value (==).
func (l *loader) where(n *yaml.Node, path string, e *Expectation) bool {
	var known []string
	for _, p := range results.Params() {
		if results.ParamColumn(p.Name) != "" && p.Kind != results.KindDuration {
			known = append(known, p.Name)
		}
	}
	f, ok := l.mapping(n, path, known)
	if !ok {
		return false
	}
	names := make([]string, 0, len(f))
	for name := range f {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		vn, vok := l.scalar(f[name].val, join(path, name), `a condition like "<= 4KiB"`)
		if !vok {
			ok = false
			continue
		}
		w, err := parseWhere(results.ParamByName(name), vn.Value)
		if err != nil {
			l.errorf(vn, join(path, name), "%v", err)
			ok = false
			continue
		}
		e.Where = append(e.Where, w)
	}
	return ok
}

func parseWhere(p *results.Param, s string) (Where, error) {
	w := Where{Param: p.Name, Op: "=="}
	s = strings.TrimSpace(s)
	for _, op := range whereOps {
		if rest, ok := strings.CutPrefix(s, op); ok {
			w.Op, s = op, strings.TrimSpace(rest)
			break
		}
	}
	switch p.Kind {
	case results.KindSize:
		n, err := results.ParseSize(s)
		if err != nil {
			return w, err
		}
		w.N = n
	case results.KindInt:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return w, fmt.Errorf("must be a whole number after the comparison (got %q)", s)
		}
		w.N = n
	default:
		if w.Op != "==" && w.Op != "!=" {
			return w, fmt.Errorf("%s takes == or != only (got %q)", p.Name, w.Op)
		}
		if p.Kind == results.KindEnum && !slices.Contains(p.Enum, s) {
			return w, fmt.Errorf("must be one of %s (got %q)", strings.Join(p.Enum, ", "), s)
		}
		w.S = s
	}
	return w, nil
}
