package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/testbed/clitest"
)

// Faults of the runner: a signal, SIGKILL; and what they leave on the hosts. See faults_test.go for the table every fault joins and the
// harness it runs in.

// signalled is (e): SIGINT or SIGTERM to the runner mid-point, after a
// first row.
func signalled(sig syscall.Signal) fault {
	name := map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM"}[sig]
	return fault{
		name: "e_" + name, sweep: "{zip: {block_size: [1MiB, 256KiB], duration: [0s, 20s]}}", tally: true,
		code: 128 + int(sig), wait: 20 * time.Second,
		inject: func(f *faultRun) {
			f.r.WaitRows(f, f.csv, 1)
			f.bothUp()
			f.r.Signal(sig)
			f.at = time.Now()
		},
		check: func(f *faultRun) {
			left := clitest.WaitNoNodes(f, 5*time.Second-time.Since(f.at), f.a, f.b)
			f.Logf("runner and nodes gone %v after %s", time.Since(f.at).Round(time.Millisecond), name)
			if len(left) > 0 {
				f.Fatalf("nodes outlived the runner by 5 s: %v", left)
			}
			rows := clitest.WholeCSV(f, f.csv)
			if len(rows) != 1 || rows[0].Status != results.StatusOK {
				f.Fatalf("rows: %+v", rows)
			}
			if !strings.Contains(f.r.Stderr(), "runner: error: interrupted by "+name) {
				f.Errorf("stderr:\n%s", f.r.Stderr())
			}
		},
	}
}

// runnerKilled is (f): kill -9 of the runner mid-point, then exec again at
// once.
func runnerKilled() fault {
	return fault{
		name: "f_runner_killed", sweep: "{zip: {block_size: [1MiB, 256KiB, 64KiB], duration: [0s, 3s, 0s]}}", tally: true,
		code: -1, wait: 10 * time.Second,
		inject: func(f *faultRun) {
			f.r.WaitRows(f, f.csv, 1)
			f.bothUp()
			f.r.Kill()
		},
		check: func(f *faultRun) {
			again := runnerEnv(f.T, f.dir, f.env, "exec", f.plan)
			if again.Code != 0 || !strings.Contains(again.Stderr, "skipping 1 run already ok") {
				f.Fatalf("exec after the kill: exit %d\n%s", again.Code, again.Stderr)
			}
			old := fmt.Sprintf("pid %d on a, pid %d on b", f.pids[f.a], f.pids[f.b])
			if strings.Contains(again.Stderr, "killed leftover") {
				f.Logf("old nodes (%s) were killed from the state file", old)
			} else {
				f.Logf("old nodes (%s) had exited on stdin EOF", old)
			}
			rows := clitest.WholeCSV(f, f.csv)
			okTimes := map[string]int{}
			for _, row := range rows {
				if row.Status != results.StatusOK {
					f.Errorf("row not ok: %+v", row)
				}
				okTimes[row.PointKey]++
			}
			if len(rows) != 3 || len(okTimes) != 3 {
				f.Fatalf("want each of 3 points ok exactly once, got %v", okTimes)
			}
			f.noNodesLeft(0)
			if _, err := os.Stat(f.csv + ".state"); !os.IsNotExist(err) {
				f.Fatalf("state file left: %v", err)
			}
		},
	}
}

// procStarted is when pid began, from /proc (to the clock tick).
func procStarted(t *testing.T, pid int) time.Time {
	t.Helper()
	const ticksPerSecond = 100 // USER_HZ: fixed at 100 in the Linux ABI
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	uptime, err := os.ReadFile("/proc/uptime")
	now := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the parenthesised command; starttime is field 22.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	ticks, err := strconv.ParseInt(fields[22-3], 10, 64)
	if err != nil {
		t.Fatalf("starttime of %d: %v", pid, err)
	}
	up, err := strconv.ParseFloat(strings.Fields(string(uptime))[0], 64)
	if err != nil {
		t.Fatalf("/proc/uptime: %v", err)
	}
	age := time.Duration(up*float64(time.Second)) - time.Duration(ticks)*time.Second/ticksPerSecond
	return now.Add(-age)
}

func procStrings(t *testing.T, pid int, file string) []string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
}

// parentPid reads field 4 of /proc/PID/stat.
func parentPid(t *testing.T, pid int) int {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}
