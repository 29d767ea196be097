//go:build rdmaguest

package guest

import (
	"testing"
)

// TestPopulatePinned: a pinned rdma server with --populate parallel
// reports its populate before ready, registers the populated file (the
// registration then only pins) in one region and in several, and every
// byte the client READs is the file's.
func TestPopulatePinned(t *testing.T) {
	for _, mr := range []string{"0", "4MiB"} {
		ready, res, _ := point(t, "", serveArgs(t, "16MiB", "--cache", "cold", "--populate", "parallel", "--mr-size", mr),
			[]string{"--block-size", "64KiB", "--queue-depth", "8", "--total", "16MiB", "--verify"})
		if ready.PopulateS == nil || *ready.PopulateS <= 0 || ready.PopulateMBs == nil || ready.RegistrationS == nil {
			t.Fatalf("mr_size %s: ready %+v; want populate_s, populate_mb_s and registration_s", mr, ready)
		}
		if !res.Verified || res.Bytes != 16<<20 {
			t.Errorf("mr_size %s: %d bytes, verified %v; want the 16 MiB file, verified", mr, res.Bytes, res.Verified)
		}
		t.Logf("mr_size %s: populate %.3f s (%.0f MB/s), registration %.3f s over %d regions, %.1f MB/s read", mr, *ready.PopulateS, *ready.PopulateMBs, *ready.RegistrationS, ready.Regions, res.BandwidthMBs)
	}
}
