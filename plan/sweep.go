package plan

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"rdmasweep/results"
	"rdmasweep/results/param"
)

// Sweep rules: sweep.matrix parameters are crossed with each other in the
// order written, outermost first; the sweep.zip group advances together
// and is inside them. workload is the exception: wherever it is written in
// the matrix it varies fastest, so each node point runs right beside its
// peer points and drift on the hosts hits both alike. It cannot be zipped,
// since a zip would pair each workload with other values of the zip's
// parameters, and no row would have a peer row to compare with. A value list or a range {from, to, factor} gives a
// parameter's values; a range without to is allowed only in zip, where it
// takes its length from the other zip parameters.

// fastestParam varies fastest in every expansion; see the sweep rules.
const fastestParam = param.Workload

// maxRangeValues bounds one range, so a factor near 1 cannot spin.
const maxRangeValues = 10000

// sweep is the parsed sweep section.
type sweep struct {
	node  *yaml.Node       // the sweep: key, for errors about the whole sweep
	axes  []*axis          // matrix parameters in written order, then the zip group
	order []*results.Param // swept parameters in the order they appear in the plan
}

// axis is one dimension of the expansion: one matrix parameter, or the zip
// group whose entries advance together (all with the same length).
type axis struct {
	entries []*sweepEntry
}

func (a *axis) len() int { return len(a.entries[0].values) }

// has reports whether the sweep varies parameter name.
func (s sweep) has(name string) bool {
	for _, p := range s.order {
		if p.Name == name {
			return true
		}
	}
	return false
}

// sweepEntry is one swept parameter and its values. nodes[i] is where
// values[i] was written (the list item, or the range).
type sweepEntry struct {
	p      *results.Param
	group  string // "zip" | "matrix"
	key    *yaml.Node
	values []value
	nodes  []*yaml.Node
	open   *openRange // a zip range without to, filled once the length is known
}

type openRange struct {
	node, fromNode, factorNode *yaml.Node
	from                       int64
	factor                     *big.Rat
}

func (l *loader) sweep(sf field, unswept map[string]bool) sweep {
	s := sweep{node: sf.key}
	f, ok := l.mapping(sf.val, "sweep", sweepKeys)
	if !ok {
		return s
	}
	if len(f) == 0 {
		if isNull(sf.val) || len(resolve(sf.val).Content) == 0 {
			l.errorf(sf.key, "sweep", "must have zip or matrix (leave sweep out for a single point)")
		}
		return s
	}
	seen := map[string]*sweepEntry{}
	var matrix []*axis
	var zip *axis
	var all []*sweepEntry
	for _, group := range []string{"matrix", "zip"} {
		gf, ok := f[group]
		if !ok {
			continue
		}
		path := "sweep." + group
		gn := resolve(gf.val)
		if isNull(gn) || (gn.Kind == yaml.MappingNode && len(gn.Content) == 0) {
			l.errorf(gf.key, path, "must name at least one parameter")
			continue
		}
		entries := l.sweepGroup(gn, group, seen)
		all = append(all, entries...)
		if group == "matrix" {
			for _, e := range entries {
				matrix = append(matrix, &axis{entries: []*sweepEntry{e}})
			}
		} else if len(entries) > 0 {
			zip = &axis{entries: entries}
			l.fitZip(zip, unswept)
		}
	}
	var fastest *axis
	for _, a := range matrix {
		switch {
		case len(a.entries[0].values) == 0:
		case a.entries[0].p.ID() == fastestParam:
			fastest = a
		default:
			s.axes = append(s.axes, a)
		}
	}
	if zip != nil && len(zip.entries) > 0 && zip.len() > 0 {
		s.axes = append(s.axes, zip)
	}
	if fastest != nil {
		s.axes = append(s.axes, fastest)
	}
	slices.SortStableFunc(all, func(a, b *sweepEntry) int {
		if a.key.Line != b.key.Line {
			return a.key.Line - b.key.Line
		}
		return a.key.Column - b.key.Column
	})
	for _, e := range all {
		s.order = append(s.order, e.p)
	}
	for _, a := range s.axes {
		l.checkDistinct(a)
	}
	return s
}

// sweepGroup reads the parameters of sweep.zip or sweep.matrix. Invalid
// entries are reported and left out.
func (l *loader) sweepGroup(n *yaml.Node, group string, seen map[string]*sweepEntry) []*sweepEntry {
	path := "sweep." + group
	if n.Kind != yaml.MappingNode {
		l.errorf(n, path, "must be a mapping of parameter names to values (got %s)", describe(n))
		return nil
	}
	var entries []*sweepEntry
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			l.errorf(k, path, "keys must be parameter names (got %s)", describe(k))
			continue
		}
		ppath := path + "." + k.Value
		p := paramByName(k.Value)
		switch {
		case p == nil:
			l.errorf(k, ppath, "unknown parameter%s", suggest(k.Value, results.SweepableParams()))
			continue
		case !p.Sweep:
			l.errorf(k, ppath, "%s cannot be swept: it has no CSV column (sweepable: %s)", p.Name, strings.Join(results.SweepableParams(), ", "))
			continue
		case p.ID() == fastestParam && group == "zip":
			l.errorf(k, ppath, "%s cannot be zipped: each workload must run at every other point, so its rows can be compared; list it under sweep.matrix", p.Name)
			continue
		}
		if prev, dup := seen[p.Name]; dup {
			if prev.group == group {
				l.errorf(k, ppath, "duplicate key (first at line %d)", prev.key.Line)
			} else {
				l.errorf(k, ppath, "%s is swept in both sweep.zip and sweep.matrix", p.Name)
			}
			continue
		}
		e := &sweepEntry{p: p, group: group, key: k}
		seen[p.Name] = e
		if l.sweepValues(e, v, ppath) {
			entries = append(entries, e)
		}
	}
	return entries
}

