package plan

import (
	"os"
	"testing"
)

func TestExpectGood(t *testing.T) {
	data, err := os.ReadFile("testdata/good/expect.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse("expect.yaml", data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Expect) != 4 {
		t.Fatalf("got %d expectations, want 4", len(p.Expect))
	}
	for i, e := range p.Expect {
		if e.UnknownPasses != (i == 3) {
			t.Errorf("expect[%d]: unknown passes %v; only expect[3] says unknown: pass", i, e.UnknownPasses)
		}
	}
	if e := p.Expect[0]; !e.AtLeast || !e.LineRate || e.Bound != 0.9 || e.Metric != "bandwidth_mb_s" {
		t.Errorf("expect[0] = %+v", e)
	}
	if e := p.Expect[1]; e.LineRate || e.Bound != 10000 {
		t.Errorf("expect[1] = %+v, want 10000 MB/s", e)
	}
	e := p.Expect[2]
	if e.AtLeast || e.Bound != 4.5 || len(e.Where) != 2 {
		t.Fatalf("expect[2] = %+v", e)
	}
	cells := map[string]string{"block_size": "4096", "transport": "rdma"}
	if !e.Applies(func(n string) string { return cells[n] }) {
		t.Error("a 4KiB rdma row is outside block_size <= 4KiB, transport rdma")
	}
	cells["block_size"] = "8192"
	if e.Applies(func(n string) string { return cells[n] }) {
		t.Error("an 8KiB row is inside block_size <= 4KiB")
	}
	cells["block_size"], cells["transport"] = "4096", "tcp"
	if e.Applies(func(n string) string { return cells[n] }) {
		t.Error("a tcp row is inside transport rdma")
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"10GB/s": 10000, "100Gb/s": 12500, "1MiB/s": 1.048576, "812.5MB/s": 812.5} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"10", "GB/s", "fast/s", "-1GB/s"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) accepted it", bad)
		}
	}
}
