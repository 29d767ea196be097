package rounds

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
	"rdmasweep/runner/points/point"
	"rdmasweep/runner/reading/fleet"
)

// named is this machine under another name, so a pool of them gives rows
// that tell the hosts apart.
type named struct {
	remote.Local
	name string
}

func (n named) Name() string { return n.name }

// dead is a host whose connection is gone: nothing starts on it.
type dead struct{ named }

func (d dead) Start(ctx context.Context, argv []string) (remote.Process, error) {
	return nil, fmt.Errorf("new session: %w", remote.ErrConnectionLost)
}

// live counts the node processes started and not yet seen to exit.
type live struct {
	mu sync.Mutex
	n  int
}

func (l *live) started(role.Target, *results.Started) { l.mu.Lock(); l.n++; l.mu.Unlock() }
func (l *live) exited(role.Target, *results.Started)  { l.mu.Lock(); l.n--; l.mu.Unlock() }

const poolPlan = `name: pool
topology: %s
hosts:
  pool:
    - {address: h1, data_address: 127.0.0.1}
    - {address: h2, data_address: 127.0.0.1}
    - {address: h3, data_address: 127.0.0.1}
    - {address: h4, data_address: 127.0.0.1}
server: {file: %s/x.dat, file_size: 4MiB, create: true, cache: warm}
client: {block_size: 64KiB, total: 8MiB, verify: true}
`

