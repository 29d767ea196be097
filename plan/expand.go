package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"rdmasweep/results"
	"rdmasweep/results/param"
)

// DefaultMaxPoints is the expansion limit when ExpandOptions.MaxPoints is 0.
const DefaultMaxPoints = 10000

// localDataAddress is where a local server is reached.
const localDataAddress = "127.0.0.1"

// ExpandOptions are the command-line inputs to Expand.
type ExpandOptions struct {
	// Only holds "name=v1,v2" filters from --only: keep the points whose
	// parameter equals one of the values. Values are read like plan values,
	// so sizes compare as bytes (1MiB matches 1048576). Several filters
	// must all hold. A filter that matches no point is an error.
	Only []string
	// MaxPoints refuses an expansion (after --only) with more points; 0
	// means DefaultMaxPoints.
	MaxPoints int
	// HostName resolves an address (maybe an ssh_config alias) to the host
	// name used as the server's default data_address; nil is the identity.
	// A local server's default data_address is 127.0.0.1.
	HostName func(address string) string
	// Check, when set, is asked about every point, and what it refuses
	// becomes an Error at the place that gave the point its value of the
	// refused parameter: the sweep's list item or range, the value in the
	// plan, or --set. A parameter left at its default is reported at the
	// point's workload value instead. One Error per (place, parameter,
	// workload), however many points share it. The runner checks the peer workloads
	// with it; the rules live with the peers (runner/points/peer).
	Check func(pt Point) []Refusal
	// Unused, when set, names the parameters the point's workload does
	// not use (pipeline for a peer). A swept one does not multiply the
	// point: it is expanded once, at the parameter's default, and the
	// points it would have repeated are left out. Its cell is empty.
	Unused func(pt Point) []string

	// partial: the plan has errors already (ParseExpanded), so the
	// per-point rules, which Load checked, neither repeat its errors nor
	// end the walk before Check has seen every point.
	partial bool
}

// Refusal is one parameter of a point that a Check refuses, and why. Param
// is a parameter's name, optionally with its section ("rdma.device").
type Refusal struct{ Param, Msg string }

// Point is one combination of parameter values. Repetitions of a point
// share its Key.
type Point struct {
	Index  int     // 0-based place in the returned slice (after --only), in expansion order
	Key    string  // 16 hex digits; see Expand
	Hosts  Hosts   // with the server's DataAddress resolved
	Values Values  // every parameter; per-host ones at the plan's value (see For)
	Swept  []Param // this point's swept parameters, in the order the plan's sweep section lists them
	// Unused are the parameters the point's workload does not use
	// (ExpandOptions.Unused), by name: each is at its default, whatever
	// the sweep, and its cell is empty.
	Unused []string

	plan string // the plan's name, for a pair's key (Pair)
}

// Param is a parameter's name and its value formatted for people.
type Param struct{ Name, Value string }

// Transport is the point's transport.
func (pt Point) Transport() string { return pt.Values.Str(param.Transport) }

// For is the point's values as role (a name of Hosts.Roles) has them:
// with its host's per-host parameters.
func (pt Point) For(role string) Values {
	for _, r := range pt.Hosts.Roles() {
		if r.Name == role {
			return pt.Values.with(r.Host.Params)
		}
	}
	panic("plan: no role " + role)
}

// Clients is how many clients take part in the point: its clients
// parameter, or every listed client when that is auto.
func (pt Point) Clients() int {
	if k := pt.Values.Int(param.Clients); k > 0 {
		return int(k)
	}
	return len(pt.Hosts.Clients)
}

// Cell is the point's CSV cell for parameter p (see results.Param.Cell),
// with clients, when auto, as how many take part.
func (pt Point) Cell(p *results.Param) string {
	if slices.Contains(pt.Unused, p.Name) {
		return ""
	}
	if p.ID() == param.Clients {
		return strconv.Itoa(pt.Clients())
	}
	return p.Cell(pt.Transport(), pt.Values)
}

