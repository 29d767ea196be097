// Package procstat reads what identifies a process across pid reuse:
// its start time, field 22 of /proc/PID/stat, in clock ticks since boot.
package procstat

import (
	"bytes"
	"os"
	"strconv"
	"strings"
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
