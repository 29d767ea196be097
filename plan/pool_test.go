package plan

import (
	"slices"
	"testing"

	"rdmasweep/results/param"
)

// TestPool: hosts.pool as bare addresses and as mappings, its roles, and
// the keys of its pairs.
func TestPool(t *testing.T) {
	p, err := Load("testdata/good/pairwise.yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.IsPool() || len(p.Hosts.Pool) != 4 || len(p.Hosts.Servers)+len(p.Hosts.Clients) != 0 {
		t.Fatalf("pool %+v, servers %d, clients %d; want 4 pool hosts and no roles of their own", p.Hosts.Pool, len(p.Hosts.Servers), len(p.Hosts.Clients))
	}
	h3 := p.Hosts.Pool[2]
	if h3.Address != "n3" || h3.User != "alice" || h3.Params.Str(param.Device) != "mlx5_1" || p.Hosts.Pool[1].Params.Str(param.Device) != "" {
		t.Fatalf("pool host 3 %+v: want n3 as alice with its own rdma.device", h3)
	}
	var names []string
	for _, r := range p.Hosts.Roles() {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"pool1", "pool2", "pool3", "pool4"}) {
		t.Fatalf("roles %v", names)
	}
	if p.Base.Int(param.MaxParallel) != 2 || p.Base.Int(param.PairwiseParallel) != -1 {
		t.Fatalf("max_parallel %d, pairwise_parallel %d; want 2 and auto (-1)", p.Base.Int(param.MaxParallel), p.Base.Int(param.PairwiseParallel))
	}
	pts, err := Expand(p, ExpandOptions{})
	if err != nil || len(pts) != 1 {
		t.Fatalf("Expand: %d points, %v", len(pts), err)
	}
	pt := pts[0]
	keys := map[string]bool{pt.Key: true}
	for s := range 4 {
		for c := range 4 {
			if s == c {
				continue
			}
			q := pt.Pair(s, c)
			if q.Hosts.Server().Address != p.Hosts.Pool[s].Address || q.Hosts.Client().Address != p.Hosts.Pool[c].Address {
				t.Fatalf("Pair(%d, %d) hosts %+v", s, c, q.Hosts)
			}
			if q.Hosts.Server().DataAddress != q.Hosts.Server().Address {
				t.Fatalf("Pair(%d, %d): the server's data address is %q, want its address", s, c, q.Hosts.Server().DataAddress)
			}
			if keys[q.Key] {
				t.Fatalf("Pair(%d, %d) key %s is another pair's or the pool point's", s, c, q.Key)
			}
			keys[q.Key] = true
			if q.For("client").Str(param.Device) != p.Hosts.Pool[c].Params.Str(param.Device) {
				t.Fatalf("Pair(%d, %d): the client's device is not its pool host's", s, c)
			}
		}
	}
	r := pt.Round([][2]int{{0, 1}, {2, 3}})
	if r.Values.Str(param.Topology) != "pairs" || !r.Hosts.Several() || r.Clients() != 2 || r.Hosts.Servers[1].Address != "n3" || r.Hosts.Clients[1].Address != "n4" || keys[r.Key] {
		t.Fatalf("Round: topology %s, hosts %+v, key %s", r.Values.Str(param.Topology), r.Hosts, r.Key)
	}
	if pt.Values.Str(param.Topology) != "pairwise" {
		t.Fatal("Round changed the pool point's values")
	}
	if one := pt.Round([][2]int{{3, 0}}); one.Hosts.Several() {
		t.Fatal("a round of one pair has a barrier")
	}
	again, _ := Load("testdata/good/pairwise.yaml", Options{})
	pts2, _ := Expand(again, ExpandOptions{})
	if pts2[0].Pair(2, 3).Key != pt.Pair(2, 3).Key {
		t.Fatal("a pair's key changed between two loads of one plan")
	}
}

// TestPoolFromAllocation: under launcher: slurm, a pool plan without
// hosts takes the allocation's nodes.
func TestPoolFromAllocation(t *testing.T) {
	src := "name: r\nlauncher: slurm\ntopology: ring\nserver: {file: /tmp/x, file_size: 1MiB}\n"
	p, err := Parse("r.yaml", []byte(src), Options{Allocation: func() ([]string, error) { return []string{"c1", "c2", "c3"}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Hosts.Pool) != 3 || p.Hosts.Pool[2].Address != "c3" || len(p.Hosts.Servers) != 0 {
		t.Fatalf("hosts %+v, want the pool c1, c2, c3", p.Hosts)
	}
	_, err = Parse("r.yaml", []byte(src), Options{Allocation: func() ([]string, error) { return []string{"c1"}, nil }})
	if err == nil || err.Error() != "r.yaml:2:11: launcher: the allocation has 1 node; topology ring needs 2 or more: allocate with salloc -N2 or more, or name the hosts" {
		t.Fatalf("one node: %v", err)
	}
}
