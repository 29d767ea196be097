package summary

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"rdmasweep/results"
)

func TestOutliers(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   []float64
		want []int
	}{
		{"too few to judge", []float64{1, 100}, nil},
		// median 10, MAD 1: 30 scores 0.6745*20/1 = 13.5.
		{"one far value", []float64{10, 11, 9, 10, 30}, []int{4}},
		{"spread evenly", []float64{10, 11, 12, 13, 14}, nil},
		// MAD is 0 (most values equal): the scale falls back to
		// 1.253314 × mean absolute deviation = 1.253314 × 4/5; the 14
		// scores 4 / 1.00265 = 3.99 > 3.5.
		{"MAD zero, fallback", []float64{10, 10, 10, 10, 14}, []int{4}},
		// Same fallback, a milder value: 12 scores 2 / (1.253314 × 2/5) = 3.99.
		{"MAD zero, mild", []float64{10, 10, 10, 10, 12}, []int{4}},
		// And under the line: with one odd value in n, the fallback score is
		// n / 1.253314, so in 4 values it is 3.19 and nothing stands out.
		{"MAD zero, under 3.5", []float64{10, 10, 10, 11}, nil},
		{"all equal", []float64{5, 5, 5}, nil},
	} {
		if got := Outliers(tc.xs); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Outliers(%v) = %v, want %v", tc.name, tc.xs, got, tc.want)
		}
	}
}

func row(key string, rep int, bs int64, bw, p99 float64, status string) results.Row {
	r := results.Row{PointKey: key, Repetition: rep, Status: status, Params: map[string]string{"block_size": fmt.Sprint(bs), "transport": "tcp", "queue_depth": "16"}}
	if status == results.StatusOK {
		p50, iops := p99/2, bw
		r.BandwidthMBs, r.LatP99Us, r.LatP50Us, r.IOPS = &bw, &p99, &p50, &iops
	}
	return r
}

func TestWriteGroupsByKeyWithMeanSDAndFlags(t *testing.T) {
	rows := []results.Row{
		row("a", 1, 4096, 100, 10, "ok"),
		row("b", 1, 1<<20, 1000, 50, "ok"),
		row("a", 2, 4096, 102, 10, "ok"),
		row("a", 3, 4096, 101, 10, "ok"),
		row("a", 4, 4096, 100, 10, "ok"),
		row("a", 5, 4096, 20, 10, "ok"), // stands out
		row("b", 2, 1<<20, 0, 0, "failed"),
	}
	groups := Build(rows)
	if len(groups) != 2 || groups[0].Key != "a" || len(groups[0].OK) != 5 || groups[1].Failed != 1 {
		t.Fatalf("groups: %+v", groups)
	}
	var out bytes.Buffer
	if err := Write(&out, groups); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("output:\n%s", out.String())
	}
	// Only block_size varies, so it is the one parameter column.
	if f := strings.Fields(lines[0]); f[0] != "BLOCK_SIZE" || f[1] != "RUNS" {
		t.Fatalf("header: %q", lines[0])
	}
	// Point a: mean 84.6, sample sd of {100,102,101,100,20} = 36.1; flagged.
	if f := strings.Fields(lines[1]); f[0] != "4KiB" || f[1] != "5" || f[2] != "84.6" || f[3] != "±36.1" || f[len(f)-1] != "!" {
		t.Fatalf("point a: %q", lines[1])
	}
	// Point b: one ok run, one failed, no sd.
	if !strings.Contains(lines[2], "1MiB") || !strings.Contains(lines[2], "1 (1 failed)") || strings.Contains(lines[2], "±") {
		t.Fatalf("point b: %q", lines[2])
	}
	if !strings.HasPrefix(lines[3], "! point a: r5 (20.0 MB/s") {
		t.Fatalf("note: %q", lines[3])
	}
}

// TestRatiosMatchEveryOtherParameter holds --baseline's rule: a point is
// compared with the baseline's point of the same other parameters (the
// hosts aside), and an older row without a workload is node's.
func TestRatiosMatchEveryOtherParameter(t *testing.T) {
	with := func(r results.Row, wl string, cpu float64) results.Row {
		r.Params["workload"] = wl
		r.CPUClient = &cpu
		return r
	}
	rows := []results.Row{
		with(row("a", 1, 4096, 100, 10, "ok"), "", 0.5),
		with(row("b", 1, 4096, 50, 10, "ok"), "iperf3", 0.25),
		with(row("c", 1, 8192, 300, 10, "ok"), "node", 0.5),
		with(row("d", 1, 8192, 100, 10, "ok"), "iperf3", 1),
		with(row("e", 1, 16384, 70, 10, "ok"), "node", 1), // no iperf3 at 16KiB
	}
	rows[3].ClientHost = "elsewhere"
	b, err := ParseBaseline("workload=iperf3")
	if err != nil {
		t.Fatal(err)
	}
	got := Match(Build(rows), b)
	if len(got) != 3 || got[0].Base == nil || got[0].Base.Key != "b" || got[1].Base.Key != "d" || got[2].Base != nil {
		t.Fatalf("matches %+v", got)
	}
	var out bytes.Buffer
	if err := WriteRatios(&out, Build(rows), b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"IPERF3_MB/S", " 2.00 ", " 3.00 ", "node / iperf3: median ratio 2.50 over 2 pairs run side by side (2.00, 3.00)", "1 points have no workload=iperf3 point"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("ratios lack %q:\n%s", want, out.String())
		}
	}
	if _, err := ParseBaseline("workload"); err == nil {
		t.Error("ParseBaseline without a value")
	}
}

