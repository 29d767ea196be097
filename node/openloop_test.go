package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"rdmasweep/results"
)

// The open loop (--rate) through the real binaries, on loopback tcp. The
// machine may be loaded by other work, so no test assumes a speed: each
// measures what the loopback carries first and offers a load against it.

// openRead runs one serve and one read against file (4MiB, made by the
// caller's first call with --create) and returns the reader's result.
// during, if set, runs against the server's process while the read is
// under way.
func openRead(t *testing.T, file string, during func(pid int), readExtra ...string) *results.Result {
	t.Helper()
	s, ready := serveReady(t, "", serveArgs(file, "--create", "--cache", "warm")...)
	r := start(t, "", readArgs(ready.Port, append([]string{"--pattern", "sequential"}, readExtra...)...)...)
	mustType[*results.Started](t, r.next(10*time.Second))
	if during != nil {
		during(s.cmd.Process.Pid)
	}
	res := mustType[*results.Result](t, r.next(60*time.Second))
	if code, _ := r.wait(10 * time.Second); code != 0 {
		t.Fatalf("read exited %d: %s", code, r.stderr.String())
	}
	if code, _ := s.wait(10 * time.Second); code != 0 {
		t.Fatalf("serve exited %d: %s", code, s.stderr.String())
	}
	return res
}

// capacity is what a closed loop of reads carries here, now, in MB/s:
// the best of three short runs, as other work on the machine only ever
// takes from it.
func capacity(t *testing.T, file string, block string) float64 {
	t.Helper()
	var best float64
	for range 3 {
		res := openRead(t, file, nil, "--block-size", block, "--queue-depth", "16", "--total", "0", "--duration", "500ms")
		if res.OpenLoop != nil {
			t.Fatalf("a read without --rate reported an open loop: %+v", res.OpenLoop)
		}
		best = max(best, res.BandwidthMBs)
	}
	t.Logf("closed loop of %s reads, queue depth 16: %.1f MB/s (the best of 3)", block, best)
	return best
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestOpenLoopRate offers 200 MB/s, and 10 % and 50 % of what a closed
// loop carries here now, each with fixed and with poisson arrivals: the
// median bandwidth of 5 runs is within 1 % of the offered rate.
func TestOpenLoopRate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data")
	c := capacity(t, file, "1MiB")
	for _, load := range []struct {
		name    string
		offered float64
	}{{"200MB/s", 200}, {"10%", 0.1 * c}, {"50%", 0.5 * c}} {
		offered := float64(int(load.offered)) // whole MB/s, as a plan writes it
		if c < 1.5*offered {
			t.Skipf("loopback carries %.0f MB/s now, under 1.5 × the %v MB/s offered: too loaded to judge the rate", c, offered)
		}
		for _, arrivals := range []string{"fixed", "poisson"} {
			t.Run(load.name+"/"+arrivals, func(t *testing.T) { openLoopRate(t, file, offered, arrivals) })
		}
	}
}

// openLoopRate is one offered rate and one arrival process of
// TestOpenLoopRate.
func openLoopRate(t *testing.T, file string, offered float64, arrivals string) {
	var bw, sat []float64
	var seeds []uint64
	// A saturated run did not offer the load as scheduled (the
	// machine stalled the client): its bandwidth says nothing of
	// the rate's accuracy. Up to 10 runs, for 5 that were not.
	for attempt := 0; attempt < 10 && len(bw) < 5; attempt++ {
		res := openRead(t, file, nil, "--block-size", "1MiB", "--queue-depth", "16",
			"--total", "0", "--duration", "1500ms", "--rate", fmt.Sprintf("%gMB/s", offered), "--arrivals", arrivals)
		ol := res.OpenLoop
		if ol == nil || ol.OfferedMBs != offered || ol.Arrivals != arrivals || ol.Due != res.Reads || ol.RespHistogram == nil {
			t.Fatalf("open loop %+v with %d reads: want %v MB/s offered, %s, every read due", ol, res.Reads, offered, arrivals)
		}
		if (ol.ArrivalSeed != nil) != (arrivals == "poisson") {
			t.Errorf("arrival seed %v: want one only for poisson", ol.ArrivalSeed)
		} else if ol.ArrivalSeed != nil {
			seeds = append(seeds, *ol.ArrivalSeed)
		}
		if ol.RespP99Us < res.LatP99Us*0.999 {
			t.Errorf("response p99 %.1f µs under service p99 %.1f µs: a read cannot answer before it was posted", ol.RespP99Us, res.LatP99Us)
		}
		if ol.Saturated {
			sat = append(sat, res.BandwidthMBs)
			continue
		}
		bw = append(bw, res.BandwidthMBs)
	}
	if len(bw) < 5 {
		t.Skipf("%s: %d of %d runs saturated (%v MB/s): the machine is too loaded to offer the rate as scheduled", arrivals, len(sat), len(sat)+len(bw), sat)
	}
	m := median(bw)
	t.Logf("%s: %v MB/s offered, carried %.2f MB/s median of %v (%d saturated runs left out: %v)", arrivals, offered, m, bw, len(sat), sat)
	if m < offered*0.99 || m > offered*1.01 {
		t.Errorf("%s: median bandwidth %.2f MB/s, not within 1 %% of the %v MB/s offered (%v)", arrivals, m, offered, bw)
	}
	if seeds = slices.Compact(seeds); len(seeds) > 1 {
		t.Errorf("poisson seeds %v differ over one file", seeds)
	}
}

