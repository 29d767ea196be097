package peer

import (
	"regexp"
	"strings"
)

// perftestR2 is what perftest prints before "Can't produce a report"
// when its cycle counter and gettimeofday disagree (get_clock.c,
// sample_get_cpu_mhz): the fit of one against the other has r² under 0.9.
var perftestR2 = regexp.MustCompile(`Correlation coefficient r\^2: ([0-9.eE+-]+) < 0\.9`)

// Diagnose says why a peer tool failed, from the end of its stderr, when
// the tool's own last line does not: "" when it has nothing to add.
func Diagnose(tool, stderr string) string {
	switch tool {
	case IBReadBW:
		if !strings.Contains(stderr, "Can't produce a report") {
			return ""
		}
		r2 := "under 0.9"
		if m := perftestR2.FindStringSubmatch(stderr); m != nil {
			r2 = m[1] + ", under its 0.9"
		} else if !strings.Contains(stderr, "Correlation coefficient") {
			return ""
		}
		return "perftest times its cycle counter against the clock before it reports, and here the two agreed only to r² " + r2 +
			"; a loaded or emulated host does this: run the point again (exec resumes it) when the host is quieter"
	}
	return ""
}