// TestRatiosMatchAPeerOverWhatItDoesNotUse: a peer's row leaves empty a
// parameter it does not use (the plan expanded it once), and stands for
// node's points at every value of it; the other parameters still match.
func TestRatiosMatchAPeerOverWhatItDoesNotUse(t *testing.T) {
	with := func(r results.Row, wl, pipeline string) results.Row {
		r.Params["workload"], r.Params["pipeline"] = wl, pipeline
		return r
	}
	rows := []results.Row{
		with(row("a", 1, 65536, 100, 10, "ok"), "node", "false"),
		with(row("b", 1, 65536, 150, 10, "ok"), "node", "true"),
		with(row("c", 1, 65536, 50, 10, "ok"), "nvmeof", ""),
		with(row("d", 1, 4096, 20, 10, "ok"), "node", "true"),
		with(row("e", 1, 8192, 20, 10, "ok"), "nvmeof", ""), // another block size
	}
	got := Match(Build(rows), Baseline{Param: "workload", Value: "nvmeof"})
	if len(got) != 3 || got[0].Base == nil || got[0].Base.Key != "c" || got[1].Base == nil || got[1].Base.Key != "c" || got[2].Base != nil {
		t.Fatalf("matches %+v", got)
	}
	// node as the baseline: the peer's point is read beside node's first
	// point at its block size, whatever node's pipeline.
	got = Match(Build(rows), Baseline{Param: "workload", Value: "node"})
	if len(got) != 2 || got[0].Base == nil || got[0].Base.Key != "a" || got[1].Base != nil {
		t.Fatalf("node baseline: matches %+v", got)
	}
}

// Beside a fio baseline, node's reads of the file are shown against
// fio's bandwidth: the pinned registration (REG) and the populate (POP),
// each only when some row has it.
func TestRatiosShowFileReadsBesideFio(t *testing.T) {
	rate := func(x float64) *float64 { return &x }
	node := func(key string, pop string, reg, populate *float64) results.Row {
		r := row(key, 1, 262144, 30, 10, "ok")
		r.Params["workload"], r.Params["populate"] = "node", pop
		r.RegistrationMBs, r.PopulateMBs = reg, populate
		return r
	}
	fio := func(key, pop string) results.Row {
		r := row(key, 1, 262144, 200, 10, "ok")
		r.Params["workload"], r.Params["populate"] = "fio", pop
		return r
	}
	b, err := ParseBaseline("workload=fio")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		rows       []results.Row
		want, lack []string
	}{
		{"fault only", []results.Row{node("a", "fault", rate(150), nil), fio("b", "fault")},
			[]string{"REG_MB/S", "REG/FIO", " 0.75"}, []string{"POP"}},
		{"both", []results.Row{node("a", "fault", rate(150), nil), fio("b", "fault"), node("c", "parallel", rate(900), rate(210)), fio("d", "parallel")},
			[]string{"REG/FIO", "POP_MB/S", "POP/FIO", " 1.05", " 4.50 "}, nil},
	} {
		var out bytes.Buffer
		if err := WriteRatios(&out, Build(c.rows), b); err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: ratios lack %q:\n%s", c.name, w, out.String())
			}
		}
		for _, l := range c.lack {
			if strings.Contains(out.String(), l) {
				t.Errorf("%s: ratios show %q:\n%s", c.name, l, out.String())
			}
		}
	}
	// fio_matched reads the file too; its row leaves populate, which it
	// does not use, empty, and stands for node's populate: parallel.
	rows := []results.Row{node("n", "parallel", nil, rate(90)), fio("m", "")}
	rows[1].Params["workload"] = "fio_matched"
	var out bytes.Buffer
	if err := WriteRatios(&out, Build(rows), Baseline{Param: "workload", Value: "fio_matched"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "POP/FIO_MATCHED") || !strings.Contains(out.String(), " 0.45\n") {
		t.Errorf("beside fio_matched, ratios lack POP/FIO_MATCHED 0.45:\n%s", out.String())
	}
}

// summary shows BOUND_BY when rows have it: the one value a point's runs
// agree on, else each value with its count.
func TestWriteShowsBoundBy(t *testing.T) {
	with := func(r results.Row, by string) results.Row { r.BoundBy = by; return r }
	rows := []results.Row{
		with(row("a", 1, 4096, 100, 10, "ok"), "cpu_server"),
		with(row("a", 2, 4096, 100, 10, "ok"), "cpu_server"),
		with(row("b", 1, 1<<20, 1000, 50, "ok"), "link"),
		with(row("b", 2, 1<<20, 900, 50, "ok"), "unknown"),
		with(row("b", 3, 1<<20, 1000, 50, "ok"), "link"),
	}
	var out bytes.Buffer
	if err := Write(&out, Build(rows)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"BOUND_BY", "cpu_server", "link 2, unknown 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := Write(&out, Build([]results.Row{row("a", 1, 4096, 100, 10, "ok")})); err != nil || strings.Contains(out.String(), "BOUND_BY") {
		t.Errorf("rows without bound_by show the column (%v):\n%s", err, out.String())
	}
}

