package plan

import (
	"fmt"
	"slices"
	"strconv"

	"gopkg.in/yaml.v3"

	"rdmasweep/results"
	"rdmasweep/results/param"
)

// maxComboChecks bounds the cross-field checks in Load; a bigger cross
// product is left to Expand, which checks each point it makes anyway.
const maxComboChecks = 1 << 20

// source is where a parameter's values come from: its sweep entry, or its
// single base value.
type source struct {
	path   string
	axis   *axis
	values []value
	nodes  []*yaml.Node
}

func (l *loader) source(p *Plan, base map[string]baseValue, id param.ID) source {
	name := id.String()
	for _, a := range p.sweep.axes {
		for _, e := range a.entries {
			if e.p.Name == name {
				return source{path: "sweep." + e.group + "." + name, axis: a, values: e.values, nodes: e.nodes}
			}
		}
	}
	b := base[name]
	return source{path: paramByName(name).Path(), values: []value{b.v}, nodes: []*yaml.Node{b.node}}
}

// pairs calls fn for every combination of a's and b's values that some
// point will have, until fn returns false.
func pairs(a, b source, fn func(i, j int) bool) {
	if a.axis != nil && a.axis == b.axis {
		for i := range a.values {
			if !fn(i, i) {
				return
			}
		}
		return
	}
	if len(a.values)*len(b.values) > maxComboChecks {
		return
	}
	for i := range a.values {
		for j := range b.values {
			if !fn(i, j) {
				return
			}
		}
	}
}

// checkCombos checks the rules that tie two parameters together, over
// every combination the sweep will produce, reporting the first offending
// combination of each rule where the value that breaks it was written.
func (l *loader) checkCombos(root *yaml.Node, p *Plan, base map[string]baseValue) {
	at := func(s source, i int) *yaml.Node {
		if s.nodes[i] != nil {
			return s.nodes[i]
		}
		return root
	}
	fs, bs := l.source(p, base, param.FileSize), l.source(p, base, param.BlockSize)
	if base[param.FileSize.String()].node != nil || fs.axis != nil {
		pairs(fs, bs, func(i, j int) bool {
			f, b := fs.values[i].n, bs.values[j].n
			if f <= 0 || b <= 0 {
				return true
			}
			if msg := blockFileProblem(f, b); msg != "" {
				if b > f {
					l.errorf(at(bs, j), bs.path, "%s", msg)
				} else {
					l.errorf(at(fs, i), fs.path, "%s", msg)
				}
				return false
			}
			return true
		})
	}
	l.checkMRSize(p, base, fs, bs, at)
	total, dur := l.source(p, base, param.Total), l.source(p, base, param.Duration)
	pairs(total, dur, func(i, j int) bool {
		if msg := totalDurationProblem(total.values[i].n, dur.values[j].n); msg != "" {
			l.errorf(at(dur, j), dur.path, "%s", msg)
			return false
		}
		return true
	})
	l.checkTopology(root, p, base, at)
	l.checkRate(p, base, at)
	l.checkPipeline(p, base, at)
	l.checkWindow(p, base, at)
	l.checkIO(p, base, at)

	// What a transport takes: the limits node enforces, per transport, for
	// every value a point will have, reported where the value was written.
	tr := l.source(p, base, param.Transport)
	for _, prm := range results.Params() {
		if len(prm.Limits) == 0 && (prm.Kind != results.KindSize || prm.Max == 0) {
			continue // ints are held to Max as they are read
		}
		src := l.source(p, base, prm.ID())
		pairs(tr, src, func(i, j int) bool {
			transport, v := tr.values[i].s, src.values[j].n
			max, why, ok := prm.LimitFor(transport)
			if !ok || v <= max || !prm.AppliesTo(transport) {
				return true
			}
			if why == "" {
				why = "node's largest"
			}
			l.errorf(at(src, j), src.path, "%s is more than the %s transport takes: at most %s (%s)",
				format(prm, src.values[j]), transport, format(prm, value{n: max}), why)
			return false
		})
	}
}

// blockFileProblem states what is wrong with a block size for a file size.
func blockFileProblem(fileSize, blockSize int64) string {
	switch {
	case blockSize > fileSize:
		return "block_size " + results.FormatSize(blockSize) + " is larger than file_size " + results.FormatSize(fileSize)
	case fileSize%blockSize != 0:
		return "file_size " + results.FormatSize(fileSize) + " is not a multiple of block_size " + results.FormatSize(blockSize) +
			decimalHint(fileSize, blockSize)
	}
	return ""
}

