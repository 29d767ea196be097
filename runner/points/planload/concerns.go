package planload

import (
	"slices"
	"time"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/hosts/deploy"
	"rdmasweep/runner/points/peer"
)

// MinReads is the fewest reads a point should make for figures that are
// not mostly noise.
const MinReads = 1000

// Concerns are what a valid plan may still get wrong, as facts for the
// caller to word.
type Concerns struct {
	// FewReads counts the points that make fewer than MinReads reads;
	// Example is the first of them.
	FewReads int
	Example  plan.Point
	// Node is the one node of an rdma plan's build, which LacksRDMA
	// judges now; nil when the build has several, since which a host gets
	// depends on its architecture, known once the host is reached.
	Node *deploy.Node
	// InsecureKeys is ssh.host_key_policy insecure with a remote role.
	InsecureKeys bool
	// ShortPeer counts the peer points that read for a duration shorter
	// than peer.MinSteps of their tool's clock; ShortExample is the first,
	// ShortStep its tool's step.
	ShortPeer    int
	ShortExample plan.Point
	ShortStep    time.Duration
}

// Check finds the concerns of plan p and its points pts.
func Check(p *plan.Plan, pts []plan.Point) Concerns {
	var c Concerns
	for _, pt := range pts {
		if n := pt.ExpectedReads(); n > 0 && n < MinReads {
			if c.FewReads == 0 {
				c.Example = pt
			}
			c.FewReads++
		}
		d := pt.Values.Duration(param.Duration)
		if step, short := peer.TooShort(pt.Values.Str(param.Workload), d); d > 0 && short {
			if c.ShortPeer == 0 {
				c.ShortExample, c.ShortStep = pt, step
			}
			c.ShortPeer++
		}
	}
	if p.Transport() == results.TransportRDMA {
		if nodes, err := deploy.FindNodes(p.Node.Binary); err == nil && len(nodes) == 1 {
			c.Node = &nodes[0]
		}
	}
	c.InsecureKeys = p.SSH.HostKeyPolicy == "insecure" && slices.ContainsFunc(p.Hosts.Roles(), func(r plan.Role) bool { return !r.Host.IsLocal() })
	return c
}

// LacksRDMA reports whether node n was built without rdma, with the
// transports it was built with. It reads n's build information, so it
// also judges another architecture's node, which cannot run here; a node
// whose build information cannot be read is not judged.
func LacksRDMA(n deploy.Node) (built []string, lacks bool) {
	built, err := deploy.Transports(n.Path)
	if err != nil || slices.Contains(built, results.TransportRDMA) {
		return built, false
	}
	return built, true
}
