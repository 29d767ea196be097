package preflight

import (
	"fmt"
	"time"

	"rdmasweep/runner/hostfacts"
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
