package manifest

import (
	"path/filepath"
	"testing"
)

// TestCalibrationsKeepEachPairsLatest: saving a pair's calibration
// replaces that pair's and keeps the others'; LatestCalibration finds each
// by its hosts and direction.
func TestCalibrationsKeepEachPairsLatest(t *testing.T) {
	dir := t.TempDir()
	path := CalibrationPathFor(filepath.Join(dir, "out.csv"))
	if cs, err := ReadCalibrations(path); err != nil || cs != nil {
		t.Fatalf("no file: %v %v, want none", cs, err)
	}
	ab := Calibration{At: "2026-12-07T10:00:00Z", Server: "a", Client: "b", Agree: true}
	cd := Calibration{At: "2026-12-07T10:00:00Z", Server: "c", Client: "d", Agree: true}
	if err := SaveCalibrations(path, []Calibration{ab, cd}); err != nil {
		t.Fatal(err)
	}
	if err := SaveCalibrations(path, []Calibration{ab, cd}); err != nil {
		t.Fatal(err)
	}
	ab2 := ab
	ab2.At, ab2.Agree = "2026-12-07T11:00:00Z", false
	if err := SaveCalibrations(path, []Calibration{ab2}); err != nil {
		t.Fatal(err)
	}
	cs, err := ReadCalibrations(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 {
		t.Fatalf("%d calibrations kept, want a→b's new one and c→d's", len(cs))
	}
	if c := LatestCalibration(cs, "a", "b"); c == nil || c.At != ab2.At || c.Agree {
		t.Errorf("a→b: %+v, want the 11:00 one that disagreed", c)
	}
	if c := LatestCalibration(cs, "c", "d"); c == nil || !c.Agree {
		t.Errorf("c→d: %+v, want kept", c)
	}
	if c := LatestCalibration(cs, "b", "a"); c != nil {
		t.Errorf("b→a: %+v, want none (the direction matters)", c)
	}
}