// sweepValues fills e from a list or a range; false when unusable.
func (l *loader) sweepValues(e *sweepEntry, n *yaml.Node, path string) bool {
	switch n.Kind {
	case yaml.SequenceNode:
		if len(n.Content) == 0 {
			l.errorf(n, path, "must list at least one value")
			return false
		}
		ok := true
		for _, item := range n.Content {
			item = resolve(item)
			v, good := l.paramValue(e.p, item, path, true)
			ok = ok && good
			e.values = append(e.values, v)
			e.nodes = append(e.nodes, item)
		}
		return ok
	case yaml.MappingNode:
		return l.rangeValues(e, n, path)
	default:
		l.errorf(n, path, "must be a list of values or a range {from, to, factor} (got %s); a single value belongs in %s:", describe(n), e.p.Section)
		return false
	}
}

// rangeValues expands {from, to, factor}. Arithmetic is exact (big.Rat),
// so "lands on to" and "whole number" mean exactly that.
func (l *loader) rangeValues(e *sweepEntry, n *yaml.Node, path string) bool {
	p := e.p
	if !isInt(p) {
		l.errorf(n, path, "a range needs a size or integer parameter; list the values of %s instead", p.Name)
		return false
	}
	f, ok := l.mapping(n, path, []string{"from", "to", "factor"})
	if !ok {
		return false
	}
	lo := max(p.Min, 1) // a range of zeros would never move
	read := func(key string) (int64, *yaml.Node, bool) {
		fn, ok := l.scalar(f[key].val, path+"."+key, "a single value")
		if !ok {
			if f[key].key == nil || isNull(resolve(f[key].val)) {
				at := n
				if f[key].key != nil {
					at = f[key].key
				}
				if key != "to" || f[key].key != nil {
					l.errorf(at, path+"."+key, "required")
				}
			}
			return 0, nil, false
		}
		if p.Kind == results.KindSize {
			v, ok := l.sizeValue(fn, path+"."+key, lo)
			return v, fn, ok
		}
		v, ok := l.intValue(fn, path+"."+key, lo, p.Max)
		return v, fn, ok
	}
	from, fromNode, okFrom := read("from")
	var to int64
	var toNode *yaml.Node
	okTo, hasTo := true, f["to"].key != nil
	if hasTo {
		to, toNode, okTo = read("to")
	}
	factor, factorNode, okFactor := l.factor(f, path)
	if !okFrom || !okTo || !okFactor {
		return false
	}
	if !hasTo {
		if e.group != "zip" {
			l.errorf(n, path, "a range in sweep.matrix needs to; only sweep.zip ranges may leave it out")
			return false
		}
		e.open = &openRange{node: n, fromNode: fromNode, factorNode: factorNode, from: from, factor: factor}
		return true
	}
	up := factor.Cmp(big.NewRat(1, 1)) > 0
	if (up && from > to) || (!up && from < to) {
		l.errorf(factorNode, path+".factor", "factor %s moves from %s away from to %s", factorNode.Value, format(p, value{n: from}), format(p, value{n: to}))
		return false
	}
	cur := new(big.Rat).SetInt64(from)
	want := new(big.Rat).SetInt64(to)
	e.values = append(e.values, value{n: from})
	e.nodes = append(e.nodes, n)
	for cur.Cmp(want) != 0 {
		prev := cur.Num().Int64()
		cur.Mul(cur, factor)
		if !cur.IsInt() {
			l.errorf(factorNode, path+".factor", "%s × %s is %s, not a whole number%s; the range must land on whole values",
				format(p, value{n: prev}), factorNode.Value, cur.FloatString(3), unitWord(p))
			return false
		}
		if (up && cur.Cmp(want) > 0) || (!up && cur.Cmp(want) < 0) {
			l.errorf(toNode, path+".to", "range does not land on to: from %s by factor %s goes %s then %s",
				format(p, value{n: from}), factorNode.Value, format(p, value{n: prev}), ratFormat(p, cur))
			return false
		}
		if len(e.values) >= maxRangeValues {
			l.errorf(n, path, "range has more than %d values", maxRangeValues)
			return false
		}
		e.values = append(e.values, value{n: cur.Num().Int64()})
		e.nodes = append(e.nodes, n)
	}
	return true
}

