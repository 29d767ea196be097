//go:build rdmaguest

package guest

import (
	"fmt"
	"testing"
)

// TestIdleShare: an rdma client busy-polls, so its thread's CPU is a core
// whatever it does; idle_s is the share of its measured phase in which it
// found nothing to do. An open loop offering 1 MB/s of 64 KiB reads (16 a
// second) waits almost all the time: idle at least 0.8 of its seconds,
// its cpu_client_busy at most 0.2. A closed loop that verifies 1 MiB
// blocks works more than that open loop: how much depends on the kernel
// (6.1's rxe runs the whole READ inside the client's own calls, so its
// polls are never empty; 7.x's runs it in a worker, and the loop idles
// about 0.9 of the time).
func TestIdleShare(t *testing.T) {
	_, open, _ := point(t, "", serveArgs(t, "16MiB"), []string{"--block-size", "64KiB", "--queue-depth", "16", "--total", "0", "--duration", "2s", "--rate", "1MB/s"})
	if open.IdleS == nil || *open.IdleS < 0.8*open.Seconds || *open.IdleS > open.Seconds {
		t.Errorf("open loop at 1 MB/s: idle_s %s of %.3f s; want at least 0.8 of it", seconds(open.IdleS), open.Seconds)
	}
	_, closed, _ := point(t, "", serveArgs(t, "16MiB"), []string{"--block-size", "1MiB", "--queue-depth", "4", "--total", "0", "--duration", "2s", "--verify"})
	if closed.IdleS == nil || open.IdleS == nil || *closed.IdleS < 0 || *closed.IdleS/closed.Seconds >= *open.IdleS/open.Seconds {
		t.Errorf("closed loop, verified: idle_s %s of %.3f s; want a smaller share than the open loop's (%s of %.3f s)", seconds(closed.IdleS), closed.Seconds, seconds(open.IdleS), open.Seconds)
	}
	for _, r := range []struct {
		what string
		s    float64
		idle *float64
	}{{"open", open.Seconds, open.IdleS}, {"closed", closed.Seconds, closed.IdleS}} {
		if r.idle != nil {
			t.Logf("%s loop: idle %.3f of %.3f s, working share %.2f", r.what, *r.idle, r.s, 1-*r.idle/r.s)
		}
	}
}

// seconds is *s in seconds, or "none".
func seconds(s *float64) string {
	if s == nil {
		return "none"
	}
	return fmt.Sprintf("%.3f s", *s)
}
