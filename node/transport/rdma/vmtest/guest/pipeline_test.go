//go:build rdmaguest

package guest

import (
	"os"
	"strings"
	"testing"

	"rdmasweep/results"
)

// TestPipeline: a pipelined server (--pipeline) registers nothing before
// ready; after the client connects it populates and registers the file
// one memory region at a time, and the client reads each as it is
// announced: every byte it reads is the file's, and the server's done
// event accounts for every region. The serial server, read the same way,
// reports its first and last READ too. The file is on the guest's tmpfs,
// which prepares in tens of milliseconds on 7.3: that the READs overlap
// the preparation is TestGuestWire's to show, from a disk.
func TestPipeline(t *testing.T) {
	read := []string{"--block-size", "256KiB", "--queue-depth", "8", "--verify"}
	for _, pop := range []string{results.PopulateFault, results.PopulateParallel} {
		t.Run(pop, func(t *testing.T) {
			ready, res, done := point(t, "", serveArgs(t, "64MiB", "--cache", "cold", "--pipeline", "--populate", pop, "--mr-size", "8MiB"), read)
			if ready.RegistrationS != nil || ready.Regions != 0 || ready.PopulateS != nil {
				t.Errorf("ready: registration_s %v, %d regions, populate_s %v; want nothing prepared before ready", ready.RegistrationS, ready.Regions, ready.PopulateS)
			}
			p := done.Pipeline
			if p == nil || p.Regions != 8 || p.RegistrationS == nil || *p.RegistrationS <= 0 || (pop == results.PopulateParallel) != (p.PopulateS != nil) {
				t.Fatalf("done's pipeline %+v; want 8 regions, registration_s, and populate_s with populate parallel only", p)
			}
			if !res.Verified || res.Bytes != 64<<20 || res.FirstReadS == nil || res.LastReadS == nil {
				t.Fatalf("%d bytes, verified %v, first %v, last %v; want the 64 MiB file verified, with its first and last READ", res.Bytes, res.Verified, res.FirstReadS, res.LastReadS)
			}
			prep := *p.RegistrationS
			if p.PopulateS != nil {
				prep += *p.PopulateS
			}
			if *res.FirstReadS <= 0 || *res.FirstReadS >= *res.LastReadS {
				t.Errorf("first READ at %.3f s, last at %.3f s after the handshake; want 0 < first < last", *res.FirstReadS, *res.LastReadS)
			}
			t.Logf("populate %s: preparation %.3f s over %d regions; first READ %.3f s, last %.3f s after the handshake, %.1f MB/s", pop, prep, p.Regions, *res.FirstReadS, *res.LastReadS, res.BandwidthMBs)
		})
	}
	t.Run("serial", func(t *testing.T) {
		ready, res, done := point(t, "", serveArgs(t, "64MiB", "--cache", "cold", "--mr-size", "8MiB"), read)
		if ready.RegistrationS == nil || done.Pipeline != nil || res.FirstReadS == nil || res.LastReadS == nil || !res.Verified {
			t.Fatalf("serial: registration_s %v, done's pipeline %+v, first %v, last %v, verified %v; want the registration at ready, no pipeline, both READ times, verified",
				ready.RegistrationS, done.Pipeline, res.FirstReadS, res.LastReadS, res.Verified)
		}
		t.Logf("serial: registration %.3f s before ready; first READ %.3f s, last %.3f s after the handshake", *ready.RegistrationS, *res.FirstReadS, *res.LastReadS)
	})
	t.Run("preparation fails", func(t *testing.T) {
		// The file cut to 4 MiB after ready: the third 2 MiB region lies
		// past its end, so registering it fails (the kernel cannot pin
		// pages beyond EOF), and both sides' errors name that region: the
		// client's with the server's reason.
		args := serveArgs(t, "16MiB", "--pipeline", "--mr-size", "2MiB")
		srv := start(t, "", args...)
		ready := until[results.Ready](t, srv, "ready")
		if err := os.Truncate(args[4], 4<<20); err != nil {
			t.Fatal(err)
		}
		msg, _ := failureCode(t, start(t, "", readArgs(ready.Address, ready.Port, read...)...))
		srvMsg, _ := failureCode(t, srv)
		if !strings.Contains(msg, "preparation of memory region 3 of 8 failed: register memory region 3 of 8") {
			t.Errorf("client's error %q; want the server's failure to register memory region 3 of 8", msg)
		}
		if !strings.Contains(srvMsg, "register memory region 3 of 8") {
			t.Errorf("server's error %q; want its failure to register memory region 3 of 8", srvMsg)
		}
	})
	t.Run("warmup", func(t *testing.T) {
		_, res, _ := point(t, "", serveArgs(t, "8MiB", "--pipeline", "--mr-size", "2MiB"), append(read, "--warmup", "100ms"))
		if res.FirstReadS != nil || res.LastReadS != nil || !res.Verified {
			t.Errorf("with warmup: first %v, last %v, verified %v; want no READ times (not one pass from the start), verified", res.FirstReadS, res.LastReadS, res.Verified)
		}
	})
}

