package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"rdmasweep/internal/stat"
	"rdmasweep/results"
	"rdmasweep/runner/files/csvfile"
	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/testhosts"
)

// kneeTarget is the search's p99 bound in µs. Through the shaped link a
// 16KiB read takes about 1.3 ms on the wire, and tbf queues what the
// reads in flight ask for beyond the rate, so p99 grows with queue depth,
// faster than the depth itself once the queue fills: measured here, the
// median p99 was 6 ms at depth 1, 8 ms at 2, 27 ms at 3 and 63 ms at 4.
// 20 ms leaves depth 1 well inside and the knee near 2 or 3.
const kneeTarget = 20000

// TestSearchShapedLink is issue 20's "search on tcp through a link shaped
// by tbf": a plan searching queue_depth for the deepest queue whose
// median p99 stays under kneeTarget, between two namespace hosts with the
// server's link shaped to 100 Mbit/s. The knee's rows meet the target,
// the probe one above fails it (unless the knee is `to`), and summary's
// json names the same knee.
func TestSearchShapedLink(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}})
	dir, env := t.TempDir(), clitest.SSHEnv(t)
	a, b := n.Hosts["a"], n.Hosts["b"]
	text := fmt.Sprintf(`name: knee
hosts:
  server: {address: %s, user: %s, identity_file: %s}
  client: {address: %s, user: %s, identity_file: %s}
ssh: {known_hosts: %s, host_key_policy: strict, connect_timeout: 5s}
node: {binary: %s, remote_path: %s/bin/node}
transport: tcp
server: {file: %s/knee.dat, file_size: 16MiB, create: true, cache: warm, port: 18517}
client: {block_size: 16KiB, duration: 500ms}
repeat: 3
search:
  param: queue_depth
  from: 1
  to: 32
  until: {metric: lat_p99_us, at_most: %d}
timeouts: {ready: 1m, accept: 1m, point: 3m}
output: {csv: out/knee.csv, logs: out/logs}
`, a.Addr, n.User, n.KeyFile, b.Addr, n.User, n.KeyFile, n.KnownHosts, filepath.Join(binDir, "node"), testhosts.DeployDir, testhosts.DeployDir, kneeTarget)
	plan := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(plan, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	tc := func(args ...string) {
		t.Helper()
		out, err := exec.Command("ip", append([]string{"netns", "exec", a.NS, "tc", "qdisc"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tc qdisc %v: %v\n%s", args, err, out)
		}
	}
	// A queue of 400 ms holds what 32 reads of 16KiB in flight ask for
	// (512KiB, 42 ms at the rate): tbf delays them, it does not drop them.
	tc("add", "dev", "eth0", "root", "tbf", "rate", "100mbit", "burst", "32kb", "latency", "400ms")
	defer tc("del", "dev", "eth0", "root")

	r := clitest.Run(t, filepath.Join(binDir, "runner"), dir, env, 10*time.Minute, "exec", plan)
	t.Logf("runner exec:\n%s%s", r.Stdout, r.Stderr)
	if r.Code != 0 {
		t.Fatalf("exec: exit %d", r.Code)
	}
	rows, err := csvfile.Read(filepath.Join(dir, "out/knee.csv"))
	if err != nil {
		t.Fatal(err)
	}
	p99 := map[int64][]float64{}
	knee := int64(0)
	for _, r := range rows {
		qd := r.ParamInt("queue_depth")
		if r.LatP99Us != nil {
			p99[qd] = append(p99[qd], *r.LatP99Us)
		}
		switch r.Search {
		case results.SearchKnee:
			knee = qd
		case results.SearchProbe:
		default:
			t.Errorf("queue_depth=%d r%d: search %q, want probe or knee", qd, r.Repetition, r.Search)
		}
	}
	for qd, xs := range p99 {
		t.Logf("queue_depth=%d: median p99 %.0f us of %v", qd, stat.Median(xs), xs)
	}
	if knee == 0 {
		t.Fatalf("no row marked knee; p99 at queue_depth=1 is %v, target %d us", p99[1], kneeTarget)
	}
	if m := stat.Median(p99[knee]); m > kneeTarget {
		t.Errorf("knee queue_depth=%d: median p99 %.0f us, over the target %d", knee, m, kneeTarget)
	}
	if knee < 32 {
		above, ok := p99[knee+1]
		if !ok {
			t.Errorf("knee queue_depth=%d: queue_depth=%d was not probed", knee, knee+1)
		} else if m := stat.Median(above); m <= kneeTarget {
			t.Errorf("queue_depth=%d above the knee: median p99 %.0f us meets the target %d", knee+1, m, kneeTarget)
		}
	}

	s := runner(t, dir, "summary", "--format", "json", "out/knee.csv")
	if s.Code != 0 {
		t.Fatalf("summary --format json: exit %d\n%s", s.Code, s.Stderr)
	}
	var got struct {
		Knees []struct {
			Param string `json:"param"`
			Knee  *int64 `json:"knee"`
		} `json:"knees"`
	}
	if err := json.Unmarshal([]byte(s.Stdout), &got); err != nil {
		t.Fatalf("summary json: %v\n%s", err, s.Stdout)
	}
	if len(got.Knees) != 1 || got.Knees[0].Param != "queue_depth" || got.Knees[0].Knee == nil || *got.Knees[0].Knee != knee {
		t.Errorf("summary json = %s; want one knee, queue_depth %d", s.Stdout, knee)
	}
}
