package sweep

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/results"
	"rdmasweep/runner/csvfile"
	"rdmasweep/runner/hint"
)

func TestTallyCountsJobsOrAPoolsRows(t *testing.T) {
	bad := results.Row{Status: "failed"}
	ok := results.Row{Status: results.StatusOK}
	out := Outcome{Rows: []results.Row{ok, bad, bad, ok}, Runs: 2, Failed: 1}
	if f, n := out.Tally(false); f != 1 || n != 2 {
		t.Errorf("Tally(false) = %d of %d, want 1 of 2 jobs", f, n)
	}
	if f, n := out.Tally(true); f != 2 || n != 4 {
		t.Errorf("Tally(true) = %d of %d, want 2 of 4 rows", f, n)
	}
}

func TestOpenCSVRefusesALockedCSVWithAHint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.csv")
	if rows, err := Existing(path); err != nil || rows != nil {
		t.Fatalf("Existing of no file = %v, %v; want nothing", rows, err)
	}
	first, err := OpenCSV(path)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	_, err = OpenCSV(path)
	if !errors.Is(err, csvfile.ErrLocked) || !strings.Contains(hint.Of(err), "--out") {
		t.Fatalf("second open: %v (hint %q), want ErrLocked with a hint to pass --out", err, hint.Of(err))
	}
	if rows, err := Existing(path); err != nil || len(rows) != 0 {
		t.Fatalf("Existing of an empty CSV = %v, %v", rows, err)
	}
}
