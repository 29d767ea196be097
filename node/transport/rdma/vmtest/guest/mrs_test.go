//go:build rdmaguest

package guest

import (
	"strings"
	"testing"

	"rdmasweep/results"
)

// TestManyMRs registers a 512 MiB file as memory regions of 32 MiB: the
// server says 16, and the client, picking each READ's rkey by its offset,
// reads 128 MiB verified: in order, across the first four regions and
// their boundaries, and at random, 128 blocks of 1 MiB over all 16 (each
// region is missed with probability (15/16)^128, under 0.03 %). Reading
// the whole file took over 2 minutes under TCG on a loaded host. A READ on the
// wrong region's rkey would fail with a remote access error, and one that
// went past its region's end would too. A block size that does not divide
// mr_size is refused by the client before any READ.
func TestManyMRs(t *testing.T) {
	for _, pattern := range []string{"sequential", "random"} {
		t.Run(pattern, func(t *testing.T) {
			ready, res, done := point(t, "", serveArgs(t, "512MiB", "--mr-size", "32MiB"),
				[]string{"--block-size", "1MiB", "--queue-depth", "8", "--total", "128MiB", "--pattern", pattern, "--verify"})
			if ready.Regions != 16 {
				t.Errorf("512MiB in 32MiB regions: the server registered %d, want 16", ready.Regions)
			}
			if !res.Verified || res.Bytes != 128<<20 || done.Requests != res.Reads {
				t.Errorf("%s over 16 regions: verified %v, %d bytes, server counts %d reads of %d", pattern, res.Verified, res.Bytes, done.Requests, res.Reads)
			}
			t.Logf("%s: %.1f MB/s, registration %.3f s over %d regions", pattern, res.BandwidthMBs, *ready.RegistrationS, ready.Regions)
		})
	}
	t.Run("one region", func(t *testing.T) {
		ready, res, _ := point(t, "", serveArgs(t, "4MiB"), []string{"--block-size", "64KiB", "--total", "4MiB", "--verify"})
		if ready.Regions != 1 || !res.Verified {
			t.Errorf("no mr_size: %d regions, verified %v; want one region, verified", ready.Regions, res.Verified)
		}
	})
	if device(t, "rxe0").ODP {
		t.Run("odp", testManyMRsODP)
	}
	t.Run("span refused", func(t *testing.T) {
		srv := start(t, "", serveArgs(t, "6MiB", "--mr-size", "3MiB")...)
		ready := until[results.Ready](t, srv, "ready")
		msg, _ := failureCode(t, start(t, "", readArgs(ready.Address, ready.Port, "--block-size", "2MiB", "--total", "6MiB")...))
		if !strings.Contains(msg, "span two memory regions") {
			t.Errorf("2MiB blocks over 3MiB regions: %q, want a refusal saying a READ would span two regions", msg)
		}
	})
}

// testManyMRsODP registers 16 odp memory regions where rxe has ODP (7.3):
// the server says 16, and a READ in each region reaches it with that
// region's rkey: a wrong rkey fails with a remote access error, never with
// the ODP verify failure rxe's wrong data on 7.3 gives (so the data is
// not what this checks).
func testManyMRsODP(t *testing.T) {
	srv := start(t, "", serveArgs(t, "64MiB", "--mr-size", "4MiB", "--registration", "odp")...)
	ready := until[results.Ready](t, srv, "ready")
	if ready.Regions != 16 {
		t.Errorf("64MiB odp in 4MiB regions: the server registered %d, want 16", ready.Regions)
	}
	cl := start(t, "", readArgs(ready.Address, ready.Port, "--block-size", "1MiB", "--total", "64MiB", "--verify")...)
	var res *results.Result
	var msg, code string
	for ev := range cl.events {
		switch e := ev.(type) {
		case *results.Result:
			res = e
		case *results.Error:
			msg, code = e.Message, e.Code
		}
	}
	<-cl.done
	switch {
	case res != nil && res.Verified:
		t.Logf("kernel %s: odp over 16 regions verified", kernel(t))
	case code == results.ErrorCodeODPVerifyMismatch:
		t.Logf("kernel %s: odp over 16 regions read, with rxe's wrong odp data caught: %s", kernel(t), msg)
	default:
		t.Errorf("kernel %s: odp over 16 regions: %q (code %q); want every READ to reach its region", kernel(t), msg, code)
	}
}
