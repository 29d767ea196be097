package verdict

import (
	"bytes"
	"strings"
	"testing"

	"rdmasweep/plan"
	"rdmasweep/results"
)

func f(x float64) *float64 { return &x }

func row(bw, p99 float64, rate *float64, why string) results.Row {
	return results.Row{
		PointKey: "k", Status: results.StatusOK, Scope: results.ScopeClient,
		Params:       map[string]string{"block_size": "4096", "transport": "tcp"},
		BandwidthMBs: f(bw), LatP99Us: f(p99), LineRateMBs: rate, LineRateUnknown: why,
	}
}

func TestJudge(t *testing.T) {
	lineRate := plan.Expectation{Metric: "bandwidth_mb_s", AtLeast: true, Bound: 0.9, LineRate: true}
	p99 := plan.Expectation{Metric: "lat_p99_us", Bound: 4.5, Where: []plan.Where{{Param: "block_size", Op: "<=", N: 4096}}}
	bigOnly := plan.Expectation{Metric: "lat_p99_us", Bound: 1, Where: []plan.Where{{Param: "block_size", Op: ">", N: 4096}}}
	for _, tc := range []struct {
		name          string
		r             results.Row
		exps          []plan.Expectation
		verdict, want string
	}{
		{"pass", row(1200, 4, f(1250), ""), []plan.Expectation{lineRate, p99}, "pass", ""},
		{"below line rate", row(812.3, 4, f(1250), ""), []plan.Expectation{lineRate}, "fail", "bandwidth_mb_s 812.3 < 0.9 × line_rate 1250.0"},
		{"over latency", row(1200, 9.25, f(1250), ""), []plan.Expectation{p99}, "fail", "lat_p99_us 9.2 > 4.5"},
		{"loopback", row(1200, 4, nil, "loopback has no line rate"), []plan.Expectation{lineRate, p99}, "unknown", "line_rate unknown: loopback has no line rate"},
		{"fail beats unknown", row(1200, 9, nil, "loopback has no line rate"), []plan.Expectation{lineRate, p99}, "fail", "lat_p99_us 9.0 > 4.5; line_rate unknown: loopback has no line rate"},
		{"none applies", row(1200, 9, nil, ""), []plan.Expectation{bigOnly}, "", ""},
		// A figure at its bound meets it: "at least 1000" holds at 1000,
		// "at most 4.5" at 4.5.
		{"at least, at the bound", row(1000, 4, nil, ""), []plan.Expectation{{Metric: "bandwidth_mb_s", AtLeast: true, Bound: 1000}}, "pass", ""},
		{"at most, at the bound", row(1200, 4.5, nil, ""), []plan.Expectation{p99}, "pass", ""},
		{"at least, just under", row(999.9, 4, nil, ""), []plan.Expectation{{Metric: "bandwidth_mb_s", AtLeast: true, Bound: 1000}}, "fail", "bandwidth_mb_s 999.9 < 1000.0"},
		{"failed run", results.Row{Status: results.StatusFailed, Params: map[string]string{"block_size": "4096"}}, []plan.Expectation{p99}, "unknown", "lat_p99_us unknown: the run failed"},
	} {
		r := tc.r
		Judge(&r, tc.exps)
		if r.Verdict != tc.verdict || r.VerdictDetail != tc.want {
			t.Errorf("%s: got %q %q, want %q %q", tc.name, r.Verdict, r.VerdictDetail, tc.verdict, tc.want)
		}
	}
}

