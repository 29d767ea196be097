package point

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
)

// The point runner in process, on this machine with the real node, so the
// race detector sees its goroutines: the roles' forwarding and the loop.

func buildNode(t *testing.T) string {
	t.Helper()
	node := filepath.Join(t.TempDir(), "node")
	cmd := exec.Command("go", "build", "-o", node, "rdmasweep/node")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build node: %v\n%s", err, out)
	}
	return node
}

func localRunner(t *testing.T, text string) (*Runner, []plan.Point, *recorder) {
	t.Helper()
	node := buildNode(t)
	dir := t.TempDir()
	p, err := plan.Parse("t.yaml", []byte(fmt.Sprintf(text, dir)), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pts, err := plan.Expand(p, plan.ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	r := &Runner{Plan: p, RunID: "t", LogDir: dir, Started: rec.started, Exited: rec.exited}
	for _, rl := range p.Hosts.Roles() {
		r.Targets = append(r.Targets, role.Target{Role: rl.Name, Host: remote.Local{}, Label: rl.Name + " (local)", NodePath: node})
	}
	return r, pts, rec
}

// recorder is the leftover record's view: started minus exited.
type recorder struct {
	mu   sync.Mutex
	live map[string]int
}

func (r *recorder) started(t role.Target, st *results.Started) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live == nil {
		r.live = map[string]int{}
	}
	r.live[t.Role]++
}

func (r *recorder) exited(t role.Target, st *results.Started) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live[t.Role]--
}

func (r *recorder) leftover() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []string
	for k, n := range r.live {
		if n != 0 {
			s = append(s, fmt.Sprintf("%s:%d", k, n))
		}
	}
	return strings.Join(s, " ")
}

func TestRunMakesRowsFromTheRoles(t *testing.T) {
	r, pts, rec := localRunner(t, `name: t
hosts: {server: {address: local}, client: {address: local}}
server: {file: %s/f.dat, file_size: 1MiB, create: true, cache: warm}
client: {queue_depth: 4, verify: true}
sweep: {zip: {block_size: [64KiB, 4KiB]}}
timeouts: {ready: 20s, accept: 20s, point: 60s}
`)
	for _, pt := range pts {
		rows, tm, err := r.Run(context.Background(), pt, 1)
		if err != nil || len(rows) != 1 || rows[0].Status != results.StatusOK {
			t.Fatalf("point %v: %v %+v", pt.Swept, err, rows)
		}
		row := rows[0]
		if row.ParamInt("block_size") != pt.Values.Int(param.BlockSize) || row.Transport() != "tcp" || row.Param("registration") != "" ||
			*row.Bytes != 1<<20 || !*row.Verified || row.CachedFraction == nil || tm.Measured <= 0 || tm.Wall < tm.Measured {
			t.Errorf("row %+v timing %+v", row, tm)
		}
	}
	if l := rec.leftover(); l != "" {
		t.Errorf("nodes recorded as started and never as exited: %s", l)
	}
	// The logs hold the roles' command lines: their user's alone.
	logs, _ := filepath.Glob(filepath.Join(r.LogDir, "*.log"))
	if len(logs) < 2*len(pts) {
		t.Fatalf("%d logs for %d points of two roles: %q", len(logs), len(pts), logs)
	}
	for _, l := range logs {
		if st, err := os.Stat(l); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", l, st.Mode().Perm(), err)
		}
	}
}