// setup loads a pool plan of four local hosts and makes the file once
// (every host is this machine, so the round's servers share it).
func setup(t *testing.T, topology string, hosts func(i int, name string) remote.Host) (*Runner, plan.Point, *live) {
	t.Helper()
	dir := t.TempDir()
	node := filepath.Join(dir, "node")
	cmd := exec.Command("go", "build", "-o", node, "rdmasweep/node")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build node: %v\n%s", err, out)
	}
	p, err := plan.Parse("pool.yaml", []byte(fmt.Sprintf(poolPlan, topology, dir)), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pts, err := plan.Expand(p, plan.ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lv := &live{}
	r := &Runner{Points: &point.Runner{Plan: p, RunID: "t", LogDir: dir, Started: lv.started, Exited: lv.exited}}
	for i, h := range p.Hosts.Pool {
		r.Hosts = append(r.Hosts, role.Target{Host: hosts(i, h.Address), NodePath: node})
	}
	first := &Runner{Points: r.Points, Hosts: []role.Target{{Host: named{name: "h1"}, NodePath: node}, {Host: named{name: "h2"}, NodePath: node}}}
	if _, _, err := first.run(context.Background(), pts[0], 1, []fleet.Pair{{Server: 0, Client: 1}}); err != nil {
		t.Fatal(err)
	}
	return r, pts[0], lv
}

func collect(t *testing.T, r *Runner, pt plan.Point) []results.Row {
	t.Helper()
	var rows []results.Row
	if err := r.Run(context.Background(), pt, 1, func(row results.Row) error { rows = append(rows, row); return nil }); err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestPairwiseRounds(t *testing.T) {
	r, pt, lv := setup(t, "pairwise", func(i int, name string) remote.Host { return named{name: name} })
	rows := collect(t, r, pt)
	if len(rows) != 12 {
		t.Fatalf("%d rows, want one per ordered pair of 4 hosts, 12", len(rows))
	}
	seen := map[[2]string]bool{}
	busy := map[[2]any]bool{} // (round, host)
	keys := map[string]bool{}
	for _, row := range rows {
		if row.Status != results.StatusOK || row.Verified == nil || !*row.Verified {
			t.Fatalf("row %s → %s: %s %q, verified %v", row.ServerHost, row.ClientHost, row.Status, row.Error, row.Verified)
		}
		pair := [2]string{row.ServerHost, row.ClientHost}
		if seen[pair] || row.ServerHost == row.ClientHost {
			t.Fatalf("pair %v twice, or with itself", pair)
		}
		seen[pair] = true
		for _, h := range pair {
			k := [2]any{*row.Round, h}
			if busy[k] {
				t.Fatalf("host %s twice in round %d", h, *row.Round)
			}
			busy[k] = true
		}
		if *row.Round < 1 || *row.Round > 6 {
			t.Fatalf("round %d, want 1..6 (2(N−1) rounds of N/2 pairs)", *row.Round)
		}
		if keys[row.PointKey] {
			t.Fatalf("key %s twice: a pair's rows need their own key", row.PointKey)
		}
		keys[row.PointKey] = true
		if row.Param("clients") != "2" {
			t.Fatalf("clients %q, want 2: the pairs of a round read at once", row.Param("clients"))
		}
	}
	if lv.n != 0 {
		t.Fatalf("%d node processes not seen to exit", lv.n)
	}
	j := fleet.FromRows(rows, fleet.JudgeOptions{})
	if len(j) != 1 || len(j[0].Links) != 12 || len(j[0].Unreachable) != 0 {
		t.Fatalf("judgment %+v", j)
	}
}

// A host lost before the sweep and one that fails every start: their
// pairs get failed rows with the reason, the others are measured, and the
// judgment names both unreachable.
func TestDeadHosts(t *testing.T) {
	r, pt, lv := setup(t, "pairwise", func(i int, name string) remote.Host {
		if name == "h4" {
			return dead{named{name: name}}
		}
		return named{name: name}
	})
	r.Hosts[2].Host = nil
	r.Down = map[int]error{2: fmt.Errorf("connect: dial tcp 198.18.18.3:22: connect: connection refused")}
	rows := collect(t, r, pt)
	if len(rows) != 12 {
		t.Fatalf("%d rows, want 12", len(rows))
	}
	ok := 0
	for _, row := range rows {
		withDead := row.ServerHost == "h3" || row.ClientHost == "h3" || row.ServerHost == "h4" || row.ClientHost == "h4"
		switch {
		case withDead && row.Status == results.StatusOK:
			t.Fatalf("%s → %s is ok with a dead host", row.ServerHost, row.ClientHost)
		case !withDead && row.Status != results.StatusOK:
			t.Fatalf("%s → %s failed: %s; the live pairs must be measured", row.ServerHost, row.ClientHost, row.Error)
		case !withDead:
			ok++
		}
		if withDead {
			t.Logf("round %d, %s → %s: %s", *row.Round, row.ServerHost, row.ClientHost, row.Error)
		}
		if withDead && row.Error == "" {
			t.Fatalf("%s → %s failed without a reason", row.ServerHost, row.ClientHost)
		}
	}
	if ok != 2 {
		t.Fatalf("%d ok rows, want h1 → h2 and h2 → h1", ok)
	}
	if lv.n != 0 {
		t.Fatalf("%d node processes not seen to exit", lv.n)
	}
	j := fleet.FromRows(rows, fleet.JudgeOptions{})[0]
	var names []string
	for _, u := range j.Unreachable {
		names = append(names, u.Host)
	}
	if fmt.Sprint(names) != "[h3 h4]" {
		t.Fatalf("unreachable %v, want [h3 h4]; rows:\n%v", names, rows)
	}
}

func TestRingRounds(t *testing.T) {
	r, pt, _ := setup(t, "ring", func(i int, name string) remote.Host { return named{name: name} })
	rows := collect(t, r, pt)
	want := map[string]string{"h1": "h2", "h2": "h3", "h3": "h4", "h4": "h1"} // client reads server
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rows))
	}
	for _, row := range rows {
		if row.Status != results.StatusOK || want[row.ClientHost] != row.ServerHost || *row.Round > 2 {
			t.Fatalf("row %s reads %s in round %d: %s %s", row.ClientHost, row.ServerHost, *row.Round, row.Status, row.Error)
		}
	}
}
