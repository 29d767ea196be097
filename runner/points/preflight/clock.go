package preflight

import (
	"fmt"
	"time"

	"rdmasweep/runner/files/manifest"
	"rdmasweep/runner/hosts/hostfacts"
)

// ClockLimit is how far a host's clock may be from the runner's, for
// certain, before check and exec warn: the go time of the start barrier,
// the time series and the aggregate's common window all compare the
// hosts' clocks, and a 10 ms error is a tenth of the shortest interval.
const ClockLimit = 10 * time.Millisecond

// ClockWarning says what a clock beyond ClockLimit does to the figures.
func ClockWarning(c hostfacts.Clock) string {
	return fmt.Sprintf("clock %s from the runner's: the start barrier, the time series and the aggregate's common window compare hosts' clocks; sync them (chrony, PTP)", c)
}

// FarClock is a role whose host's clock is certainly beyond ClockLimit
// from the runner's.
type FarClock struct {
	Role  int // its index in the manifest's hosts
	Clock hostfacts.Clock
}

// FarClocks are the hosts of an exec's manifest whose clocks are certainly
// beyond ClockLimit, once per host, in the roles' order.
func FarClocks(hosts []manifest.Host) []FarClock {
	var out []FarClock
	seen := map[string]bool{}
	for i, h := range hosts {
		if h.Clock == nil || seen[h.Name] {
			continue
		}
		seen[h.Name] = true
		c := hostfacts.Clock{Offset: time.Duration(h.Clock.OffsetNs), Uncertainty: time.Duration(h.Clock.UncertaintyNs)}
		if c.Disagrees(ClockLimit) {
			out = append(out, FarClock{Role: i, Clock: c})
		}
	}
	return out
}
