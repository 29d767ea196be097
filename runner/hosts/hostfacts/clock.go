package hostfacts

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"rdmasweep/runner/hosts/remote"
)

// Clock is where a host's wall clock (CLOCK_REALTIME) stands against this
// machine's. The host read its clock at some moment between sending the
// command and receiving the answer, so the true offset lies in an
// interval: Offset ± Uncertainty, whatever the network's asymmetry.
type Clock struct {
	Offset      time.Duration // the host's clock minus this machine's, the interval's middle
	Uncertainty time.Duration // half the interval: the round trip's half, plus 0.5 s where date has no %N
	RTT         time.Duration // the round trip of the reading kept
}

// Disagrees reports whether the host's clock is, for certain, more than
// limit away from this machine's: the whole interval lies beyond it.
func (c Clock) Disagrees(limit time.Duration) bool {
	return c.Offset.Abs()-c.Uncertainty > limit
}

// String is the offset and its bound, in the unit that suits them:
// "+0.21ms ±0.35ms", "-2.004s ±2ms".
func (c Clock) String() string {
	return signedDuration(c.Offset) + " ±" + strings.TrimPrefix(signedDuration(c.Uncertainty), "+")
}

func signedDuration(d time.Duration) string {
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	switch {
	case d >= time.Second:
		return sign + strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + "s"
	case d >= 10*time.Millisecond:
		return sign + strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 0, 64) + "ms"
	default:
		return sign + strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + "ms"
	}
}

// ErrUnreadableClock is matched (errors.Is) when the host ran date but
// what it printed is not a time.
var ErrUnreadableClock = errors.New("cannot read the clock")

// ReadClock reads h's clock with `date +%s%N` three times and keeps the
// reading with the shortest round trip, whose interval is the narrowest.
// A date without %N (busybox prints "N") gives whole seconds, and the
// interval widens by one. Its errors are the command's, or one matching
// ErrUnreadableClock, with the Clock's RTT still set, for an answer that
// is not a time.
func ReadClock(ctx context.Context, h remote.Host) (Clock, error) {
	var best Clock
	for i := range 3 {
		t0 := time.Now()
		out, err := h.Run(ctx, []string{"date", "+%s%N"})
		t1 := time.Now()
		if err != nil {
			return Clock{}, err
		}
		lo, hi, err := clockInterval(strings.TrimSpace(string(out)), t0, t1)
		if err != nil {
			return Clock{RTT: t1.Sub(t0)}, err
		}
		c := Clock{Offset: (lo + hi) / 2, Uncertainty: (hi - lo) / 2, RTT: t1.Sub(t0)}
		if i == 0 || c.Uncertainty < best.Uncertainty {
			best = c
		}
	}
	return best, nil
}

// clockInterval is the offsets a reading allows: the host printed out
// between t0 and t1 by this machine's clock.
func clockInterval(out string, t0, t1 time.Time) (lo, hi time.Duration, err error) {
	whole := strings.HasSuffix(out, "N") // no %N: seconds, then a literal N
	digits := strings.TrimSuffix(out, "N")
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n <= 0 || !whole && len(digits) < 19 {
		return 0, 0, fmt.Errorf("%w: date +%%s%%N printed %q", ErrUnreadableClock, out)
	}
	from, to := time.Unix(0, n), time.Unix(0, n)
	if whole {
		from, to = time.Unix(n, 0), time.Unix(n+1, 0)
	}
	return from.Sub(t1), to.Sub(t0), nil
}
