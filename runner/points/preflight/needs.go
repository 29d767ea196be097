package preflight

import (
	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/points/peer"
)

// Pair is a client and the server it reads: with fan-in the one server,
// with pairs its own.
type Pair struct {
	Server, Client plan.Role
	SI, CI         int // their indexes in Hosts.Servers and Hosts.Clients
}

// Pairs are the plan's clients, each with its server.
func Pairs(p *plan.Plan) []Pair {
	roles := p.Hosts.Roles()
	servers, clients := roles[:len(p.Hosts.Servers)], roles[len(p.Hosts.Servers):]
	var out []Pair
	for i, c := range clients {
		si := 0
		if len(servers) == len(clients) && p.Base.Str(param.Topology) == "pairs" {
			si = i
		}
		out = append(out, Pair{servers[si], c, si, i})
	}
	return out
}

// Needs says what the plan asks of each role's host, over the points pts,
// in the plan's role order; nodeSums are the sha256 of the node each
// role's host got, in the same order, or nil when node is not judged.
func Needs(p *plan.Plan, pts []plan.Point, nodeSums []string) []Need {
	var needs []Need
	server := map[string]string{} // each role's server
	for _, pair := range Pairs(p) {
		server[pair.Client.Name], server[pair.Server.Name] = pair.Server.Name, pair.Server.Name
	}
	for i, s := range p.Hosts.Roles() {
		// The server's role is its Need's role: the judge asks of it what
		// a server needs.
		kind := "client"
		if server[s.Name] == s.Name {
			kind = "server"
		}
		n := Need{Role: kind, Transport: p.Transport(), CPUs: s.Host.CPUs, Connect: p.Base.Str(param.Connect)}
		if nodeSums != nil {
			n.NodeSHA256 = nodeSums[i]
		}
		h := s.Host.Params
		n.Device, n.IBPort = h.Str(param.Device), max(int(h.Int(param.IBPort)), 0)
		if g := int(h.Int(param.GIDIndex)); g >= 0 {
			n.GIDIndex = &g
		}
		for _, pt := range pts {
			n.addPoint(pt, server[s.Name])
		}
		needs = append(needs, n)
	}
	return needs
}

// addPoint raises n to what point pt asks of it; server is the name of
// the role's server.
func (n *Need) addPoint(pt plan.Point, server string) {
	for _, rl := range pt.Hosts.Roles() {
		if rl.Name == server {
			n.DataAddress = rl.Host.DataAddress // resolved by Expand
		}
	}
	v := pt.Values
	n.MaxBlock = max(n.MaxBlock, v.Int(param.BlockSize))
	n.MaxRdAtomic = max(n.MaxRdAtomic, int(v.Int(param.MaxRdAtomic)))
	if qps := v.Int(param.QPs); qps > 0 {
		n.MaxPerQP = max(n.MaxPerQP, results.DepthPerQP(int(v.Int(param.QueueDepth)), int(qps)))
	}
	if n.Role != "server" {
		return
	}
	n.Create = v.Bool(param.Create)
	n.FileSize = max(n.FileSize, v.Int(param.FileSize))
	if v.Str(param.Registration) == "pinned" {
		n.Pinned = true
		n.PinnedMax = max(n.PinnedMax, results.PinnedAtOnce(v))
	}
	n.ODP = n.ODP || v.Str(param.Registration) == "odp"
	n.Cold = n.Cold || v.Str(param.Cache) == "cold"
	n.NVMeOFCold = n.NVMeOFCold || v.Str(param.Cache) == "cold" && v.Str(param.Workload) == peer.NVMeOF
}