// ExpectedReads is how many blocks the point reads: results.EffectiveTotal
// divided by block_size. It is 0 for duration-based points, whose count is
// not known in advance.
func (pt Point) ExpectedReads() int64 {
	bs := pt.Values.Int(param.BlockSize)
	if bs <= 0 {
		return 0
	}
	return results.EffectiveTotal(pt.Values) / bs
}

// Expand returns p's points in order: sweep.matrix parameters outermost,
// in the order written, then the sweep.zip group, then workload, which
// varies fastest wherever it is written. A plan without a sweep is one
// point.
//
// A point's Key is the first 16 hex digits of the sha256 of canonical JSON
// (object keys sorted; sizes as integer bytes, durations as Go duration
// strings) holding the plan name, the transport, each host's address,
// port, data_address, resolved rdma and cpus, and every server: and
// client: parameter. The same plan always gives the same keys; the
// repetition is not part of it. --only does not change a point's key.
//
// A point whose workload does not use a swept parameter (ExpandOptions.Unused)
// takes it at its default, and is left out when an earlier point is the
// same: the sweep does not multiply it. Indexes count the points kept.
//
// Errors are an ErrorList: an --only filter with an unknown parameter, a
// bad value or no matching point (File "--only"); more points than
// MaxPoints (at the sweep key); and the per-point rules (block_size within
// and dividing file_size; not both total and duration) for the rare sweep
// too large for Load to check every combination. Expand does not modify p.
func Expand(p *Plan, opts ExpandOptions) ([]Point, error) {
	l := newLoader(p.Path)
	l.lines = lineCount(p.Source)
	maxPoints := opts.MaxPoints
	if maxPoints <= 0 {
		maxPoints = DefaultMaxPoints
	}
	hosts := withDataAddresses(p.Hosts, opts.HostName)

	// Filter each axis by --only: every parameter lives on one axis, so
	// the product of the filtered axes is exactly the filtered expansion,
	// and a huge sweep narrowed by --only never has to be generated.
	axes := make([][]int, len(p.sweep.axes)) // per axis, the kept positions
	for i, a := range p.sweep.axes {
		for j := 0; j < a.len(); j++ {
			axes[i] = append(axes[i], j)
		}
	}
	for _, f := range opts.Only {
		l.applyOnly(p, f, axes)
	}
	if len(l.errs) > 0 {
		return nil, l.errs.sorted()
	}
	count := pointCount(axes)
	if count > maxPoints {
		n := strconv.Itoa(count)
		if count == math.MaxInt {
			n = "too many"
		}
		l.errorf(p.sweep.node, "sweep", "expands to %s points, more than the limit of %d; narrow it with --only or raise --max-points", n, maxPoints)
		return nil, l.errs.sorted()
	}

	l.origin = p.origin
	x := &expansion{p: p, l: l, axes: axes, hosts: hosts, check: opts.Check, unused: opts.Unused, partial: opts.partial, refused: map[refusedAt]bool{}}
	points := make([]Point, 0, count)
	pos := make([]int, len(axes)) // odometer over axes, last fastest
	keys := map[string]bool{}
	for n := 0; n < count; n++ {
		pt, collapsed, ok := x.point(n, len(points), pos)
		if !ok {
			return nil, l.errs.sorted()
		}
		if !collapsed || !keys[pt.Key] {
			keys[pt.Key] = true
			points = append(points, pt)
		}
		for ai := len(pos) - 1; ai >= 0; ai-- {
			if pos[ai]++; pos[ai] < len(axes[ai]) {
				break
			}
			pos[ai] = 0
		}
	}
	if len(l.errs) > 0 {
		return nil, l.errs.sorted()
	}
	return points, nil
}

