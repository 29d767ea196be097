package main

import (
	"path/filepath"
	"testing"
	"time"

	"rdmasweep/results"
)

// With --populate parallel, serve brings the cold file into the page
// cache before ready and reports how long that took and at what rate;
// the reads that follow then fault nothing in from the disk. With the
// default, fault, it reports neither, and the server's reads of the cold
// file fault their pages in (the server writes from its mapping on
// loopback).
func TestServePopulate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data")
	for _, how := range []string{results.PopulateFault, results.PopulateParallel} {
		t.Run(how, func(t *testing.T) {
			s, ready := serveReady(t, "", serveArgs(file, "--create", "--populate", how)...)
			r := start(t, "", readArgs(ready.Port, "--verify", "--pattern", "sequential", "--total", "4MiB")...)
			mustType[*results.Started](t, r.next(10*time.Second))
			res := mustType[*results.Result](t, r.next(30*time.Second))
			done := mustType[*results.Done](t, s.next(10*time.Second))
			r.wait(10 * time.Second)
			s.wait(10 * time.Second)
			if !res.Verified {
				t.Fatalf("reads not verified: %+v", res)
			}
			if how == results.PopulateFault {
				if ready.PopulateS != nil || ready.PopulateMBs != nil || done.MajorFaults == 0 {
					t.Errorf("populate fault: populate_s %v, populate_mb_s %v, %d major faults serving the cold file; want none reported and the pages faulted in by the reads", ready.PopulateS, ready.PopulateMBs, done.MajorFaults)
				}
				return
			}
			if ready.PopulateS == nil || *ready.PopulateS <= 0 || ready.PopulateMBs == nil {
				t.Fatalf("populate parallel: populate_s %v, populate_mb_s %v; want both", ready.PopulateS, ready.PopulateMBs)
			}
			if want := 4 << 20 / 1e6 / *ready.PopulateS; *ready.PopulateMBs < want*0.999 || *ready.PopulateMBs > want*1.001 {
				t.Errorf("populate_mb_s %v, but file_size ÷ populate_s is %v", *ready.PopulateMBs, want)
			}
			if ready.CachedFraction != 0 && ready.CachedFraction > 0.5 {
				t.Errorf("cached_fraction %v: it is measured before the populate, after the cold step", ready.CachedFraction)
			}
			if done.MajorFaults != 0 {
				t.Errorf("populate parallel: the reads faulted %d pages in from the disk; want none", done.MajorFaults)
			}
		})
	}
}
