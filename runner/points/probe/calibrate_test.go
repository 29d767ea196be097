package probe

import (
	"strings"
	"testing"

	"rdmasweep/runner/files/manifest"
)

// TestCalibrationVerdict: within 3 % of 1, either way, is agreement;
// beyond it the verdict says which program is faster and by how much.
func TestCalibrationVerdict(t *testing.T) {
	for _, c := range []struct {
		ratio float64
		agree bool
		want  string
	}{
		{1, true, "agree"},
		{0.971, true, "agree"},
		{1.029, true, "agree"},
		{0.969, false, "DISAGREE: node 3.1% slower"},
		{1.031, false, "DISAGREE: node 3.1% faster"},
		{0.5, false, "DISAGREE: node 50.0% slower"},
		{0, false, ""},
	} {
		if got := Agrees(c.ratio); got != c.agree {
			t.Errorf("Agrees(%v) = %v, want %v", c.ratio, got, c.agree)
		}
		if c.want == "" {
			continue
		}
		if got := CalibrationVerdict(manifest.CalibrationSize{Ratio: c.ratio, Agree: c.agree}); got != c.want {
			t.Errorf("verdict at %v: %q, want %q", c.ratio, got, c.want)
		}
	}
	if got := CalibrationVerdict(manifest.CalibrationSize{Error: "ib_read_bw: exit status 1"}); !strings.HasPrefix(got, "FAIL") {
		t.Errorf("a size that did not run: %q, want FAIL", got)
	}
}
