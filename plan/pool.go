package plan

// Pool plans: topology pairwise or ring over hosts.pool. The plan holds
// the pool; the rounds are runner/reading/fleet's schedule, and each pair of a
// round is a point of one server and one client (Point.Pair).

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"rdmasweep/results/param"
)

// IsPoolTopology reports whether a topology runs over hosts.pool.
func IsPoolTopology(topology string) bool { return topology == "pairwise" || topology == "ring" }

// Topology is the plan's topology (it cannot be swept).
func (p *Plan) Topology() string { return p.Base.Str(param.Topology) }

// IsPool reports whether the plan runs over hosts.pool: topology pairwise
// or ring.
func (p *Plan) IsPool() bool { return IsPoolTopology(p.Topology()) }

// hostsKeys are the keys of the hosts mapping.
var hostsKeys = append(append([]string(nil), roleKeys...), "pool")

// pool reads hosts.pool, for a plan whose topology is pairwise or ring or
// that writes hosts.pool. Each item is an address (as in [a, b, c]) or a
// host's mapping, as hosts.server takes.
func (l *loader) pool(hf field, f map[string]field, p *Plan) {
	topo := p.Topology()
	pf, written := f["pool"]
	if !written {
		at := hf.val
		if isNull(at) {
			at = hf.key
		}
		l.errorf(at, "hosts.pool", "required: topology %s runs over a list of hosts, hosts.pool: [a, b, …]", topo)
		return
	}
	if !IsPoolTopology(topo) {
		l.errorf(pf.key, "hosts.pool", "is for topology pairwise or ring (this plan's topology is %s); fan-in and pairs take hosts.server and hosts.client", topo)
	}
	for _, role := range roleKeys {
		if rf, ok := f[role]; ok {
			l.errorf(rf.key, "hosts."+role, "a plan with hosts.pool takes its roles from the pool's schedule; remove hosts.%s", role)
		}
	}
	n := resolve(pf.val)
	if isNull(n) || n.Kind != yaml.SequenceNode {
		at := pf.val
		if isNull(at) {
			at = pf.key
		}
		l.errorf(at, "hosts.pool", "must be a list of hosts, [a, b, …] (got %s)", describe(n))
		return
	}
	if len(n.Content) < 2 {
		l.errorf(n, "hosts.pool", "must list at least 2 hosts (got %d)", len(n.Content))
	}
	seen := map[string]string{}
	for i, item := range n.Content {
		path := fmt.Sprintf("hosts.pool[%d]", i)
		if it := resolve(item); it != nil && it.Kind == yaml.ScalarNode && it.Tag != "!!null" {
			// A bare address is the mapping {address: it}.
			key := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "address", Line: it.Line, Column: it.Column}
			item = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{key, it}, Line: it.Line, Column: it.Column}
		}
		if isNull(item) {
			l.errorf(item, path, "must be a host: an address, or a mapping with address:")
			continue
		}
		h := l.host(field{key: pf.key, val: item}, path, p.Base)
		id := fmt.Sprintf("%s@%s:%d", h.User, h.Address, h.Port)
		if first, dup := seen[id]; dup && h.Address != "" {
			l.errorf(item, path, "%s is listed twice (also %s); a pool lists every host once", h.Address, first)
		}
		seen[id] = path
		p.Hosts.Pool = append(p.Hosts.Pool, h)
	}
}

// allocationPool makes the allocation's nodes the pool, for launcher:
// slurm without a hosts section.
func (l *loader) allocationPool(at *yaml.Node, p *Plan, nodes []string, node func(string) Host) {
	if len(nodes) < 2 {
		l.errorf(at, "launcher", "the allocation has %d node; topology %s needs 2 or more: allocate with salloc -N2 or more, or name the hosts", len(nodes), p.Topology())
		return
	}
	for _, n := range nodes {
		p.Hosts.Pool = append(p.Hosts.Pool, node(n))
	}
}

// checkPool holds the params that shape a pool's rounds to the pool
// topologies, and clients, which the rounds replace, away from them.
func (l *loader) checkPool(p *Plan, base map[string]baseValue) {
	topo := p.Topology()
	refuse := func(name, msg string) {
		if at := base[name].node; at != nil {
			l.errorf(at, paramByName(name).Path(), msg, topo)
		}
	}
	if topo != "pairwise" {
		refuse("pairwise_parallel", "is for topology pairwise (this plan's topology is %s)")
	}
	if !IsPoolTopology(topo) {
		refuse("max_parallel", "is for topologies pairwise and ring (this plan's topology is %s)")
		return
	}
	refuse("clients", "is for fan-in and pairs; topology %s runs its pairs in rounds (pairwise_parallel and max_parallel set how many at once)")
	if s := l.source(p, base, param.Clients); s.axis != nil {
		l.errorf(s.nodes[0], s.path, "clients cannot be swept with topology %s; its pairs run in rounds (pairwise_parallel and max_parallel set how many at once)", topo)
	}
}

// Pair is the hosts of one pair of a pool: pool[server] serves,
// pool[client] reads.
func (h Hosts) Pair(server, client int) Hosts {
	return Hosts{Servers: []Host{h.Pool[server]}, Clients: []Host{h.Pool[client]}}
}

// Pair is the point for one pair of a pool point: the same values, the
// pair's two hosts, and the key a point of those two hosts has, so a
// pair's rows are matched across runs as any point's are.
func (pt Point) Pair(server, client int) Point {
	q := pt
	q.Hosts = pt.Hosts.Pair(server, client)
	q.Key = pointKey(pt.plan, q)
	return q
}

// Round is the point that runs the given pairs of a pool point at once,
// each pair [server, client] a pair of pool indices: topology pairs over
// the pairs' hosts, so server i serves client i and, with more than one
// pair, the clients start at one barrier. Its key names the round's
// hosts; its rows take their pair's key (Pair).
func (pt Point) Round(pairs [][2]int) Point {
	q := pt
	q.Values = pt.Values.clone()
	q.Values.set("topology", value{s: "pairs"})
	several := len(pairs) > 1
	q.Hosts = Hosts{listed: map[string]bool{"server": several, "client": several}}
	for _, p := range pairs {
		q.Hosts.Servers = append(q.Hosts.Servers, pt.Hosts.Pool[p[0]])
		q.Hosts.Clients = append(q.Hosts.Clients, pt.Hosts.Pool[p[1]])
	}
	q.Key = pointKey(pt.plan, q)
	return q
}