// TestOpenLoopLightLoadIsNotSaturated offers 2 MB/s of 64KiB reads for a
// second, about 30 reads, at queue depth 64: more slots than reads, so no
// read can find the window full at its due time, however loaded the
// machine. Nothing is held back and the run is not saturated; an open
// loop that called every read held back would say otherwise.
func TestOpenLoopLightLoadIsNotSaturated(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data")
	res := openRead(t, file, nil, "--block-size", "64KiB", "--queue-depth", "64", "--total", "0", "--duration", "1s", "--rate", "2MB/s")
	ol := res.OpenLoop
	if ol == nil || ol.Due == 0 || ol.Due > 64 {
		t.Fatalf("open loop %+v: want between 1 and 64 reads due", ol)
	}
	if ol.HeldBack != 0 || ol.Saturated {
		t.Errorf("%d of %d reads held back, saturated %v: with more slots than reads none can wait for one", ol.HeldBack, ol.Due, ol.Saturated)
	}
}

// TestOpenLoopCoordinatedOmission stops the server for 200 ms in the
// middle of an open loop. The reads due during the stop wait for it to
// end: their response latency counts the wait from their due time, while
// their service latency starts only when the queue depth lets them be
// posted, after the stop. A closed loop would report only the latter.
func TestOpenLoopCoordinatedOmission(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data")
	if c := capacity(t, file, "64KiB"); c < 2*100 {
		t.Skipf("loopback carries %.0f MB/s of 64KiB reads now, under twice the 100 MB/s offered: the stop could not be told from the load", c)
	}
	stop := func(pid int) {
		time.Sleep(2 * time.Second)
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Errorf("stop the server: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Errorf("continue the server: %v", err)
		}
	}
	res := openRead(t, file, stop, "--block-size", "64KiB", "--queue-depth", "16", "--total", "0", "--duration", "4s", "--rate", "100MB/s")
	ol := res.OpenLoop
	t.Logf("100 MB/s of 64KiB reads for 4 s, the server stopped 200 ms: service p50 %.0f p99 %.0f p99.9 %.0f max %.0f µs; response p50 %.0f p99 %.0f p99.9 %.0f max %.0f µs; %d of %d due reads held back; %.1f MB/s carried",
		res.LatP50Us, res.LatP99Us, res.LatP999Us, res.LatMaxUs, ol.RespP50Us, ol.RespP99Us, ol.RespP999Us, ol.RespMaxUs, ol.HeldBack, ol.Due, res.BandwidthMBs)
	if ol.RespP99Us < 100000 {
		t.Errorf("response p99 %.0f µs: the 200 ms stop held back about 5 %% of the reads, so it should be at least 100000", ol.RespP99Us)
	}
	if res.LatP99Us >= ol.RespP99Us/2 {
		t.Errorf("service p99 %.0f µs is not under half the response p99 %.0f µs: the stop should hide from it", res.LatP99Us, ol.RespP99Us)
	}
	if ol.RespMaxUs < 150000 {
		t.Errorf("response max %.0f µs: a read due as the stop began waits most of its 200 ms", ol.RespMaxUs)
	}
}

// TestOpenLoopSaturated offers twice what the loopback carries: the queue
// depth must hold reads back, and the result say so.
func TestOpenLoopSaturated(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data")
	c := capacity(t, file, "64KiB")
	res := openRead(t, file, nil, "--block-size", "64KiB", "--queue-depth", "16", "--total", "0", "--duration", "1500ms",
		"--rate", fmt.Sprintf("%.0fMB/s", 2*c), "--arrivals", "poisson")
	ol := res.OpenLoop
	t.Logf("offered %.0f MB/s, twice the %.0f measured: carried %.0f MB/s, %d of %d due reads held back, response p99 %.0f µs",
		ol.OfferedMBs, c, res.BandwidthMBs, ol.HeldBack, ol.Due, ol.RespP99Us)
	if !ol.Saturated || !results.IsSaturated(ol.HeldBack, ol.Due) {
		t.Errorf("offered twice the capacity: saturated %v with %d of %d held back", ol.Saturated, ol.HeldBack, ol.Due)
	}
}

func TestOpenLoopRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "200mb/s"}, `--rate must be a rate like 200MB/s or 50000iops (got "200mb/s")`},
		{[]string{"--rate", "0MB/s"}, `--rate must be more than 0`},
		{[]string{"--arrivals", "poisson"}, `--arrivals poisson needs --rate`},
		{[]string{"--rate", "1MB/s", "--arrivals", "burst"}, `--arrivals must be fixed or poisson (got "burst")`},
	} {
		r := start(t, "", readArgs(1, c.args...)...)
		code, last := r.wait(10 * time.Second)
		ev, ok := last.(*results.Error)
		if code != 2 || !ok || !strings.Contains(ev.Message, c.want) {
			t.Errorf("read %v: exit %d, last event %#v; want 2 and an error saying %q", c.args, code, last, c.want)
		}
	}
}
