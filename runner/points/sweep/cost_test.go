package sweep

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"rdmasweep/plan"
	"rdmasweep/runner/files/resume"
)

// costOf is the cost of running every point of the plan text, every
// repetition.
func costOf(t *testing.T, text string) Cost {
	t.Helper()
	p, err := plan.Parse("cost.yaml", []byte(text), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pts, err := plan.Expand(p, plan.ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	todo, _ := resume.Pending(pts, p.Repeat, nil, true)
	c, err := CostOf(p, pts, todo)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCostOfAPlainSweep: each run reads its warmup and duration (steady
// at its warmup_max), a run that reads a total is counted apart, the
// runner's overhead is per run, and each cold server host's disk gets one
// ceiling, however many cold points it serves.
func TestCostOfAPlainSweep(t *testing.T) {
	c := costOf(t, `name: c
hosts:
  server: {address: local}
  client: {address: local}
transport: tcp
server: {file: /data/f.dat, file_size: 64MiB}
client: {duration: 3s, warmup: 1s}
repeat: 2
sweep:
  matrix: {cache: [warm, cold], block_size: [1MiB, 64KiB]}
timeouts: {ready: 30s, point: 1m}
`)
	want := Cost{Points: 4, Repeat: 2, Runs: 8, Reading: 8 * 4 * time.Second, Overhead: 8 * RunOverhead, Ceilings: 1, Worst: 8 * time.Minute}
	if c != want {
		t.Errorf("cost %+v, want %+v", c, want)
	}
	if got, wantEst := c.Estimate(), want.Reading+want.Overhead+CeilingAtMost; got != wantEst {
		t.Errorf("estimate %v, want %v", got, wantEst)
	}

	c = costOf(t, `name: c
hosts:
  server: {address: local}
  client: {address: local}
transport: tcp
server: {file: /data/f.dat, file_size: 64MiB, cache: warm}
client: {warmup: steady, warmup_max: 10s}
sweep:
  zip:
    duration: [0s, 2s]
    total: [64MiB, 0]
`)
	if c.Totals != 1 || c.Reading != 10*time.Second+(10*time.Second+2*time.Second) || c.Ceilings != 0 {
		t.Errorf("steady and total: %d runs read a total, reading %v, %d ceilings; want 1, 22s (steady at warmup_max) and 0", c.Totals, c.Reading, c.Ceilings)
	}
	if s := c.String(); !strings.Contains(s, "at least") || !strings.Contains(s, "1 run that read") {
		t.Errorf("a run that reads a total: %q does not say the estimate leaves it out", s)
	}
}

// TestCostOfAPool: a 64-host pairwise pool runs 126 rounds and 4,032
// links, each round reading for the point's duration with the runner's
// per-host overhead; a ring of 5 runs 3 rounds of 5 links; a cap on
// parallel pairs makes more rounds.
func TestCostOfAPool(t *testing.T) {
	pool := func(n int, rest string) string {
		var hosts []string
		for i := range n {
			hosts = append(hosts, fmt.Sprintf("n%d", i+1))
		}
		return fmt.Sprintf("name: p\nhosts:\n  pool: [%s]\nserver: {file: /data/f.dat, file_size: 64MiB, cache: warm}\nclient: {duration: 2s}\n%s", strings.Join(hosts, ", "), rest)
	}
	c := costOf(t, pool(64, "topology: pairwise\n"))
	if c.Pool != 64 || c.Rounds != 126 || c.Links != 4032 || c.Runs != 1 {
		t.Errorf("64 hosts pairwise: %d hosts, %d rounds, %d links, %d runs; want 64, 126, 4032, 1", c.Pool, c.Rounds, c.Links, c.Runs)
	}
	if want := 126 * 2 * time.Second; c.Reading != want {
		t.Errorf("64 hosts pairwise: reading %v, want %v", c.Reading, want)
	}
	if want := 126 * 64 * RoundOverheadPerHost; c.Overhead != want {
		t.Errorf("64 hosts pairwise: overhead %v, want %v (per round, per host)", c.Overhead, want)
	}
	if s := c.String(); !strings.Contains(s, "126 rounds, 4,032 links") {
		t.Errorf("64 hosts pairwise: %q", s)
	}
	if c := costOf(t, pool(5, "topology: ring\n")); c.Rounds != 3 || c.Links != 5 {
		t.Errorf("ring of 5: %d rounds, %d links; want 3, 5", c.Rounds, c.Links)
	}
	if c := costOf(t, pool(8, "topology: pairwise\npairwise_parallel: 2\n")); c.Rounds != 28 || c.Links != 56 {
		t.Errorf("8 hosts pairwise, 2 pairs at a time: %d rounds, %d links; want 28, 56", c.Rounds, c.Links)
	}
}

// TestCostOfASearch: a search's runs are its walks' bound, each at its
// outer point's reads, and the line says "at most".
func TestCostOfASearch(t *testing.T) {
	text := `name: s
hosts:
  server: {address: local}
  client: {address: local}
transport: tcp
server: {file: /data/f.dat, file_size: 64MiB, cache: warm}
client: {duration: 1s}
repeat: 3
search: {param: queue_depth, from: 1, to: 64, until: {metric: lat_p99_us, at_most: 500}}
sweep:
  matrix: {block_size: [4KiB, 64KiB]}
`
	p, err := plan.Parse("s.yaml", []byte(text), plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := costOf(t, text)
	if want := SearchRuns(p, 2); c.Runs != want || !c.AtMost || c.Reading != time.Duration(want)*time.Second {
		t.Errorf("search: %d runs (at most: %v), reading %v; want at most %d runs of 1s", c.Runs, c.AtMost, c.Reading, want)
	}
	if s := c.String(); !strings.HasPrefix(s, "at most ") {
		t.Errorf("search: %q does not say its runs are a bound", s)
	}
}

func TestHuman(t *testing.T) {
	for d, want := range map[time.Duration]string{
		700 * time.Millisecond:                "0.7s",
		18*time.Second + 240*time.Millisecond: "18.2s",
		5*time.Minute + 27*time.Second:        "5m27s",
		2*time.Hour + 42*time.Minute:          "2h42m",
		21 * time.Hour:                        "21h00m",
	} {
		if got := human(d); got != want {
			t.Errorf("human(%v) = %q, want %q", d, got, want)
		}
	}
}
