package results

import (
	"slices"
	"testing"
)

func TestMetricColumns(t *testing.T) {
	cols := MetricColumns()
	for _, want := range []string{"bytes", "bandwidth_mb_s", "lat_p50_us", "lat_p99_us", "cpu_client", "prefetch_s"} {
		if !slices.Contains(cols, want) {
			t.Errorf("MetricColumns lacks %s: %v", want, cols)
		}
	}
	for _, not := range []string{"block_size_bytes", "verified", "status", "repetition", "mapping"} {
		if slices.Contains(cols, not) {
			t.Errorf("MetricColumns has %s, which is no figure", not)
		}
	}
}

func TestRowMetric(t *testing.T) {
	bw, n := 812.5, int64(4096)
	r := Row{BandwidthMBs: &bw, Bytes: &n}
	if v, ok := r.Metric("bandwidth_mb_s"); !ok || v != bw {
		t.Errorf("Metric(bandwidth_mb_s) = %v, %v; want %v, true", v, ok, bw)
	}
	if v, ok := r.Metric("bytes"); !ok || v != 4096 {
		t.Errorf("Metric(bytes) = %v, %v; want 4096, true", v, ok)
	}
	if _, ok := r.Metric("lat_p99_us"); ok {
		t.Error("Metric of an empty cell is ok")
	}
	if _, ok := r.Metric("status"); ok {
		t.Error("Metric of a text column is ok")
	}
}