// TestJSON: a group's figures are its ok rows' (n, mean, sample sd,
// median, min, max), a column no ok row has is left out, the failed
// run is counted apart, and verdicts are counted over every row.
func TestJSON(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	ok := func(bw float64, verdict string) results.Row {
		return results.Row{PointKey: "k", Status: results.StatusOK, BandwidthMBs: f(bw), Verdict: verdict, Params: map[string]string{"block_size": "4096", "rate": ""}}
	}
	rows := []results.Row{ok(100, "pass"), ok(300, "fail"), ok(200, "pass"),
		{PointKey: "k", Status: results.StatusFailed, Verdict: "unknown"}}
	pts := JSON(Build(rows))
	if len(pts) != 1 {
		t.Fatalf("%d points, want 1", len(pts))
	}
	p := pts[0]
	bw, has := p.Metrics["bandwidth_mb_s"]
	if p.Runs != 3 || p.Failed != 1 || !has || bw.N != 3 || bw.Mean != 200 || bw.SD != 100 || bw.Median != 200 || bw.Min != 100 || bw.Max != 300 {
		t.Errorf("runs %d, failed %d, bandwidth %+v; want 3, 1 and n 3, mean 200, sd 100, median 200, 100..300", p.Runs, p.Failed, bw)
	}
	if _, has := p.Metrics["iops"]; has {
		t.Error("iops, which no row has, is in the figures")
	}
	if p.Verdicts["pass"] != 2 || p.Verdicts["fail"] != 1 || p.Verdicts["unknown"] != 1 {
		t.Errorf("verdicts %v, want pass 2, fail 1, unknown 1 (the failed run's)", p.Verdicts)
	}
	if p.Params["block_size"] != "4096" || len(p.Params) != 1 {
		t.Errorf("params %v, want block_size 4096 alone (an empty cell left out)", p.Params)
	}
}

// TestRatiosOfAMetric: --metric compares that column, not bandwidth: the
// header names it, the ratio and the pairs' median are of it, and the
// file reads beside fio stay against fio's bandwidth.
func TestRatiosOfAMetric(t *testing.T) {
	rate := func(x float64) *float64 { return &x }
	with := func(workload string, bw float64, e2e *float64, reg *float64) results.Row {
		r := row("k-"+workload, 1, 262144, bw, 10, "ok")
		r.Params["workload"], r.EndToEndMBs, r.RegistrationMBs = workload, e2e, reg
		return r
	}
	rows := []results.Row{with("node", 400, rate(150), rate(100)), with("fio", 200, rate(300), nil)}
	var out bytes.Buffer
	if err := WriteRatios(&out, Build(rows), Baseline{Param: "workload", Value: "fio", Metric: "end_to_end_mb_s"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"END_TO_END_MB_S", "FIO_END_TO_END_MB_S", " 0.50 ", "node / fio: median ratio of end_to_end_mb_s 0.50 over 1 pairs", "REG/FIO", " 0.50\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--metric end_to_end_mb_s: ratios lack %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), " 2.00 ") {
		t.Errorf("--metric end_to_end_mb_s: the bandwidth ratio 2.00 shown:\n%s", out.String())
	}
}

// TestRatiosDefaultToEndToEndWhenCold: without --metric, pairs of cold
// rows that all have end_to_end_mb_s are compared on it (the file's way
// from the disk, not node's READs from memory); one warm row among them
// keeps bandwidth.
func TestRatiosDefaultToEndToEndWhenCold(t *testing.T) {
	rate := func(x float64) *float64 { return &x }
	with := func(workload, cache string, bw, e2e float64) results.Row {
		r := row("k-"+workload+cache, 1, 262144, bw, 10, "ok")
		r.Params["workload"], r.Params["cache"], r.EndToEndMBs = workload, cache, rate(e2e)
		return r
	}
	b := Baseline{Param: "workload", Value: "fio"}
	var out bytes.Buffer
	if err := WriteRatios(&out, Build([]results.Row{with("node", "cold", 900, 150), with("fio", "cold", 300, 300)}), b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "median ratio of end_to_end_mb_s 0.50") {
		t.Errorf("cold pairs: not compared on end_to_end_mb_s:\n%s", out.String())
	}
	out.Reset()
	if err := WriteRatios(&out, Build([]results.Row{with("node", "cold", 900, 150), with("fio", "cold", 300, 300), with("node", "warm", 900, 150), with("fio", "warm", 300, 300)}), b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "node / fio: median ratio 3.00") || strings.Contains(out.String(), "end_to_end") {
		t.Errorf("cold and warm pairs: not compared on bandwidth:\n%s", out.String())
	}
}