// TestUnjudged: a row an expectation cannot judge counts against the
// exec unless that expectation says unknown: pass; a failed row, a row
// the expectation does not apply to, and a row judged are not counted.
func TestUnjudged(t *testing.T) {
	lineRate := plan.Expectation{Metric: "bandwidth_mb_s", AtLeast: true, Bound: 0.9, LineRate: true}
	accepted := lineRate
	accepted.UnknownPasses = true
	onlyBig := lineRate
	onlyBig.Where = []plan.Where{{Param: "block_size", Op: ">", N: 4096}}
	p99 := plan.Expectation{Metric: "lat_p99_us", Bound: 4.5}
	for _, tc := range []struct {
		name string
		exps []plan.Expectation
		want int
	}{
		{"unknown: fail (the default)", []plan.Expectation{lineRate}, 2},
		{"unknown: pass", []plan.Expectation{accepted}, 0},
		{"accepted beside one that holds", []plan.Expectation{accepted, p99}, 0},
		{"not applying", []plan.Expectation{onlyBig}, 0},
	} {
		rows := []results.Row{row(1200, 4, nil, "loopback has no line rate"), row(1200, 4, nil, "loopback has no line rate"), row(1200, 4, f(1250), "")}
		JudgeRows(rows, tc.exps)
		if got := Unjudged(rows, tc.exps); got != tc.want {
			t.Errorf("%s: %d unjudged, want %d", tc.name, got, tc.want)
		}
	}
	rows := []results.Row{row(1200, 9, nil, "loopback has no line rate")}
	JudgeRows(rows, []plan.Expectation{lineRate, p99})
	if Unjudged(rows, []plan.Expectation{lineRate, p99}) != 0 || Failed(rows) != 1 {
		t.Errorf("a failed row that also has an unknown is counted failed, not unjudged")
	}
}

func TestSummary(t *testing.T) {
	rows := []results.Row{row(1200, 4, f(1250), ""), row(800, 4, f(1250), ""), row(1300, 4, f(1250), "")}
	rows[2].PointKey, rows[2].Params = "k2", map[string]string{"block_size": "65536", "transport": "tcp"}
	JudgeRows(rows, []plan.Expectation{{Metric: "bandwidth_mb_s", AtLeast: true, Bound: 1000}})
	if n := Failed(rows); n != 1 {
		t.Errorf("Failed = %d, want 1", n)
	}
	var buf bytes.Buffer
	if err := WriteSummary(&buf, rows); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"block_size=4KiB   1/2", "block_size=64KiB  1/1", "bandwidth_mb_s 800.0 < 1000.0"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, buf.String())
		}
	}
}

// TestColdVerdict: a cold row of node that the disk did not prove cold
// gets the cold verdict, with or without expectations, and the reason
// first in its detail; a failed expectation stays a fail, the reason
// added. The summary counts such rows under COLD.
func TestColdVerdict(t *testing.T) {
	cold := func(disk int64, cached float64) results.Row {
		r := row(1200, 4, f(1250), "")
		r.Params["cache"], r.Params["file_size"] = "cold", "1048576"
		r.Bytes, r.DiskReadBytes, r.CachedFraction = ptr(int64(1048576)), ptr(disk), f(cached)
		r.SetColdReadFraction()
		return r
	}
	lineRate := plan.Expectation{Metric: "bandwidth_mb_s", AtLeast: true, Bound: 0.9, LineRate: true}
	strict := plan.Expectation{Metric: "bandwidth_mb_s", AtLeast: true, Bound: 2000}
	for _, tc := range []struct {
		name          string
		r             results.Row
		exps          []plan.Expectation
		verdict, want string
	}{
		{"proven, no expectations", cold(1048576, 0), nil, "", ""},
		{"proven, passes", cold(1048576, 0), []plan.Expectation{lineRate}, "pass", ""},
		{"warm from the cache, no expectations", cold(0, 1), nil, "cold", "not proven cold: 100.0 % of the file was cached"},
		{"warm, passes otherwise", cold(1048576/2, 0), []plan.Expectation{lineRate}, "cold", "not proven cold: the disk read 0.50"},
		{"warm, and fails", cold(1048576/2, 0), []plan.Expectation{strict}, "fail", "not proven cold: the disk read 0.50 of the bytes the point brought in (at least 0.95); bandwidth_mb_s 1200.0 < 2000.0"},
	} {
		rows := []results.Row{tc.r}
		JudgeRows(rows, tc.exps)
		if r := rows[0]; r.Verdict != tc.verdict || !strings.HasPrefix(r.VerdictDetail, tc.want) {
			t.Errorf("%s: verdict %q %q, want %q %q", tc.name, r.Verdict, r.VerdictDetail, tc.verdict, tc.want)
		}
	}
	rows := []results.Row{cold(1048576, 0), cold(0, 1)}
	JudgeRows(rows, []plan.Expectation{lineRate})
	var out bytes.Buffer
	if err := WriteSummary(&out, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "UNKNOWN  COLD  DETAIL") || !strings.Contains(lines[1], "1/2   0     0        1     not proven cold") {
		t.Errorf("summary of a cold row not proven:\n%s", out.String())
	}
}

func ptr[T any](x T) *T { return &x }
