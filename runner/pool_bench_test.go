//go:build bench

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/testhosts"
)

// TestBenchPairwiseHosts runs a pairwise sweep over 16, 32 and 64
// namespace hosts (RDMASWEEP_BENCH_POOL_HOSTS, e.g. "16,32", chooses)
// and prints, side by side, the runner's per-round overhead and its peak
// RSS. A round's overhead is the time from its pairs' start to the next
// round's start, less its slowest pair's measured time: what the runner
// spends stopping one round and starting the next. The starts are the
// clients' first intervals in the time series, the measured times the
// rows' seconds. Peak RSS is the runner process's own (getrusage of the
// child, ru_maxrss). Each pair reads 1 MiB once, so a round is mostly
// overhead. The hosts, their sshd and every node run on this machine
// beside the runner, so the overhead includes their CPU: quote it with
// the load average and CPU count printed beside it.
func TestBenchPairwiseHosts(t *testing.T) {
	sizes := []int{16, 32, 64}
	if v := os.Getenv("RDMASWEEP_BENCH_POOL_HOSTS"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 2 {
				t.Fatalf("RDMASWEEP_BENCH_POOL_HOSTS=%q: want host counts like 16,32,64", v)
			}
			sizes = append(sizes, n)
		}
	}
	var table []string
	for _, n := range sizes {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			table = append(table, benchPool(t, n))
		})
	}
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("pairwise over tcp, 1 MiB per pair, verify on; %d CPUs, load average %s\n"+
		"| hosts | pairs | rounds | overhead per round, median | max | runner peak RSS | runner CPU | pool point | exec |\n"+
		"|---|---|---|---|---|---|---|---|---|\n%s",
		runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:3], " "), strings.Join(table, ""))
}

// benchPool runs the sweep over n hosts and returns its table row.
func benchPool(t *testing.T, n int) string {
	net := testhosts.Start(t, testhosts.Options{Hosts: hostNames(n), EmptyRootHome: true})
	dir := t.TempDir()
	plan, _ := poolPlan(t, net, dir, "bench-pool", "")
	cmd := exec.Command(filepath.Join(binDir, "runner"), "exec", plan)
	cmd.Dir, cmd.Env = dir, clitest.SSHEnv(t)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	runErr := cmd.Run()
	wall := time.Since(start)
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	rss := ru.Maxrss // KiB
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	var exit *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exit) {
		t.Fatalf("exec over %d hosts: %v\n%s", n, runErr, stderr.String())
	}
	rows := clitest.ReadRows(t, filepath.Join(dir, "out", "bench-pool.csv"))
	if len(rows) != n*(n-1) {
		t.Fatalf("%d rows, want %d\n%s", len(rows), n*(n-1), stderr.String())
	}
	slowest := map[int64]float64{} // round → its slowest pair's seconds
	round := map[string]int64{}    // a pair's point key → its round
	failed := map[string]int{}     // error → how many rows
	for _, r := range rows {
		if r.Round == nil {
			t.Fatalf("row %s → %s has no round", r.ServerHost, r.ClientHost)
		}
		round[r.PointKey] = *r.Round
		if r.Status != "ok" || r.Seconds == nil {
			failed[fmt.Sprintf("round %d, %s → %s: %s", *r.Round, r.ServerHost, r.ClientHost, r.Error)]++
			continue
		}
		slowest[*r.Round] = max(slowest[*r.Round], *r.Seconds)
	}
	if len(failed) > 0 {
		var lines []string
		for e := range failed {
			lines = append(lines, e)
		}
		slices.Sort(lines)
		t.Errorf("exec over %d hosts: %v; %d failed rows:\n%s", n, runErr, len(failed), strings.Join(lines[:min(len(lines), 20)], "\n"))
	}
	starts := roundStarts(t, dir, round)
	if len(starts) != len(slowest) {
		t.Fatalf("%d rounds in the time series, %d in the rows", len(starts), len(slowest))
	}
	var over []float64
	for k := 0; k+1 < len(starts); k++ {
		over = append(over, float64(starts[k+1]-starts[k])/1e9-slowest[int64(k+1)])
	}
	slices.Sort(over)
	point := "?"
	if i := strings.Index(stderr.String(), "the point r1: ok"); i >= 0 {
		line := stderr.String()[i:]
		if a, b := strings.LastIndex(line[:strings.Index(line, "\n")], "("), strings.Index(line, ")\n"); a >= 0 && b > a {
			point = line[a+1 : b]
		}
	}
	row := fmt.Sprintf("| %d | %d | %d | %.0f ms | %.0f ms | %.1f MiB | %.1f s | %s | %.1f s |\n", n, len(rows), len(slowest),
		1000*over[len(over)/2], 1000*over[len(over)-1], float64(rss)/1024, cpu.Seconds(), point, wall.Seconds())
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("load average %s: %s", strings.Join(strings.Fields(string(load))[:3], " "), row)
	return row
}

// roundStarts are the rounds' start times (ns), in order: the time
// series keys each pair's intervals by the pair's point key, which round
// gives the round of, and a round starts at its clients' earliest
// interval.
func roundStarts(t *testing.T, dir string, round map[string]int64) []int64 {
	files, _ := filepath.Glob(filepath.Join(dir, "out", "*.series.jsonl"))
	if len(files) != 1 {
		t.Fatalf("time series files: %v, want one", files)
	}
	f, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	first := map[int64]int64{} // round → its earliest interval
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct {
			PointKey    string `json:"point_key"`
			StartUnixNs int64  `json:"start_unix_ns"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s: %v", files[0], err)
		}
		n, ok := round[l.PointKey]
		if !ok {
			t.Fatalf("%s: interval of point %s, which no row has", files[0], l.PointKey)
		}
		if s, ok := first[n]; !ok || l.StartUnixNs < s {
			first[n] = l.StartUnixNs
		}
	}
	starts := make([]int64, len(first))
	for n, s := range first {
		if n < 1 || int(n) > len(starts) {
			t.Fatalf("round %d of %d in the time series", n, len(starts))
		}
		starts[n-1] = s
	}
	return starts
}