// TestWindow: with the memlock limit at 64 MiB and neither CAP_IPC_LOCK
// nor CAP_SYS_RESOURCE, so that the kernel holds every registration to
// the limit, a 512 MiB file streams through a window of 4 regions of
// 16 MiB: read whole and verified, the server never holding more than
// 64 MiB registered (a region kept past its release would fail the
// fifth registration). Without the window the same server is refused
// before ready, naming the limit and the window; and a client that would
// read the file more than once is refused by a windowed server.
func TestWindow(t *testing.T) {
	const kib = 64 << 10 // 64 MiB
	args := serveArgs(t, "512MiB", "--cache", "cold", "--pipeline", "--populate", "parallel", "--mr-size", "16MiB")
	// Moderation 3 leaves the last 2 of the 512 READs unsignalled, so the
	// run ends with a fence, which must READ a region still registered.
	read := []string{"--block-size", "1MiB", "--queue-depth", "8", "--cq-moderation", "3", "--verify"}
	t.Run("window", func(t *testing.T) {
		srv := underMemlock(t, kib, true, append(args, "--window", "4")...)
		ready := until[results.Ready](t, srv, "ready")
		cl := start(t, "", readArgs(ready.Address, ready.Port, read...)...)
		res := until[results.Result](t, cl, "result")
		finish(t, cl)
		done := until[results.Done](t, srv, "done")
		finish(t, srv)
		if !res.Verified || res.Bytes != 512<<20 {
			t.Fatalf("%d bytes, verified %v; want the 512 MiB file read whole, verified", res.Bytes, res.Verified)
		}
		p := done.Pipeline
		if p == nil || p.Window != 4 || p.Regions != 32 || done.PinnedPeakBytes == nil || *done.PinnedPeakBytes <= 0 || *done.PinnedPeakBytes > 64<<20 {
			t.Fatalf("done: pipeline %+v, pinned_peak_bytes %v; want window 4 over 32 regions, at most 64 MiB pinned", p, done.PinnedPeakBytes)
		}
		t.Logf("window 4 × 16 MiB: 512 MiB verified at %.1f MB/s, pinned peak %d MiB, registration %.3f s", res.BandwidthMBs, *done.PinnedPeakBytes>>20, *p.RegistrationS)
	})
	t.Run("no window", func(t *testing.T) {
		msg := failure(t, underMemlock(t, kib, true, args...))
		if !strings.Contains(msg, "RLIMIT_MEMLOCK allows 67108864") || !strings.Contains(msg, "server.window") {
			t.Errorf("serve: %q; want a refusal naming the 64 MiB limit and server.window", msg)
		}
	})
	t.Run("twice", func(t *testing.T) {
		srv := start(t, "", append(args, "--window", "4")...)
		ready := until[results.Ready](t, srv, "ready")
		msg := failure(t, start(t, "", readArgs(ready.Address, ready.Port, append(read, "--warmup", "100ms")...)...))
		finish(t, srv) // the client refused before any READ, and said goodbye
		if !strings.Contains(msg, "window") || !strings.Contains(msg, "once") {
			t.Errorf("read with warmup: %q; want a refusal saying the window serves one read of the file", msg)
		}
	})
}
