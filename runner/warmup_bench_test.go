//go:build bench

package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"rdmasweep/testbed/clitest"
	"rdmasweep/testbed/testhosts"
)

// TestBenchWarmupSteppedLink is TestWarmupSteadyCapped on
// a real link that never settles: a tcp point between two namespace
// hosts while the test steps the server's link rate down by 6 % every
// 100 ms (tbf, from 120 down to 10 mbit in 4 s, then back up), and the
// warmup ends at its 3 s cap. It holds on an idle machine; at load 15
// to 27 it failed 1 or 2 runs in 5 whatever the stepping (the machine,
// not the link, then sets the bandwidth at some steps, and five alike
// are steady), so it is a benchmark, and prints the load.
//
// The stepping keeps its pace under load: one tc, in the namespace,
// takes each change as a line on its stdin (tc -batch), and it and the
// thread that feeds it run at nice -15, the thread sleeping in the
// kernel, not on Go's timers (a fork of ip netns exec and tc per
// change, or a feeder on Go's ticker, held a rate up to 523 ms, longer
// than node's five 100 ms steps). The longest hold is logged.
func TestBenchWarmupSteppedLink(t *testing.T) {
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a", "b"}})
	dir, env := t.TempDir(), clitest.SSHEnv(t)
	a := n.Hosts["a"]
	tc := exec.Command("nice", "-n", "-15", "ip", "netns", "exec", a.NS, "tc", "-batch", "-")
	var tcErr bytes.Buffer
	tc.Stderr = &tcErr
	tcIn, err := tc.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tc.Start(); err != nil {
		t.Fatalf("tc -batch in %s: %v", a.NS, err)
	}
	tbf := func(verb string, mbit int) error {
		burst := max(64<<10, mbit*1_000_000/8/100) // 10 ms of tokens
		if _, err := fmt.Fprintf(tcIn, "qdisc %s dev eth0 root tbf rate %dmbit burst %d latency 50ms\n", verb, mbit, burst); err != nil {
			return fmt.Errorf("tc qdisc %s %d mbit: %w", verb, mbit, err)
		}
		return nil
	}
	if err := tbf("add", 120); err != nil {
		t.Fatal(err)
	}
	defer exec.Command("ip", "netns", "exec", a.NS, "tc", "qdisc", "del", "dev", "eth0", "root").Run()
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	type stepped struct {
		steps   int
		longest time.Duration
		err     error
	}
	done := make(chan stepped, 1)
	go func() {
		runtime.LockOSThread() // and never unlocked: the thread ends with it
		unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), -15)
		var s stepped
		rate, last := 120.0, time.Now()
		for due := last; ; {
			// The thread sleeps in the kernel and wakes at its own
			// priority, not when Go's timers get to it.
			due = due.Add(100 * time.Millisecond)
			if d := time.Until(due); d > 0 {
				ts := unix.NsecToTimespec(d.Nanoseconds())
				unix.Nanosleep(&ts, nil)
			}
			if ctx.Err() != nil {
				tcIn.Close()
				if err := tc.Wait(); err != nil {
					s.err = fmt.Errorf("tc -batch: %v: %s", err, tcErr.String())
				}
				done <- s
				return
			}
			if rate *= 0.94; rate < 10 {
				rate = 120
			}
			if s.err = tbf("change", int(rate)); s.err != nil {
				tc.Wait()
				s.err = fmt.Errorf("%w: %s", s.err, tcErr.String())
				done <- s
				return
			}
			now := time.Now()
			s.steps, s.longest, last = s.steps+1, max(s.longest, now.Sub(last)), now
		}
	}()
	rows, warm, stderr := warmupRows(t, dir, env, steppedPlan(n, 16, "3s"))
	stop()
	st := <-done
	if st.err != nil {
		t.Fatal(st.err)
	}
	t.Logf("the link changed %d times, at most %v apart; %s", st.steps, st.longest.Round(time.Millisecond), loadavg())
	for i, row := range rows {
		if warm[i] < 3 {
			t.Errorf("row %d: warmup_used_s %v, want the 3 s cap (a link slowed in steps is never steady; it held a rate for %v at most)", row.Repetition, warm[i], st.longest.Round(time.Millisecond))
		}
	}
	if !strings.Contains(stderr, "not steady after --warmup-max 3s") {
		t.Errorf("no warning that the warmup hit its cap:\n%s", stderr)
	}
	t.Logf("warmup_s %v", warm)
}