// decimalHint is the likely slip behind a size that is not a multiple of
// another: written in a decimal unit (10GB, powers of 1000) where the
// binary one (10GiB) was meant. It is "" unless n is a whole number of a
// decimal unit whose binary twin is a multiple of of.
func decimalHint(n, of int64) string {
	for _, u := range []struct {
		dec, bin  int64
		dname, bn string
	}{{1e12, 1 << 40, "TB", "TiB"}, {1e9, 1 << 30, "GB", "GiB"}, {1e6, 1 << 20, "MB", "MiB"}, {1e3, 1 << 10, "KB", "KiB"}} {
		if n%u.dec != 0 {
			continue
		}
		if k := n / u.dec; of > 0 && k*u.bin%of == 0 {
			return fmt.Sprintf(": %d%s is in powers of 1000 (did you mean %d%s?)", k, u.dname, k, u.bn)
		}
		return ""
	}
	return ""
}

// checkMRSize holds mr_size to the block sizes it is read with (no READ
// may span two memory regions) and to the file sizes it splits.
func (l *loader) checkMRSize(p *Plan, base map[string]baseValue, fs, bs source, at func(source, int) *yaml.Node) {
	mr := l.source(p, base, param.MRSize)
	pairs(bs, mr, func(i, j int) bool {
		if msg := mrBlockProblem(bs.values[i].n, mr.values[j].n); msg != "" {
			l.errorf(at(mr, j), mr.path, "%s", msg)
			return false
		}
		return true
	})
	pairs(fs, mr, func(i, j int) bool {
		if msg := mrFileProblem(fs.values[i].n, mr.values[j].n); msg != "" {
			l.errorf(at(mr, j), mr.path, "%s", msg)
			return false
		}
		return true
	})
}

// mrBlockProblem states what is wrong with an mr_size for a block size.
func mrBlockProblem(blockSize, mrSize int64) string {
	if mrSize > 0 && blockSize > 0 && mrSize%blockSize != 0 {
		return "mr_size " + results.FormatSize(mrSize) + " is not a multiple of block_size " + results.FormatSize(blockSize) +
			": a READ would span two memory regions; choose an mr_size that block_size divides"
	}
	return ""
}

// mrFileProblem states what is wrong with an mr_size for a file size.
func mrFileProblem(fileSize, mrSize int64) string {
	if n := results.MRCount(fileSize, mrSize); fileSize > 0 && n > results.MaxRegions {
		return "mr_size " + results.FormatSize(mrSize) + " splits file_size " + results.FormatSize(fileSize) + " into " +
			strconv.FormatInt(n, 10) + " memory regions, more than node's " + strconv.Itoa(results.MaxRegions) + "; raise mr_size"
	}
	return ""
}

func totalDurationProblem(total, duration int64) string {
	if total != 0 && duration != 0 {
		return "total " + results.FormatSize(total) + " and duration " + format(results.ParamOf(param.Duration), value{n: duration}) +
			" are both non-zero; a point reads either total bytes or for a duration"
	}
	return ""
}

// checkTopology holds the hosts to the topology: fan-in has one server,
// pairs one server per client, and no point asks for more clients than
// are listed.
func (l *loader) checkTopology(root *yaml.Node, p *Plan, base map[string]baseValue, at func(source, int) *yaml.Node) {
	l.checkPool(p, base)
	servers, clients := len(p.Hosts.Servers), len(p.Hosts.Clients)
	if servers == 0 || clients == 0 {
		return // hosts are missing, and reported
	}
	topo := l.source(p, base, param.Topology)
	switch where := l.roles["server"]; {
	case topo.values[0].s == "fan-in" && servers > 1:
		if base[param.Topology.String()].node != nil {
			where = at(topo, 0)
		}
		l.errorf(where, "topology", "fan-in has one server, and hosts.server lists %d; for one server per client use topology: pairs", servers)
	case topo.values[0].s == "pairs" && servers != clients:
		l.errorf(where, "hosts.server", "topology pairs needs one server per client: hosts.server lists %d, hosts.client %d", servers, clients)
	}
	k := l.source(p, base, param.Clients)
	for j, v := range k.values {
		if v.n > int64(clients) {
			l.errorf(at(k, j), k.path, "%d clients, but hosts.client lists %d", v.n, clients)
			return
		}
	}
}

// valueText is v as a message shows it: its string, else its number.
func valueText(v value) string {
	if v.s != "" {
		return v.s
	}
	return strconv.FormatInt(v.n, 10)
}