// withDataAddresses is hosts with every server's data_address resolved:
// as written, the loopback for a local server, else what hostName gives
// for its address (the ssh_config HostName), else the address.
func withDataAddresses(hosts Hosts, hostName func(string) string) Hosts {
	hosts.Servers, hosts.Pool = slices.Clone(hosts.Servers), slices.Clone(hosts.Pool)
	for _, h := range append(pointers(hosts.Servers), pointers(hosts.Pool)...) { // a pool's hosts all serve
		switch {
		case h.DataAddress != "":
		case h.IsLocal():
			h.DataAddress = localDataAddress
		case hostName != nil:
			h.DataAddress = hostName(h.Address)
		default:
			h.DataAddress = h.Address
		}
	}
	return hosts
}

// pointCount is the product of the kept axes' lengths. It saturates at
// math.MaxInt, so a sweep too big for an int still reads as too big.
func pointCount(axes [][]int) int {
	count := 1
	for _, kept := range axes {
		if len(kept) > 0 && count > math.MaxInt/len(kept) {
			return math.MaxInt
		}
		count *= len(kept)
	}
	return count
}

// expansion is one Expand's walk over the kept axes.
type expansion struct {
	p       *Plan
	l       *loader
	axes    [][]int // per axis, the kept positions
	hosts   Hosts
	check   func(Point) []Refusal
	unused  func(Point) []string
	refused map[refusedAt]bool // each refusal once where it was written
	partial bool               // ExpandOptions.partial
}

type refusedAt struct {
	at              *yaml.Node
	param, workload string
}

// point is point n of the odometer, at pos on it, with its key; index
// is its place among the points kept. It records the refusals of the
// check; ok is false when the point breaks a per-point rule, which ends
// the expansion. collapsed says a swept parameter its workload does not
// use was put back to its default, so the point may repeat an earlier one.
func (x *expansion) point(n, index int, pos []int) (pt Point, collapsed, ok bool) {
	p, l := x.p, x.l
	pt = Point{Index: index, Hosts: x.hosts, Values: p.Base.clone(), plan: p.Name}
	for ai, a := range p.sweep.axes {
		j := x.axes[ai][pos[ai]]
		for _, e := range a.entries {
			pt.Values.set(e.p.Name, e.values[j])
		}
	}
	if x.unused != nil {
		pt.Unused = x.unused(pt)
		for _, name := range pt.Unused {
			if def := p.Base.get(name); pt.Values.get(name) != def {
				pt.Values.set(name, def) // a swept one: Base holds its default
				collapsed = true
			}
		}
	}
	pipelinePopulate(&pt, p, x.axes, pos)
	directWindow(&pt, p, x.axes, pos)
	for _, sp := range p.sweep.order {
		pt.Swept = append(pt.Swept, Param{sp.Name, format(sp, pt.Values.get(sp.Name))})
	}
	v := pt.Values
	before := len(l.errs)
	for _, msg := range x.pointProblems(v) {
		l.errorf(p.sweep.node, "sweep", "point %d: %s", n+1, msg)
	}
	if len(l.errs) > before {
		return pt, collapsed, false
	}
	if x.check != nil {
		for _, r := range x.check(pt) {
			at, path := p.writtenAt(r.Param, x.axes, pos)
			if at == nil || path == "" {
				at, path = p.writtenAt(fastestParam.String(), x.axes, pos)
			}
			k := refusedAt{at, r.Param, pt.Values.Str(fastestParam)}
			if !x.refused[k] {
				x.refused[k] = true
				l.errorf(at, path, "%s", r.Msg)
			}
		}
	}
	pt.Key = pointKey(p.Name, pt)
	return pt, collapsed, true
}

// pipelinePopulate gives a pipelined point whose plan leaves populate
// unwritten (in the file, the sweep or --set) populate parallel: its
// readers stream the file in while the regions before are registered,
// where fault would leave each region's reading to its registration and
// overlap nothing. The point is keyed with it, so a key of an older
// pipelined point, populate fault, keeps its meaning.
func pipelinePopulate(pt *Point, p *Plan, axes [][]int, pos []int) {
	if !pt.Values.Bool(param.Pipeline) || pt.Values.Str(param.Populate) != results.PopulateFault {
		return
	}
	if at, _ := p.writtenAt(param.Populate.String(), axes, pos); at == nil {
		pt.Values.set(param.Populate.String(), value{s: results.PopulateParallel})
	}
}

