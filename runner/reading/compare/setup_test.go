package compare

import (
	"slices"
	"strings"
	"testing"

	"rdmasweep/internal/stat"
)

func TestSetupAddsGatedMetricsAndRefusesBadFlags(t *testing.T) {
	opts, gates, err := Setup(Flags{Format: "text", Alpha: 0.05, FailOn: []string{"lat_p99_us>10%"}})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultMetrics
	if !slices.Equal(opts.Metrics, want) || len(gates) != 1 || gates[0].Metric != "lat_p99_us" {
		t.Errorf("defaults with a gate: metrics %v, gates %v", opts.Metrics, gates)
	}
	opts, _, err = Setup(Flags{Format: "csv", Alpha: 0.1, Metrics: []string{"bandwidth_mb_s"}, FailOn: []string{"lat_p50_us>5%"}, By: "a,b", Between: "registration=pinned,registration=odp"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(opts.Metrics, []string{"bandwidth_mb_s", "lat_p50_us"}) || !slices.Equal(opts.By, []string{"a", "b"}) || opts.Between == nil {
		t.Errorf("explicit flags: %+v", opts)
	}
	for _, f := range []struct {
		flags Flags
		says  string
	}{
		{Flags{Format: "text", Alpha: 1}, "--alpha"},
		{Flags{Format: "xml", Alpha: 0.05}, "--format"},
		{Flags{Format: "text", Alpha: 0.05, FailOn: []string{"bandwidth_mb_s"}}, "--fail-on"},
	} {
		if _, _, err := Setup(f.flags); err == nil || !strings.Contains(err.Error(), f.says) {
			t.Errorf("Setup(%+v) = %v, want an error naming %s", f.flags, err, f.says)
		}
	}
}

func TestWarningsAndTrippedCount(t *testing.T) {
	res := Result{Points: []Point{
		{Metric: "bandwidth_mb_s", Comparison: stat.Comparison{Significant: true, DeltaPct: -8, Warnings: []string{"few", "none"}}},
		{Metric: "bandwidth_mb_s", Comparison: stat.Comparison{Significant: true, DeltaPct: -2, Warnings: []string{"few"}}},
		{Metric: "bandwidth_mb_s", Comparison: stat.Comparison{Significant: false, DeltaPct: -20}},
	}}
	ws := Warnings(res)
	if len(ws) != 2 || ws[0] != (Warning{"few", 2}) || ws[1] != (Warning{"none", 1}) {
		t.Errorf("Warnings = %+v", ws)
	}
	below, _ := ParseGate("bandwidth_mb_s<-5%")
	above, _ := ParseGate("bandwidth_mb_s>5%")
	trips := Tripped(res, []Gate{above, below})
	if len(trips) != 1 || trips[0].Gate.String() != "bandwidth_mb_s<-5%" || trips[0].Points != 1 {
		t.Errorf("Tripped = %+v", trips)
	}
}
