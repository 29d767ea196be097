package compare

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"rdmasweep/internal/stat"
	"rdmasweep/results"
)

// rows are n ok client rows of a point whose bandwidth is base+i.
func rows(key, reg string, bs int64, n int, base float64) []results.Row {
	var out []results.Row
	for i := range n {
		bw := base + float64(i)
		p50 := 10.0 + float64(i)/10
		out = append(out, results.Row{
			PointKey: key, Repetition: i + 1, Status: results.StatusOK, Scope: results.ScopeClient,
			Params:       map[string]string{"transport": "rdma", "registration": reg, "block_size": fmt.Sprint(bs), "queue_depth": "16"},
			BandwidthMBs: &bw, LatP50Us: &p50,
		})
	}
	return out
}

func TestCompareFilesByPointKey(t *testing.T) {
	old := append(rows("a", "pinned", 4096, 8, 1000), rows("b", "pinned", 65536, 8, 2000)...)
	new := append(rows("a", "pinned", 4096, 8, 800), rows("c", "pinned", 1<<20, 8, 3000)...)
	res, err := Compare(old, new, Options{Metrics: []string{"bandwidth_mb_s"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Points) != 1 || res.UnmatchedOld != 1 || res.UnmatchedNew != 1 {
		t.Fatalf("got %d points, unmatched %d old %d new; want 1, 1, 1", len(res.Points), res.UnmatchedOld, res.UnmatchedNew)
	}
	pt := res.Points[0]
	if !pt.Significant || pt.DeltaPct > -19 || pt.DeltaPct < -21 || pt.Params["block_size"] != "4096" {
		t.Errorf("point %+v: want a significant -20%% at block_size 4096", pt)
	}
}

func TestCompareBetween(t *testing.T) {
	all := append(rows("p4", "pinned", 4096, 6, 1000), rows("o4", "odp", 4096, 6, 1000)...)
	all = append(all, rows("p64", "pinned", 65536, 6, 2000)...)
	all = append(all, rows("o64", "odp", 65536, 6, 1000)...)
	old, new, err := ParseBetween("registration=pinned,registration=odp")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Compare(all, all, Options{Between: &[2]Cond{old, new}, Metrics: []string{"bandwidth_mb_s"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Points) != 2 {
		t.Fatalf("got %d points, want the two block sizes", len(res.Points))
	}
	if res.Points[0].Significant {
		t.Errorf("equal samples flagged: %+v", res.Points[0])
	}
	if !res.Points[1].Significant || res.Points[1].DeltaPct > -49 {
		t.Errorf("halved bandwidth not flagged: %+v", res.Points[1])
	}
	if _, ok := res.Points[1].Params["registration"]; ok {
		t.Error("the compared parameter is listed among the shared ones")
	}
	var buf bytes.Buffer
	if err := Write(&buf, res, "text"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "block_size=64KiB") || !strings.Contains(buf.String(), "~") {
		t.Errorf("text output lacks the point's label or ~:\n%s", buf.String())
	}
}

func TestCompareBy(t *testing.T) {
	old := rows("k1", "pinned", 4096, 8, 1000)
	new := rows("k2-after-a-key-change", "pinned", 4096, 8, 1000)
	if _, err := Compare(old, new, Options{}); err == nil {
		t.Error("points with different keys matched")
	}
	res, err := Compare(old, new, Options{By: []string{"block_size"}})
	if err != nil || len(res.Points) != 2 {
		t.Fatalf("--by block_size: %v, %d points; want the two default metrics that have figures", err, len(res.Points))
	}
	if _, err := Compare(old, new, Options{By: []string{"blok_size"}}); err == nil || !strings.Contains(err.Error(), "did you mean block_size") {
		t.Errorf("a misspelt --by: %v", err)
	}
	if _, err := Compare(old, new, Options{Metrics: []string{"bandwith_mb_s"}}); err == nil || !strings.Contains(err.Error(), "did you mean bandwidth_mb_s") {
		t.Errorf("a misspelt metric: %v", err)
	}
}

func TestWriteJSON(t *testing.T) {
	res, err := Compare(rows("a", "pinned", 4096, 3, 1000), rows("a", "pinned", 4096, 3, 900), Options{Metrics: []string{"bandwidth_mb_s"}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, res, "json"); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	for _, k := range []string{"metric", "old_center", "new_center", "delta_pct", "p_value", "significant", "n_old", "n_new", "params", "warnings"} {
		if _, ok := got[k]; !ok {
			t.Errorf("json lacks %s: %s", k, buf.String())
		}
	}
	if got["old_lo"] != nil || got["significant"] != false {
		t.Errorf("3 samples a side: want no interval and no significance: %s", buf.String())
	}
	if p := got["params"].(map[string]any); p["block_size"] != "4096" {
		t.Errorf("params by plan name: %v", p)
	}
}

func TestGate(t *testing.T) {
	g, err := ParseGate("bandwidth_mb_s<-5%")
	if err != nil {
		t.Fatal(err)
	}
	sig := Point{Metric: "bandwidth_mb_s", Comparison: stat.Comparison{Significant: true, DeltaPct: -8}}
	if !g.Trips(sig) {
		t.Error("a significant -8% did not trip <-5%")
	}
	if g.Trips(Point{Metric: "bandwidth_mb_s", Comparison: stat.Comparison{DeltaPct: -8}}) {
		t.Error("an insignificant change tripped the gate")
	}
	if g.Trips(Point{Metric: "bandwidth_mb_s", Comparison: stat.Comparison{Significant: true, DeltaPct: -3}}) {
		t.Error("-3% tripped <-5%")
	}
	up, _ := ParseGate("lat_p99_us>10%")
	if !up.Trips(Point{Metric: "lat_p99_us", Comparison: stat.Comparison{Significant: true, DeltaPct: 12}}) {
		t.Error("+12% did not trip >10%")
	}
	for _, bad := range []string{"bandwidth_mb_s<-5", "bandwith_mb_s<-5%", "<5%", "bandwidth_mb_s<x%"} {
		if _, err := ParseGate(bad); err == nil {
			t.Errorf("ParseGate(%q) accepted it", bad)
		}
	}
}