// directWindow gives an io direct point whose plan leaves window
// unwritten the ring results.DirectRing sizes for its client: twice the
// bytes it keeps in flight, so the READs never wait for a buffer the
// disk could have filled.
func directWindow(pt *Point, p *Plan, axes [][]int, pos []int) {
	v := pt.Values
	if v.Str(param.IO) != results.IODirect || v.Int(param.Window) != 0 {
		return
	}
	if at, _ := p.writtenAt(param.Window.String(), axes, pos); at == nil {
		buf := v.Int(param.MRSize)
		if v.Str(param.Transport) == results.TransportTCP {
			buf = results.DirectTCPBuffer
		}
		pt.Values.set(param.Window.String(), value{n: int64(results.DirectRing(v.Int(param.QueueDepth)*v.Int(param.BlockSize), buf))})
	}
}

// pointProblems are the per-point rules v breaks; none in a partial
// expansion.
func (x *expansion) pointProblems(v Values) []string {
	if x.partial {
		return nil
	}
	var out []string
	for _, msg := range []string{
		blockFileProblem(v.Int(param.FileSize), v.Int(param.BlockSize)),
		totalDurationProblem(v.Int(param.Total), v.Int(param.Duration)),
		mrBlockProblem(v.Int(param.BlockSize), v.Int(param.MRSize)),
		mrFileProblem(v.Int(param.FileSize), v.Int(param.MRSize)),
		windowProblem(v),
		directProblem(v),
	} {
		if msg != "" {
			out = append(out, msg)
		}
	}
	return out
}

// writtenAt is where the point at pos (the odometer over the kept axes)
// got its value of the parameter name (maybe with its section): its sweep
// entry's item, or the base value's node, with the field path to name. A
// default has no node.
func (p *Plan) writtenAt(name string, axes [][]int, pos []int) (*yaml.Node, string) {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	prm := paramByName(name)
	if prm == nil {
		return nil, ""
	}
	for ai, a := range p.sweep.axes {
		for _, e := range a.entries {
			if e.p == prm {
				return e.nodes[axes[ai][pos[ai]]], "sweep." + e.group + "." + prm.Name
			}
		}
	}
	return p.written[prm.Name], prm.Path()
}

// applyOnly narrows the axes by one "name=v1,v2" filter, reporting a
// filter that would leave no point.
func (l *loader) applyOnly(p *Plan, f string, axes [][]int) {
	before := len(l.errs)
	name, list, ok := strings.Cut(f, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" || list == "" {
		l.errs = append(l.errs, &Error{File: "--only", Path: f, Msg: "must be name=v1,v2"})
		return
	}
	prm := paramByName(name)
	if prm == nil {
		var names []string
		for _, q := range results.Params() {
			names = append(names, q.Name)
		}
		l.errs = append(l.errs, &Error{File: "--only", Path: name, Msg: "unknown parameter" + suggest(name, names)})
		return
	}
	var want []value
	for _, s := range strings.Split(list, ",") {
		var n yaml.Node
		s = strings.TrimSpace(s)
		if err := yaml.Unmarshal([]byte(s), &n); err != nil || len(n.Content) == 0 {
			l.errs = append(l.errs, &Error{File: "--only", Path: name, Msg: fmt.Sprintf("bad value %q", s)})
			continue
		}
		vn := n.Content[0]
		l.origin[vn] = origin{"--only", name}
		if v, ok := l.paramValue(prm, vn, name, true); ok {
			want = append(want, v)
		}
	}
	if len(l.errs) > before {
		return
	}
	match := func(v value) bool {
		for _, w := range want {
			if v == w {
				return true
			}
		}
		return false
	}
	for ai, a := range p.sweep.axes {
		for _, e := range a.entries {
			if e.p != prm {
				continue
			}
			var kept []int
			var have []string
			for _, j := range axes[ai] {
				if match(e.values[j]) {
					kept = append(kept, j)
				}
				have = append(have, format(prm, e.values[j]))
			}
			if len(kept) == 0 {
				l.errs = append(l.errs, &Error{File: "--only", Path: name, Msg: fmt.Sprintf("no point has %s (values: %s)", list, strings.Join(have, ", "))})
			}
			axes[ai] = kept
			return
		}
	}
	v := p.Base.get(prm.Name)
	if !match(v) {
		l.errs = append(l.errs, &Error{File: "--only", Path: name, Msg: fmt.Sprintf("no point has %s (%s is not swept; every point has %s)", list, name, format(prm, v))})
	}
}

