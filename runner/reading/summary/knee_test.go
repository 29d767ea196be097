package summary

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"rdmasweep/results"
)

func probeRow(run, bs string, qd int64, p99 float64, mark string) results.Row {
	r := results.Row{RunID: run, Plan: "p", Status: results.StatusOK, Search: mark,
		Params: map[string]string{"block_size": bs, "queue_depth": fmt.Sprint(qd), "transport": "tcp"}}
	bw := 100.0
	r.LatP99Us, r.BandwidthMBs = &p99, &bw
	return r
}

// TestKneesPerOuterPoint: the searched parameter is found from the rows,
// each outer point gets the median at its knee, the last exec's mark
// counts, and an outer point without a knee says so in json.
func TestKneesPerOuterPoint(t *testing.T) {
	rows := []results.Row{
		probeRow("r1", "4096", 1, 10, results.SearchProbe),
		probeRow("r1", "4096", 2, 20, results.SearchKnee),
		probeRow("r1", "4096", 2, 30, results.SearchKnee),
		probeRow("r1", "4096", 2, 25, results.SearchKnee),
		probeRow("r1", "4096", 4, 90, results.SearchProbe),
		probeRow("r1", "8192", 1, 900, results.SearchProbe),
		probeRow("r2", "4096", 3, 40, results.SearchKnee),                                                          // a later exec moved the knee
		{Plan: "p", Status: results.StatusOK, Params: map[string]string{"block_size": "4096", "queue_depth": "9"}}, // not a search row
	}
	knees := Knees(rows)
	if len(knees) != 2 {
		t.Fatalf("%d knees, want 2: %+v", len(knees), knees)
	}
	k := knees[0]
	if k.Param != "queue_depth" || k.Knee == nil || *k.Knee != 3 || k.Runs != 1 || k.Medians["lat_p99_us"] != 40 || k.Point["block_size"] != "4KiB" {
		t.Errorf("first knee = %+v, want queue_depth 3 (the later exec's), p99 40, block_size 4KiB", k)
	}
	if knees[1].Knee != nil {
		t.Errorf("second knee = %d, want none: its only value failed", *knees[1].Knee)
	}
	if first := Knees(rows[:5])[0]; *first.Knee != 2 || first.Runs != 3 || first.Medians["lat_p99_us"] != 25 {
		t.Errorf("knee of one exec = %+v, want queue_depth 2 with the median p99 of 3 runs, 25", first)
	}
	var b bytes.Buffer
	if err := WriteKneesJSON(&b, knees); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Knees []map[string]any `json:"knees"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil || len(got.Knees) != 2 || got.Knees[0]["knee"] != 3.0 || got.Knees[1]["knee"] != nil {
		t.Errorf("json (%v):\n%s", err, b.String())
	}
	if Knees(rows[7:]) != nil {
		t.Error("rows without a search mark have knees")
	}
}
