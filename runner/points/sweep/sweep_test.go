package sweep

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/runner/files/csvfile"
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

// A plain plan runs each point Repeat times, less what the CSV holds ok; a
// search's walks decide its runs, so its outer points are pending once
// each whatever the CSV holds, and its progress counts the walks' bound.
func TestModePendingAndTotal(t *testing.T) {
	pts := []plan.Point{{Key: "a"}, {Key: "b"}}
	done := []results.Row{{PointKey: "a", Repetition: 1, Status: results.StatusOK}}

	plain := ModeOf(&plan.Plan{Repeat: 2})
	todo, skipped := plain.Pending(pts, done, false)
	if len(todo) != 3 || skipped != 1 || plain.Total(pts, todo) != 3 || plain.Bound(pts) != "" {
		t.Errorf("plain: %d pending, %d skipped, total %d, bound %q; want 3, 1, 3 and none", len(todo), skipped, plain.Total(pts, todo), plain.Bound(pts))
	}

	p := &plan.Plan{Repeat: 3, Search: &plan.Search{Param: "queue_depth", From: 1, To: 16, Metric: "lat_p99_us", AtMost: true, Limit: 100}}
	s := ModeOf(p)
	todo, skipped = s.Pending(pts, done, false)
	if len(todo) != 2 || skipped != 0 {
		t.Errorf("search: %d pending, %d skipped; want each outer point once", len(todo), skipped)
	}
	if got, want := s.Total(pts, todo), SearchRuns(p, 2); got != want || got <= len(todo) {
		t.Errorf("search: total %d, want the walks' bound %d", got, want)
	}
	if !strings.Contains(s.Bound(pts), "queue_depth") {
		t.Errorf("search: bound %q does not name the searched parameter", s.Bound(pts))
	}
}

// TestTooShortRow: an ok fio row of 8 ms is warned about, naming the step
// and the duration to read for; 100 ms, a node row, or a failed one, not.
func TestTooShortRow(t *testing.T) {
	row := func(workload string, secs float64, status string) results.Row {
		return results.Row{Status: status, Seconds: &secs, Params: map[string]string{"workload": workload}}
	}
	if why := tooShort(row("fio", 0.008, results.StatusOK)); !strings.Contains(why, "fio ran for 8ms, under 100 × its 1ms clock step") || !strings.Contains(why, "100ms or more") {
		t.Errorf("fio 8 ms: %q", why)
	}
	for _, r := range []results.Row{row("fio", 0.1, results.StatusOK), row("node", 0.001, results.StatusOK), row("fio", 0.001, results.StatusFailed)} {
		if why := tooShort(r); why != "" {
			t.Errorf("%s %.3f s %s: %q, want no warning", r.Workload(), *r.Seconds, r.Status, why)
		}
	}
}