// pointKey hashes the point's canonical JSON; see Expand.
func pointKey(planName string, pt Point) string {
	sum := sha256.Sum256(keyJSON(planName, pt))
	return hex.EncodeToString(sum[:])[:16]
}

// keyJSON is the canonical JSON a point's key hashes. Its shape is
// version 1's: the plan name, the transport, each host (address, port,
// data_address, cpus and its per-host parameters by section), and every
// server: and client: parameter. A parameter added later (Since > 1)
// enters it only when it differs from its default, in its section's
// object (top-level ones at the top), so the keys of points that leave it
// alone stay as they were.
func keyJSON(planName string, pt Point) []byte {
	return keyJSONOf(planName, pt, results.Params())
}

// put sets m[section][name] (m[name] for the top level), making the
// section's object when it is the first.
func put(m map[string]any, section, name string, v any) {
	if section == "" {
		m[name] = v
		return
	}
	sm, _ := m[section].(map[string]any)
	if sm == nil {
		sm = map[string]any{}
		m[section] = sm
	}
	sm[name] = v
}

// keyJSONOf is keyJSON over the given parameters (a test adds one).
func keyJSONOf(planName string, pt Point, params []*results.Param) []byte {
	keyed := func(prm *results.Param, v value) bool {
		// Compared as keyed: an auto value with an AutoKey keys as the
		// default it replaced, so the old default keeps the old key.
		def, _ := parseDefault(prm)
		return !prm.Unkeyed && (prm.Since <= 1 || canonical(prm, v) != canonical(prm, def))
	}
	host := func(h Host) map[string]any {
		m := map[string]any{
			"address":      h.Address,
			"port":         h.Port,
			"data_address": h.DataAddress,
			"cpus":         h.CPUs,
		}
		for _, prm := range params {
			v, ok := h.Params.m[prm.Name]
			if !prm.PerHost || !ok || !keyed(prm, v) {
				continue
			}
			put(m, prm.Section, prm.Name, canonical(prm, v))
		}
		return m
	}
	// One host is an object, as in version 1; a list is a list.
	list := func(hs []Host) any {
		if len(hs) == 1 {
			return host(hs[0])
		}
		var out []any
		for _, h := range hs {
			out = append(out, host(h))
		}
		return out
	}
	doc := map[string]any{
		"plan":  planName,
		"hosts": map[string]any{"server": list(pt.Hosts.Servers), "client": list(pt.Hosts.Clients)},
	}
	if len(pt.Hosts.Pool) > 0 {
		doc["hosts"] = map[string]any{"pool": list(pt.Hosts.Pool)}
	}
	for _, prm := range params {
		v := pt.Values.m[prm.Name]
		if prm.PerHost || !keyed(prm, v) {
			continue // a per-host parameter is keyed under its hosts
		}
		put(doc, prm.Section, prm.Name, canonical(prm, v))
	}
	b, err := json.Marshal(doc) // maps marshal with sorted keys
	if err != nil {
		panic("plan: point key: " + err.Error()) // maps of plain values always marshal
	}
	return b
}

// pointers are the addresses of hs's elements.
func pointers(hs []Host) []*Host {
	out := make([]*Host, len(hs))
	for i := range hs {
		out[i] = &hs[i]
	}
	return out
}
