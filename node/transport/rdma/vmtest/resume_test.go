package vmtest

import (
	"testing"

	"rdmasweep/results"
)

// TestResumedPeerRows: a failed ib_read_bw row that a resumed exec ran again
// gives its place to the later row, and the stderr that may be resumed is
// perftest's own "Can't produce a report" alone.
func TestResumedPeerRows(t *testing.T) {
	rows := []results.Row{
		{PointKey: "n", Repetition: 1, Status: results.StatusOK},
		{PointKey: "ib", Repetition: 1, Status: "failed"},
		{PointKey: "fio", Repetition: 1, Status: results.StatusOK},
		{PointKey: "ib", Repetition: 1, Status: results.StatusOK, Error: "redo"},
	}
	got := resumed(rows)
	if len(got) != 3 || got[1].PointKey != "ib" || got[1].Status != results.StatusOK || got[1].Error != "redo" || got[2].PointKey != "fio" {
		t.Errorf("resumed = %+v", got)
	}
	twice := []results.Row{
		{PointKey: "ib", Repetition: 1, Status: "failed", Error: "first"},
		{PointKey: "n", Repetition: 1, Status: results.StatusOK},
		{PointKey: "ib", Repetition: 1, Status: "failed", Error: "second"},
		{PointKey: "ib", Repetition: 1, Status: results.StatusOK, Error: "third"},
	}
	if got := resumed(twice); len(got) != 2 || got[0].Error != "third" || got[1].PointKey != "n" {
		t.Errorf("resumed twice = %+v", got)
	}
	noReport := "[2/6] block_size=64KiB total=32MiB workload=ib_read_bw r1: failed: client (root@h:22): ib_read_bw exit status 1 before its report: Can't produce a report\n"
	if !onlyPerftestNoReport(noReport) {
		t.Error("perftest's own failure is not resumed")
	}
	other := noReport + "[4/6] block_size=1MiB total=32MiB workload=node r1: failed: server (root@h:22): not ready\n"
	if onlyPerftestNoReport(other) || onlyPerftestNoReport("runner: error: cannot connect\n") {
		t.Error("a failure of node, or one outside any run, would be resumed")
	}
}