// ratFormat formats a whole rational that may not fit in an int64.
func ratFormat(p *results.Param, r *big.Rat) string {
	if r.Num().IsInt64() {
		return format(p, value{n: r.Num().Int64()})
	}
	return r.Num().String()
}

// factor reads a range's factor: a number > 0 and != 1.
func (l *loader) factor(f map[string]field, path string) (*big.Rat, *yaml.Node, bool) {
	p := path + ".factor"
	n, ok := l.scalar(f["factor"].val, p, "a number")
	if !ok {
		if f["factor"].key == nil || isNull(resolve(f["factor"].val)) {
			at := f["factor"].key
			if at == nil {
				at = f["from"].key
			}
			l.errorf(at, p, "required")
		}
		return nil, nil, false
	}
	r, good := new(big.Rat), false
	if (n.Tag == "!!int" || n.Tag == "!!float") && plainNumber(n.Value) {
		_, good = r.SetString(strings.ReplaceAll(n.Value, "_", ""))
	}
	if !good {
		l.errorf(n, p, "must be a number like 0.5 or 2 (got %s)", describe(n))
		return nil, nil, false
	}
	if r.Sign() <= 0 || r.Cmp(big.NewRat(1, 1)) == 0 {
		l.errorf(n, p, "must be greater than 0 and not 1 (got %s)", n.Value)
		return nil, nil, false
	}
	return r, n, true
}

// plainNumber reports whether s is a number big.Rat can read cheaply: it
// computes 10^exp exactly, so "1e999999999" would take minutes.
func plainNumber(s string) bool {
	if len(s) > 40 {
		return false
	}
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return true
	}
	exp, err := strconv.Atoi(s[i+1:])
	return err == nil && exp >= -30 && exp <= 30
}

// fitZip checks that the zip entries agree on their length and fills open
// ranges to it.
func (l *loader) fitZip(zip *axis, unswept map[string]bool) {
	var ref *sweepEntry
	for _, e := range zip.entries {
		if e.open != nil {
			continue
		}
		if ref == nil {
			ref = e
			continue
		}
		if len(e.values) != len(ref.values) {
			l.errorf(e.key, "sweep.zip."+e.p.Name, "has %d values, but sweep.zip.%s has %d; zip parameters advance together, so their lengths must match",
				len(e.values), ref.p.Name, len(ref.values))
		}
	}
	var keep []*sweepEntry
	for _, e := range zip.entries {
		if e.open == nil {
			if ref != nil && len(e.values) == len(ref.values) {
				keep = append(keep, e)
			}
			continue
		}
		if ref == nil {
			why := ""
			if len(unswept) > 0 {
				why = fmt.Sprintf(" (--set replaced the sweep of %s)", strings.Join(sortedKeys(unswept), ", "))
			}
			l.errorf(e.open.node, "sweep.zip."+e.p.Name, "a range without to takes its length from the other zip parameters, but none has a length%s", why)
			continue
		}
		if l.fillOpen(e, len(ref.values)) {
			keep = append(keep, e)
		}
	}
	zip.entries = keep
}

// fillOpen generates n values of an open range.
func (l *loader) fillOpen(e *sweepEntry, n int) bool {
	o, p := e.open, e.p
	path := "sweep.zip." + p.Name
	cur := new(big.Rat).SetInt64(o.from)
	limit := new(big.Rat).SetInt64(math.MaxInt64)
	if p.Max > 0 {
		limit.SetInt64(p.Max)
	}
	for i := 0; i < n; i++ {
		if i > 0 {
			prev := cur.Num().Int64()
			cur.Mul(cur, o.factor)
			if !cur.IsInt() {
				l.errorf(o.factorNode, path+".factor", "%s × %s is %s, not a whole number%s; the range must give whole values for all %d zip positions",
					format(p, value{n: prev}), o.factorNode.Value, cur.FloatString(3), unitWord(p), n)
				return false
			}
			if cur.Cmp(limit) > 0 {
				l.errorf(o.factorNode, path+".factor", "the range grows past %s within the %d zip positions", format(p, value{n: limit.Num().Int64()}), n)
				return false
			}
		}
		e.values = append(e.values, value{n: cur.Num().Int64()})
		e.nodes = append(e.nodes, o.node)
	}
	e.open = nil
	return true
}

// checkDistinct refuses an axis that would give the same point twice: two
// points with one key would make resume ambiguous.
func (l *loader) checkDistinct(a *axis) {
	seen := map[string]int{}
	for i := 0; i < a.len(); i++ {
		var parts []string
		for _, e := range a.entries {
			parts = append(parts, format(e.p, e.values[i]))
		}
		k := strings.Join(parts, ", ")
		if j, dup := seen[k]; dup {
			e := a.entries[0]
			path := "sweep." + e.group
			if e.group == "matrix" {
				path += "." + e.p.Name
				l.errorf(e.nodes[i], path, "value %s is listed twice", k)
			} else {
				l.errorf(e.key, path, "positions %d and %d are the same point (%s)", j+1, i+1, k)
			}
			return
		}
		seen[k] = i
	}
}

func sortedKeys(m map[string]bool) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