// checkRate refuses a rate where nothing would honour it: the open loop is
// node's, so the peers would run closed-loop under a row that claims an
// offered load; and node's rdma open loop signals every READ, so a
// cq_moderation above 1 would not hold.
func (l *loader) checkRate(p *Plan, base map[string]baseValue, at func(source, int) *yaml.Node) {
	rate, arrivals := l.source(p, base, param.Rate), l.source(p, base, param.Arrivals)
	pairs(rate, arrivals, func(i, j int) bool {
		if rate.values[i].s == "" && arrivals.values[j].s != "fixed" {
			l.errorf(at(arrivals, j), arrivals.path, "arrivals %s needs client.rate: without a rate the client is closed-loop, and nothing is due", arrivals.values[j].s)
			return false
		}
		return true
	})
	for _, other := range []struct {
		id     param.ID
		refuse func(value) string
	}{
		{param.CQModeration, func(m value) string {
			if m.n > 1 {
				return "an open loop signals every READ, to time each from its due time: cq_moderation cannot be above 1 with a rate; drop rdma.cq_moderation (auto is 1 in an open loop), or drop client.rate"
			}
			return ""
		}},
		{param.Workload, func(v value) string {
			if w := v.s; w != "node" {
				return w + " reads closed-loop: only node takes a rate; drop client.rate, or sweep it over workload node alone"
			}
			return ""
		}},
	} {
		src := l.source(p, base, other.id)
		pairs(rate, src, func(i, j int) bool {
			if rate.values[i].s == "" {
				return true
			}
			if msg := other.refuse(src.values[j]); msg != "" {
				l.errorf(at(rate, i), rate.path, "%s (with %s %s)", msg, other.id, valueText(src.values[j]))
				return false
			}
			return true
		})
	}
}

// checkPipeline refuses what a pipelined server cannot serve: odp (it
// registers nothing ahead of the reads to pipeline), an open loop (its
// reads would wait for the regions, not their due times), several
// clients (one session prepares the file), and one region (mr_size 0:
// nothing to overlap).
func (l *loader) checkPipeline(p *Plan, base map[string]baseValue, at func(source, int) *yaml.Node) {
	pipe := l.source(p, base, param.Pipeline)
	for _, other := range []struct {
		id     param.ID
		refuse func(value) string
	}{
		{param.Registration, func(v value) string {
			if v.s == "odp" {
				return "registration odp registers nothing ahead of the reads, so there is nothing to pipeline; use registration: pinned"
			}
			return ""
		}},
		{param.Rate, func(v value) string {
			if v.s != "" {
				return "an open loop's reads would wait for the memory regions, not their due times; drop client.rate"
			}
			return ""
		}},
		{param.Clients, func(v value) string {
			if v.n > 1 {
				return "a pipelined server prepares the file in one client's session; set clients: 1"
			}
			return ""
		}},
		{param.MRSize, func(v value) string {
			if v.n == 0 {
				return "mr_size 0 makes the file one region, so nothing overlaps; set server.mr_size, e.g. 16MiB (the best end to end measured: docs/rdma.md#pipeline)"
			}
			return ""
		}},
	} {
		src := l.source(p, base, other.id)
		pairs(pipe, src, func(i, j int) bool {
			if !pipe.values[i].b {
				return true
			}
			if msg := other.refuse(src.values[j]); msg != "" {
				l.errorf(at(pipe, i), pipe.path, "pipeline: %s (with %s %s)", msg, other.id, valueText(src.values[j]))
				return false
			}
			return true
		})
	}
}

// checkWindow refuses a window where it cannot bound anything: without
// the pipeline (a serial server registers the file whole before ready),
// and for a client that does not read the file once from its start (a
// region is deregistered once read, so a second pass, a warmup, a
// duration or a random order would READ a region that is gone).
func (l *loader) checkWindow(p *Plan, base map[string]baseValue, at func(source, int) *yaml.Node) {
	win := l.source(p, base, param.Window)
	onePass := "a window deregisters each memory region once the client has read it, so the client reads the file once from its start"
	// Without the pipeline, a window is io direct's ring: where some
	// point reads direct, each point's own values decide (windowProblem).
	direct := slices.ContainsFunc(l.source(p, base, param.IO).values, func(v value) bool { return v.s == results.IODirect })
	l.refuseWith(win, func(v value) bool { return v.n != 0 }, "window %d", p, base, at, append(onePassRules(onePass), rule{param.Pipeline, func(v value) string {
		if !v.b && !direct {
			return "it bounds a pipelined server's registered regions; set server.pipeline: true"
		}
		return ""
	}}))
}

