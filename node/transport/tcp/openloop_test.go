package tcp

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"rdmasweep/node/region"
	"rdmasweep/node/transport"
)

// openPair serves a fresh 64-block patterned region and dials it.
func openPair(t *testing.T, ctx context.Context) transport.Client {
	t.Helper()
	const bs = 64 << 10
	f, err := region.Open(ctx, filepath.Join(t.TempDir(), "region.dat"), region.Options{Size: 64 * bs, Create: true, Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tr := New()
	srv, err := tr.Listen(ctx, transport.ServerConfig{
		Region: transport.Region{File: f.File, Path: f.Path, Size: f.Size, Seed: f.Seed, Patterned: f.Patterned, Writable: f.Writable},
		Host:   "127.0.0.1", AcceptTimeout: 10 * time.Second,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	go srv.Serve(ctx)
	cl, err := tr.Dial(ctx, transport.ClientConfig{Addr: fmt.Sprintf("127.0.0.1:%d", srv.Ready().Port), QPs: 1, QueueDepth: 8, BlockSize: bs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// An open loop reads every block it schedules, verified, never before its
// due time: the phase cannot end before the last read was due.
func TestOpenLoopReadsOnSchedule(t *testing.T) {
	for _, arrivals := range []string{"fixed", "poisson"} {
		t.Run(arrivals, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cl := openPair(t, ctx)
			m, err := cl.Read(ctx, transport.Workload{
				BlockSize: 64 << 10, QueueDepth: 8, Pattern: "random", Seed: 3, Verify: true,
				Warmup: 100 * time.Millisecond, Duration: 300 * time.Millisecond,
				Rate: 2000, Arrivals: arrivals, ArrivalSeed: 9,
			})
			if err != nil {
				t.Fatal(err)
			}
			ol := m.OpenLoop
			if ol == nil || ol.Due != 600 || m.Reads != 600 || ol.Response.N != 600 || m.Histogram.N != 600 || !m.Verified {
				t.Fatalf("measurement %+v, open loop %+v: want 600 verified reads, each due and timed twice", m, ol)
			}
			// fixed: the last read is due at 599/2000 s; poisson: within
			// the span, after the 599th of 601 exponential gaps.
			if last := 0.2995; arrivals == "fixed" && m.Seconds < last {
				t.Errorf("the phase ended %.4f s in, before its last read was due at %.4f s: a read was posted early", m.Seconds, last)
			}
			if resp, svc := m.OpenLoop.Response.Summary(), m.Latency; resp.P50Us < svc.P50Us || resp.MaxUs < svc.MaxUs {
				t.Errorf("response p50 %.1f max %.1f µs below service p50 %.1f max %.1f µs", resp.P50Us, resp.MaxUs, svc.P50Us, svc.MaxUs)
			}
		})
	}
}

// Cancelling an open loop that sleeps towards its next due time (1000 s
// away) ends it with the cancellation, not with the outer deadline.
func TestOpenLoopCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := openPair(t, ctx)
	rctx, rcancel := context.WithCancel(ctx)
	time.AfterFunc(200*time.Millisecond, rcancel)
	_, err := cl.Read(rctx, transport.Workload{BlockSize: 64 << 10, QueueDepth: 8, Pattern: "sequential", Total: 1 << 20, Rate: 0.001, Arrivals: "fixed"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled open loop: %v, want context.Canceled", err)
	}
}
