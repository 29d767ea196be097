package hostfacts

import (
	"context"
	"strconv"
	"testing"
	"time"

	"rdmasweep/runner/hosts/remote"
)

func TestClockInterval(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	t1 := t0.Add(4 * time.Millisecond)
	for _, c := range []struct {
		out    string
		lo, hi time.Duration
	}{
		// Read 2 ms after t0 by the host's clock, which is 1 s ahead.
		{strconv.FormatInt(t0.Add(time.Second+2*time.Millisecond).UnixNano(), 10), time.Second - 2*time.Millisecond, time.Second + 2*time.Millisecond},
		// busybox: whole seconds and a literal N; the same clock.
		{"1700000001N", time.Second - 4*time.Millisecond, 2 * time.Second},
	} {
		lo, hi, err := clockInterval(c.out, t0, t1)
		if err != nil || lo != c.lo || hi != c.hi {
			t.Errorf("%s: [%v, %v], %v; want [%v, %v]", c.out, lo, hi, err, c.lo, c.hi)
		}
	}
	for _, bad := range []string{"", "+%s%N", "1700000001", "date: invalid"} {
		if _, _, err := clockInterval(bad, t0, t1); err == nil {
			t.Errorf("%q read as a time", bad)
		}
	}
}

func TestClockDisagreesAndString(t *testing.T) {
	for _, c := range []struct {
		c    Clock
		dis  bool
		text string
	}{
		{Clock{Offset: 210 * time.Microsecond, Uncertainty: 350 * time.Microsecond}, false, "+0.21ms ±0.35ms"},
		{Clock{Offset: -2004 * time.Millisecond, Uncertainty: 2 * time.Millisecond}, true, "-2.004s ±2.00ms"},
		// 30 ms off, but the reading allows 25 ms either way: not certain
		// to be beyond 10 ms.
		{Clock{Offset: 30 * time.Millisecond, Uncertainty: 25 * time.Millisecond}, false, "+30ms ±25ms"},
	} {
		if got := c.c.Disagrees(10 * time.Millisecond); got != c.dis {
			t.Errorf("%v disagrees beyond 10ms: %v, want %v", c.c, got, c.dis)
		}
		if got := c.c.String(); got != c.text {
			t.Errorf("String = %q, want %q", got, c.text)
		}
	}
}

// ReadClock on this machine finds its own clock within its bound.
func TestReadClockLocal(t *testing.T) {
	c, err := ReadClock(context.Background(), remote.Local{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Disagrees(0) || c.Uncertainty <= 0 || c.Uncertainty > time.Second {
		t.Errorf("this machine against itself: %v (round trip %v)", c, c.RTT)
	}
	t.Logf("local clock %v, round trip %v", c, c.RTT)
}
