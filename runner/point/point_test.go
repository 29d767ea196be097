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
	"rdmasweep/runner/remote"
	"rdmasweep/runner/role"
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
	r := &Runner{
		Plan: p, RunID: "t", LogDir: dir,
		Server:  role.Target{Role: "server", Host: remote.Local{}, Label: "server (local)", NodePath: node},
		Client:  role.Target{Role: "client", Host: remote.Local{}, Label: "client (local)", NodePath: node},
		Started: rec.started, Exited: rec.exited,
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
		row, tm, err := r.Run(context.Background(), pt, 1)
		if err != nil || row.Status != results.StatusOK {
			t.Fatalf("point %v: %v %s", pt.Swept, err, row.Error)
		}
		if row.ParamInt("block_size") != pt.Values.Int("block_size") || row.Transport() != "tcp" || row.Param("registration") != "" ||
			*row.Bytes != 1<<20 || !*row.Verified || row.CachedFraction == nil || tm.Measured <= 0 || tm.Wall < tm.Measured {
			t.Errorf("row %+v timing %+v", row, tm)
		}
	}
	if l := rec.leftover(); l != "" {
		t.Errorf("nodes recorded as started and never as exited: %s", l)
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
	row, _, err := r.Run(context.Background(), pts[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	if row.Status != results.StatusFailed || !strings.HasPrefix(row.Error, "server (local): ") || !strings.Contains(row.Error, "missing.dat") {
		t.Fatalf("row error %q", row.Error)
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