// A server that fails before ready fails the point under its own name; the
// client is never started.
func TestRunBlamesTheFailingRole(t *testing.T) {
	r, pts, rec := localRunner(t, `name: t
hosts: {server: {address: local}, client: {address: local}}
server: {file: %s/missing.dat, file_size: 1MiB}
timeouts: {ready: 20s, accept: 20s, point: 60s}
`)
	rows, _, err := r.Run(context.Background(), pts[0], 1)
	if err != nil || len(rows) != 1 {
		t.Fatal(err, rows)
	}
	if row := rows[0]; row.Status != results.StatusFailed || !strings.HasPrefix(row.Error, "server (local): ") || !strings.Contains(row.Error, "missing.dat") {
		t.Fatalf("row error %q", rows[0].Error)
	}
	if l := rec.leftover(); l != "" {
		t.Errorf("nodes left: %s", l)
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	r, pts, rec := localRunner(t, `name: t
hosts: {server: {address: local}, client: {address: local}}
server: {file: %s/f.dat, file_size: 1MiB, create: true, cache: warm}
client: {duration: 1m, block_size: 4KiB}
timeouts: {ready: 20s, accept: 20s, point: 2m}
`)
	ctx, cancel := context.WithCancel(context.Background())
	r.Started = func(t role.Target, st *results.Started) {
		rec.started(t, st)
		if t.Role == "client" {
			cancel()
		}
	}
	if _, _, err := r.Run(ctx, pts[0], 1); err != ErrInterrupted {
		t.Fatalf("Run after cancel: %v, want ErrInterrupted", err)
	}
	if l := rec.leftover(); l != "" {
		t.Errorf("nodes left: %s", l)
	}
}

// cancelOnStart is the local host, whose Start is interrupted: the
// signal arrives while it waits for the process to start (over SSH, for
// its pid line), so ctx ends and Start fails with ctx's error.
type cancelOnStart struct {
	remote.Local
	cancel context.CancelFunc
}

func (h cancelOnStart) Start(ctx context.Context, argv []string) (remote.Process, error) {
	h.cancel()
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestRunInterruptedDuringStart: a point whose client's start is cut
// short by the interruption is interrupted, with no row, not a failed
// point with a "start node: context canceled" row.
func TestRunInterruptedDuringStart(t *testing.T) {
	r, pts, rec := localRunner(t, `name: t
hosts: {server: {address: local}, client: {address: local}}
server: {file: %s/f.dat, file_size: 1MiB, create: true, cache: warm}
client: {duration: 1m, block_size: 4KiB}
timeouts: {ready: 20s, accept: 20s, point: 2m}
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i, tg := range r.Targets {
		if tg.Role == "client" {
			r.Targets[i].Host = cancelOnStart{cancel: cancel}
		}
	}
	if rows, _, err := r.Run(ctx, pts[0], 1); err != ErrInterrupted || len(rows) != 0 {
		t.Fatalf("Run with its client's start interrupted: %d rows, %v; want none, ErrInterrupted", len(rows), err)
	}
	if l := rec.leftover(); l != "" {
		t.Errorf("nodes left: %s", l)
	}
}

func TestStages(t *testing.T) {
	roles := []Role{
		{Target: role.Target{Role: "c1"}, WaitsFor: []string{"s"}},
		{Target: role.Target{Role: "s"}},
		{Target: role.Target{Role: "c2"}, WaitsFor: []string{"s"}},
	}
	if got := fmt.Sprint(stages(roles)); got != "[[1] [0 2]]" {
		t.Errorf("stages %s", got)
	}
}

// Fan-in in process: three clients on this machine read one server at
// once after the start barrier; three client rows, then the aggregate.
func TestRunFanIn(t *testing.T) {
	r, pts, rec := localRunner(t, `name: t
hosts:
  server: {address: local}
  client: [{address: local}, {address: local}, {address: local}]
server: {file: %s/f.dat, file_size: 4MiB, create: true, cache: warm}
client: {block_size: 64KiB, queue_depth: 4, duration: 1s, verify: true}
sweep: {matrix: {clients: [1, 3]}}
timeouts: {ready: 20s, accept: 20s, point: 60s}
`)
	var series []string
	var mu sync.Mutex
	r.Series = func(pt plan.Point, rep int, tg role.Target, iv *results.Interval) {
		mu.Lock()
		series = append(series, tg.Role)
		mu.Unlock()
	}
	for _, pt := range pts {
		rows, _, err := r.Run(context.Background(), pt, 1)
		if err != nil {
			t.Fatal(err)
		}
		k := pt.Clients()
		if len(rows) != k+1 {
			t.Fatalf("%d clients: %d rows, want a row per client and the aggregate", k, len(rows))
		}
		var sum float64
		shortest := 1e9
		for i, row := range rows {
			if row.Status != results.StatusOK || row.Param("clients") != fmt.Sprint(k) {
				t.Fatalf("row %d: %+v", i, row)
			}
			if i < k {
				if row.Scope != results.ScopeClient || !*row.Verified {
					t.Errorf("client row %d: scope %q", i, row.Scope)
				}
				sum += *row.BandwidthMBs
				shortest = min(shortest, *row.Seconds)
				continue
			}
			if row.Scope != results.ScopeAggregate || row.StartSkewS == nil || *row.StartSkewS < 0 || *row.StartSkewS > 0.5 {
				t.Errorf("aggregate row: scope %q, skew %v", row.Scope, row.StartSkewS)
			}
			// In their common window the clients read at about their
			// rates added up; never more than 1.2 × that.
			if bw := *row.BandwidthMBs; bw <= 0 || bw > 1.2*sum || *row.Seconds > shortest*(1+1e-9) || *row.Seconds < 0.5 || *row.LatP99Us < *row.LatP50Us {
				t.Errorf("aggregate %.1f MB/s over %.3f s, the clients' sum %.1f", bw, *row.Seconds, sum)
			}
		}
	}
	if l := rec.leftover(); l != "" {
		t.Errorf("nodes left: %s", l)
	}
	if len(series) < 30 {
		t.Errorf("%d intervals reported; want about 10 per client per point", len(series))
	}
}

func TestAggregate(t *testing.T) {
	const s = int64(1e9)
	mk := func(start int64, secs float64, perInterval ...int64) *Report {
		h := &results.Histogram{}
		var ivs []*results.Interval
		var reads int64
		for i, n := range perInterval {
			ivs = append(ivs, &results.Interval{StartUnixNs: start + int64(i)*s, Seconds: 1, Reads: n, Bytes: n * 10})
			reads += n
			for range n {
				h.Record(1000)
			}
		}
		return &Report{Result: &results.Result{StartUnixNs: start, Seconds: secs, Reads: reads, Bytes: reads * 10, Histogram: h, Verified: true}, Intervals: ivs}
	}
	// Two clients, 4 s each, the second starting 1 s later: the window is
	// 3 s (from 1001 s to 1004 s), holding intervals 1-3 of the first and
	// 0-2 of the second.
	a, b := mk(1000*s, 4, 1, 2, 3, 4), mk(1001*s, 4, 10, 20, 30, 40)
	var row results.Row
	if err := aggregate(&row, []*Report{a, b}); err != nil {
		t.Fatal(err)
	}
	if *row.Seconds != 3 || *row.StartSkewS != 1 || *row.Bytes != (2+3+4+10+20+30)*10 || *row.IOPS != (2+3+4+10+20+30)/3.0 {
		t.Fatalf("window %v s, skew %v, bytes %v, iops %v", *row.Seconds, *row.StartSkewS, *row.Bytes, *row.IOPS)
	}
	c := mk(1010*s, 1, 5)
	if err := aggregate(&row, []*Report{a, c}); err == nil || !strings.Contains(err.Error(), "do not overlap") {
		t.Fatalf("disjoint phases: %v", err)
	}
}

// TestAggregateOpenLoop: the aggregate's response latency is the clients'
// response histograms merged, and it is saturated when any client was.
func TestAggregateOpenLoop(t *testing.T) {
	mk := func(start int64, respNs uint64, n int, saturated bool) *Report {
		h, resp := &results.Histogram{}, &results.Histogram{}
		for range n {
			h.Record(1000)
			resp.Record(respNs)
		}
		ol := &results.OpenLoop{Saturated: saturated}
		ol.SetResponse(resp)
		return &Report{Result: &results.Result{StartUnixNs: start, Seconds: 1, Reads: int64(n), Bytes: int64(n), Histogram: h, OpenLoop: ol}}
	}
	// 98 fast responses and 2 of 100 ms: p99 lands among the slow.
	a, b := mk(1e9, 2000, 49, false), mk(1e9, 100e6, 2, true)
	var row results.Row
	if err := aggregate(&row, []*Report{a, mk(1e9, 2000, 49, false), b}); err != nil {
		t.Fatal(err)
	}
	if row.RespP99Us == nil || *row.RespP99Us < 90000 || *row.RespP50Us > 10 || row.Saturated == nil || !*row.Saturated {
		t.Fatalf("aggregate response p50 %v p99 %v saturated %v: want the slow reads in p99, and saturated", row.RespP50Us, row.RespP99Us, row.Saturated)
	}
	row = results.Row{}
	closed := &Report{Result: &results.Result{StartUnixNs: 1e9, Seconds: 1, Reads: 1, Bytes: 1, Histogram: &results.Histogram{}}}
	if err := aggregate(&row, []*Report{a, closed}); err != nil || row.RespP99Us != nil || row.Saturated != nil {
		t.Fatalf("a closed-loop client in the point: %v, response %v, saturated %v: want them empty", err, row.RespP99Us, row.Saturated)
	}
}