// checkIO refuses what io direct cannot serve: the pipeline (it streams
// through its own ring), odp, an open loop, several clients, and a
// client that does not read the file once from its start (directProblem
// holds each point's buffers to its transport).
func (l *loader) checkIO(p *Plan, base map[string]baseValue, at func(source, int) *yaml.Node) {
	io := l.source(p, base, param.IO)
	rules := append(onePassRules("each region is read into a ring buffer that is refilled once the client has read it, so the client reads the file once from its start"),
		rule{param.Pipeline, func(v value) string {
			if v.b {
				return "it streams the file through its own ring; set pipeline: false"
			}
			return ""
		}},
		rule{param.Registration, func(v value) string {
			if v.s == "odp" {
				return "its ring is registered once, pinned; use registration: pinned"
			}
			return ""
		}},
		rule{param.Rate, func(v value) string {
			if v.s != "" {
				return "an open loop's reads would wait for the buffers, not their due times; drop client.rate"
			}
			return ""
		}},
		rule{param.Clients, func(v value) string {
			if v.n > 1 {
				return "it streams the file to one client; set clients: 1"
			}
			return ""
		}})
	l.refuseWith(io, func(v value) bool { return v.s == results.IODirect }, "io %s", p, base, at, rules)
}

// rule refuses a value of id, saying why, or "".
type rule struct {
	id     param.ID
	refuse func(value) string
}

// onePassRules refuse what keeps a client from reading the file once
// from its start, why being the reason it must.
func onePassRules(why string) []rule {
	return []rule{
		{param.Duration, func(v value) string {
			if v.n != 0 {
				return why + "; set duration: 0s (a zip with cache gives it the cold points alone)"
			}
			return ""
		}},
		{param.Warmup, func(v value) string {
			if v.n != 0 {
				return why + "; set warmup: 0s"
			}
			return ""
		}},
		{param.Total, func(v value) string {
			if v.n != 0 {
				return why + "; drop total"
			}
			return ""
		}},
		{param.Pattern, func(v value) string {
			if v.s != "sequential" {
				return why + "; set pattern: sequential"
			}
			return ""
		}},
	}
}

// refuseWith reports, at trig's value, each rule's refusal of a value a
// point has beside one of trig's values that on holds for. what formats
// trig's value (%d for a number, %s for a word).
func (l *loader) refuseWith(trig source, on func(value) bool, what string, p *Plan, base map[string]baseValue, at func(source, int) *yaml.Node, rules []rule) {
	for _, r := range rules {
		src := l.source(p, base, r.id)
		pairs(trig, src, func(i, j int) bool {
			v := trig.values[i]
			if !on(v) {
				return true
			}
			if msg := r.refuse(src.values[j]); msg != "" {
				name := fmt.Sprintf(what, v.n)
				if v.s != "" {
					name = fmt.Sprintf(what, v.s)
				}
				l.errorf(at(trig, i), trig.path, "%s: %s (with %s %s)", name, msg, r.id, format(results.ParamOf(r.id), src.values[j]))
				return false
			}
			return true
		})
	}
}

// windowProblem states what is wrong with a point's window: one that
// bounds nothing, neither pipelined nor io direct (checkWindow says so
// where the plan wrote it, unless some point reads direct).
func windowProblem(v Values) string {
	if v.Int(param.Window) > 0 && !v.Bool(param.Pipeline) && v.Str(param.IO) != results.IODirect {
		return fmt.Sprintf("window %d bounds a pipelined server's registered regions, or io direct's ring; set pipeline: true or io: direct", v.Int(param.Window))
	}
	return ""
}

// directProblem states what is wrong with an io direct point's buffers:
// over rdma, no mr_size (their size) or one not a whole number of pages
// (O_DIRECT's alignment); over tcp, a block_size that does not divide
// its 16 MiB buffers.
func directProblem(v Values) string {
	if v.Str(param.IO) != results.IODirect {
		return ""
	}
	mr, bs := v.Int(param.MRSize), v.Int(param.BlockSize)
	switch {
	case v.Str(param.Transport) == results.TransportTCP && (bs > results.DirectTCPBuffer || results.DirectTCPBuffer%bs != 0):
		return "io direct over tcp reads the file into 16MiB buffers: choose a block_size that divides 16MiB"
	case v.Str(param.Transport) != results.TransportRDMA:
	case mr == 0:
		return "io direct reads the file into buffers of mr_size: set server.mr_size, e.g. 16MiB"
	case mr%4096 != 0:
		return "O_DIRECT reads whole pages: set an mr_size that is a multiple of 4KiB"
	}
	return ""
}
