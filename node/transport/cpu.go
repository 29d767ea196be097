package transport

import (
	"os"
	"time"

	"golang.org/x/sys/unix"

	"rdmasweep/node/procstat"
)

// CPUTime is the CPU time the whole node process used (getrusage
// RUSAGE_SELF: every thread, user and system) over WallS seconds of wall
// time, and ThreadS its busiest thread's (/proc/self/task; 0 when it
// could not be read). WallS 0 means it was not measured.
type CPUTime struct {
	UserS, SysS, WallS float64
	ThreadS            float64
}

// PerSecond returns CPU seconds (user + sys) per wall second, or 0 when
// nothing was measured.
func (c CPUTime) PerSecond() float64 {
	if c.WallS <= 0 {
		return 0
	}
	return (c.UserS + c.SysS) / c.WallS
}

// StartCPU starts a CPU measurement; calling the function it returns
// ends it. A getrusage failure (it has none on Linux for RUSAGE_SELF)
// gives a zero CPUTime.
func StartCPU() func() CPUTime {
	var before unix.Rusage
	err := unix.Getrusage(unix.RUSAGE_SELF, &before)
	threads := procstat.ThreadCPU(os.Getpid())
	start := time.Now()
	return func() CPUTime {
		var after unix.Rusage
		if err != nil || unix.Getrusage(unix.RUSAGE_SELF, &after) != nil {
			return CPUTime{}
		}
		c := CPUTime{
			UserS: tvSeconds(after.Utime) - tvSeconds(before.Utime),
			SysS:  tvSeconds(after.Stime) - tvSeconds(before.Stime),
			WallS: time.Since(start).Seconds(),
		}
		if threads != nil {
			c.ThreadS = procstat.Busiest(threads, procstat.ThreadCPU(os.Getpid())).Seconds()
		}
		return c
	}
}

func tvSeconds(tv unix.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }
