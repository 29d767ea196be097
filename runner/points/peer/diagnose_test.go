package peer

import (
	"strings"
	"testing"
)

// TestDiagnose: perftest's "Can't produce a report" after its clock check
// is explained with the r² it printed; other failures, and other tools,
// are left to their own last line.
func TestDiagnose(t *testing.T) {
	stderr := " WARNING: BW peak won't be measured in this run.\nCorrelation coefficient r^2: 0.612 < 0.9\nCan't produce a report\n"
	if d := Diagnose(IBReadBW, stderr); !strings.Contains(d, "r² 0.612, under its 0.9") || !strings.Contains(d, "run the point again") {
		t.Errorf("Diagnose = %q, want the r² and what to do", d)
	}
	for _, c := range []struct{ tool, stderr string }{
		{IBReadBW, "Couldn't connect to 10.0.0.1:18515\n"},
		{IBReadBW, "Can't produce a report\n"}, // no clock check: some other cause
		{Iperf3, stderr},
	} {
		if d := Diagnose(c.tool, c.stderr); d != "" {
			t.Errorf("Diagnose(%s, %q) = %q, want nothing", c.tool, c.stderr, d)
		}
	}
}
