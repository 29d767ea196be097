package plan

// The search section: the knee of one parameter, found at run time.
//
//	search:
//	  param: queue_depth
//	  from: 1
//	  to: 256
//	  until: {metric: lat_p99_us, at_most: 500}
//	  resolution: 1

import (
	"slices"
	"strconv"

	"gopkg.in/yaml.v3"

	"rdmasweep/results"
)

var (
	searchKeys = []string{"param", "from", "to", "until", "resolution"}
	untilKeys  = []string{"metric", "at_most", "at_least"}
)

// Search is a plan's search section: for each point of the rest of the
// sweep, the largest Param in [From, To] whose median Metric stays at
// most (AtMost) or at least Limit, to Resolution.
type Search struct {
	Param      string
	From, To   int64
	Resolution int64
	Metric     string
	AtMost     bool
	Limit      float64
}

// searchable are the sweepable integer and size parameters.
func searchable() []string {
	var names []string
	for _, p := range results.Params() {
		if p.Sweep && (p.Kind == results.KindInt || p.Kind == results.KindSize) {
			names = append(names, p.Name)
		}
	}
	return names
}

func (l *loader) search(sf field, p *Plan) {
	if isNull(resolve(sf.val)) {
		return
	}
	f, ok := l.mapping(sf.val, "search", searchKeys)
	if !ok {
		return
	}
	s := &Search{Resolution: 1}
	name, nn, ok := l.str(f, "param", "search")
	switch {
	case !ok:
		l.errorf(sf.key, "search.param", "required: a sweepable integer or size parameter such as queue_depth")
	case !slices.Contains(searchable(), name):
		l.errorf(nn, "search.param", "%q is not a sweepable integer or size parameter%s", name, suggest(name, searchable()))
		ok = false
	case p.sweep.has(name):
		l.errorf(nn, "search.param", "%s is swept too; the search varies it itself, so remove it from sweep", name)
		ok = false
	}
	s.Param = name
	bok := l.searchBounds(sf, f, s)
	uok := l.until(sf, f["until"], s)
	if ok && bok && uok {
		p.Search = s
	}
}

// searchBounds reads from, to and resolution, in the parameter's syntax.
func (l *loader) searchBounds(sf field, f map[string]field, s *Search) bool {
	read := func(key string, lo int64) (int64, *yaml.Node, bool) {
		n, ok := l.scalar(f[key].val, "search."+key, "a value of "+s.Param)
		if !ok {
			return 0, nil, false
		}
		if p := results.ParamByName(s.Param); p != nil && p.Kind == results.KindSize {
			v, ok := l.sizeValue(n, "search."+key, lo)
			return v, n, ok
		}
		v, ok := l.intValue(n, "search."+key, lo, 1<<40)
		return v, n, ok
	}
	from, _, fok := read("from", 1)
	to, tn, tok := read("to", 1)
	if !fok && isNull(resolve(f["from"].val)) {
		l.errorf(sf.key, "search.from", "required: where the doubling starts")
	}
	if !tok && isNull(resolve(f["to"].val)) {
		l.errorf(sf.key, "search.to", "required: the largest value to try")
	}
	if fok && tok && to < from {
		l.errorf(tn, "search.to", "must be at least from (%d)", from)
		tok = false
	}
	s.From, s.To = from, to
	rok := true
	if _, written := f["resolution"]; written {
		s.Resolution, _, rok = read("resolution", 1)
	}
	return fok && tok && rok
}

// until reads the condition: a metric and at_most or at_least a number.
func (l *loader) until(sf field, uf field, s *Search) bool {
	if isNull(resolve(uf.val)) {
		l.errorf(sf.key, "search.until", "required: {metric: lat_p99_us, at_most: 500}")
		return false
	}
	f, ok := l.mapping(uf.val, "search.until", untilKeys)
	if !ok {
		return false
	}
	metric, ok := l.metric(f, "search.until", uf.key, "lat_p99_us")
	s.Metric = metric
	_, most := f["at_most"]
	_, least := f["at_least"]
	key := "at_most"
	switch {
	case most && least:
		l.errorf(f["at_least"].key, "search.until.at_least", "give at_most or at_least, not both")
		return false
	case least:
		key = "at_least"
	case !most:
		l.errorf(uf.key, "search.until", "needs at_most or at_least")
		return false
	}
	s.AtMost = key == "at_most"
	n, nok := l.scalar(f[key].val, "search.until."+key, "a number")
	if !nok {
		return false
	}
	v, err := strconv.ParseFloat(n.Value, 64)
	if err != nil {
		l.errorf(n, "search.until."+key, "must be a number in %s's unit (got %q)", metric, n.Value)
		return false
	}
	s.Limit = v
	return ok
}

// Probe is pt with the searched parameter at v: a point of its own, keyed
// as a point that swept the parameter to v would be, so a resumed exec
// finds the rows it measured. pt is a point Expand gave for this plan.
func (s *Search) Probe(pt Point, v int64) Point {
	prm := results.ParamByName(s.Param)
	out := pt
	out.Values = pt.Values.With(prm.ID(), v)
	out.Swept = append(slices.Clone(pt.Swept), Param{prm.Name, format(prm, out.Values.get(prm.Name))})
	out.Key = pointKey(pt.plan, out)
	return out
}
