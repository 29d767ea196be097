package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"rdmasweep/results"
	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/testhosts"
)

// Faults of node itself: killed, never ready, a client that hangs. See faults_test.go for the table every fault joins and the
// harness it runs in.

// killNode is (a) and (b): kill -9 of node serve or node read mid-point.
func killNode(name, role string, failFast bool) fault {
	args, want := short("2s"), 2
	if failFast {
		args, want = append(args, "--fail-fast"), 1
	}
	return fault{
		name: name, sweep: twoPoints, args: args, tally: true, code: 1, wait: 60 * time.Second,
		inject: func(f *faultRun) {
			f.bothUp()
			h := f.host(role)
			h.Run(f, "kill", "-9", strconv.Itoa(f.pids[h]))
		},
		check: func(f *faultRun) {
			h, stderr := f.host(role), f.r.Stderr()
			rows := clitest.WholeCSV(f, f.csv)
			if len(rows) != want {
				f.Fatalf("%d rows, want %d\n%s", len(rows), want, stderr)
			}
			// The row blames the killed role, on one line that says how it died.
			got := rows[0]
			if got.Status != results.StatusFailed || !strings.HasPrefix(got.Error, hostLabel(role, h)+": ") ||
				!strings.Contains(got.Error, "killed by signal KILL") || strings.Contains(got.Error, "\n") || got.Bytes != nil {
				f.Fatalf("row of the hurt point: status %q error %q\n%s", got.Status, got.Error, stderr)
			}
			if !strings.Contains(stderr, "failed: "+got.Error) {
				f.Errorf("the failure is not shown on stderr:\n%s", stderr)
			}
			if failFast {
				if !strings.Contains(stderr, "--fail-fast") {
					f.Errorf("no word of --fail-fast:\n%s", stderr)
				}
			} else if rows[1].Status != results.StatusOK || rows[1].Bytes == nil {
				f.Errorf("the sweep did not go on to an ok point: %+v\n%s", rows[1], stderr)
			}
			// Each role's stderr is kept in its log, named for the point.
			logs, _ := filepath.Glob(filepath.Join(f.dir, "out/logs/*/001-*."+role+".log"))
			if len(logs) != 1 {
				f.Fatalf("logs of the hurt point's %s: %v", role, logs)
			}
			if log, _ := os.ReadFile(logs[0]); !bytes.HasPrefix(log, []byte("# "+hostLabel(role, h)+": ")) {
				f.Errorf("log %s:\n%s", logs[0], log)
			}
			f.noNodesLeft(5 * time.Second)
		},
	}
}

// neverReady is (j): a server that never becomes ready: its file is a
// FIFO that no one writes, so opening it blocks.
func neverReady() fault {
	const ready, grace = 2 * time.Second, 2 * time.Second
	fifo := testhosts.DeployDir + "/never-ready.fifo"
	return fault{
		name: "j_never_ready", sweep: onePoint, tally: true, code: 1, wait: 10 * time.Second,
		args: []string{"--set", "server.file=" + fifo, "--set", "server.create=false", "--set", "timeouts.ready=" + ready.String()},
		setup: func(f *faultRun) []string {
			f.a.Run(f, "mkfifo", fifo)
			f.Cleanup(func() { f.a.Output("rm", "-f", fifo) })
			return nil
		},
		inject: func(f *faultRun) {
			begun := procStarted(f.T, f.r.WaitNodes(f, f.a)[f.a])
			failed := f.r.WaitStderr(f, "failed: ", ready+3*grace+5*time.Second)
			if took := failed.Sub(begun); took < ready {
				f.Fatalf("failed after %v, before timeouts.ready %v\n%s", took, ready, f.r.Stderr())
			}
			f.Logf("never-ready point failed %v after it began (timeouts.ready %v)", failed.Sub(begun).Round(time.Millisecond), ready)
		},
		check: func(f *faultRun) {
			rows := clitest.WholeCSV(f, f.csv)
			if len(rows) != 1 || rows[0].Error != hostLabel("server", f.a)+": not ready within timeouts.ready ("+ready.String()+")" {
				f.Fatalf("rows: %+v", rows)
			}
			if left := clitest.WaitNoNodes(f, 0, f.a, f.b); len(left) > 0 {
				f.Fatalf("the server was not killed: %v", left)
			}
		},
	}
}

// clientHangs is (j): a client that hangs (stopped) mid-point.
func clientHangs() fault {
	const point, grace = 6 * time.Second, 2 * time.Second
	return fault{
		name: "j_client_hangs", sweep: onePoint, tally: true, code: 1, wait: 10 * time.Second,
		args: append(short("2s"), "--set", "timeouts.ready=3s", "--set", "timeouts.point="+point.String()),
		inject: func(f *faultRun) {
			f.pids = f.r.WaitNodes(f, f.a, f.b)
			f.b.Run(f, "kill", "-STOP", strconv.Itoa(f.pids[f.b]))
			stopped := time.Now()
			failed := f.r.WaitStderr(f, "failed: ", point+3*grace+5*time.Second)
			f.Logf("hung point failed %v after the client stopped (timeouts.point %v)", failed.Sub(stopped).Round(time.Millisecond), point)
		},
		check: func(f *faultRun) {
			rows := clitest.WholeCSV(f, f.csv)
			if len(rows) != 1 || rows[0].Error != "runner: point timed out (timeouts.point "+point.String()+")" {
				f.Fatalf("rows: %+v", rows)
			}
			if left := clitest.WaitNoNodes(f, 0, f.a, f.b); len(left) > 0 {
				f.Fatalf("nodes not killed: %v", left)
			}
		},
	}
}
