// Package procstat reads a process's /proc: what identifies it across
// pid reuse (its start time, field 22 of /proc/PID/stat, in clock ticks
// since boot), and the CPU time each of its threads has used.
package procstat

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// StartTime is field 22 of /proc/PID/stat, "" when there is no such
// process or the file cannot be read. comm (field 2) may hold spaces and
// parentheses, so the fields are counted after its last ')'.
func StartTime(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 {
		if f := strings.Fields(string(b[i+1:])); len(f) > 19 {
			return f[19]
		}
	}
	return ""
}

// ThreadCPU is the CPU time (user and system) each thread of pid has
// used so far, by thread ID: /proc/PID/task/TID/schedstat's first field,
// in nanoseconds, or where the kernel has no schedstat (no
// CONFIG_SCHED_INFO) utime + stime of the thread's stat, in clock ticks
// of 10 ms (USER_HZ is 100 on Linux). A thread that ends while it is read
// is left out; nil when the tasks cannot be listed.
func ThreadCPU(pid int) map[int]time.Duration {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := make(map[int]time.Duration, len(ents))
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if d, ok := threadCPU(dir + "/" + e.Name()); ok {
			out[tid] = d
		}
	}
	return out
}

// threadCPU is one task's CPU time, from its directory.
func threadCPU(task string) (time.Duration, bool) {
	if b, err := os.ReadFile(task + "/schedstat"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if ns, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				return time.Duration(ns), true
			}
		}
	}
	b, err := os.ReadFile(task + "/stat")
	if err != nil {
		return 0, false
	}
	return statCPU(b)
}

// statCPU is utime + stime of a stat line (fields 14 and 15, counted
// after comm's last ')'), in clock ticks of 10 ms.
func statCPU(b []byte) (time.Duration, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 { // fields 14 and 15 are the 12th and 13th after comm
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, true
}

// Busiest is the largest CPU time a thread used between two ThreadCPU
// readings of one process (a thread new in after counts from zero).
func Busiest(before, after map[int]time.Duration) time.Duration {
	var most time.Duration
	for tid, a := range after {
		most = max(most, a-before[tid])
	}
	return most
}
