//go:build bench

package main

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestBenchPoolSlowShell is TestPoolSixHosts' pairwise exec (six hosts,
// ten rounds of 1 s reads) on hosts whose ~/.bashrc takes 0.5 s, as a
// cluster account's that runs pyenv, conda or modules does: three execs,
// the first deploying node. It prints each one's wall beside the sum of
// its points' seconds, the goal (at most 0.5 × that sum + 5 s), the
// sessions each host's sshd started, and `uptime`'s load. It asserts
// nothing about speed.
//
//	go test -tags bench -run TestBenchPoolSlowShell -v ./runner/
func TestBenchPoolSlowShell(t *testing.T) {
	p := startPool(t)
	plan := p.plan(t, "slowshell", "{block_size: 64KiB, queue_depth: 4, duration: 1s, verify: true}", "")
	var table []string
	for i := range 3 {
		before := p.sessions(t)
		load := uptime()
		start := time.Now()
		rows, r := p.exec(t, plan, "slowshell")
		wall := time.Since(start)
		if r.Code != 0 {
			t.Fatalf("exec %d: exit %d\n%s", i+1, r.Code, r.Stderr)
		}
		var sum float64
		for _, row := range rows {
			if row.Seconds != nil {
				sum += *row.Seconds
			}
		}
		after := p.sessions(t)
		most, sftp := 0, 0
		for _, h := range poolHosts {
			most = max(most, after[h][0]-before[h][0])
			sftp += after[h][1] - before[h][1]
		}
		goal := 0.5*sum + 5
		table = append(table, fmt.Sprintf("| %d | %d | %.1f s | %.1f s | %.3f | %.1f s | %s | %d | %d | %s → %s |",
			i+1, len(rows), wall.Seconds(), sum, wall.Seconds()/sum, goal, holds(wall.Seconds() <= goal), most, sftp, load, uptime()))
	}
	fmt.Printf("BENCH pairwise, 6 hosts, 1 s reads, ~/.bashrc 0.5 s\n"+
		"BENCH | exec | rows | wall | points' seconds | wall / seconds | goal 0.5 × seconds + 5 s | | command sessions per host, most | sftp sessions, all hosts | load |\n"+
		"BENCH |---|---|---|---|---|---|---|---|---|---|\nBENCH %s\n", strings.Join(table, "\nBENCH "))
}

func holds(ok bool) string {
	if ok {
		return "holds"
	}
	return "misses"
}

// uptime is uptime's load averages.
func uptime() string {
	out, _ := exec.Command("uptime").Output()
	s := strings.TrimSpace(string(out))
	if i := strings.Index(s, "load average: "); i >= 0 {
		return s[i+len("load average: "):]
	}
	return s
}
