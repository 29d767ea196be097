package search

import (
	"fmt"
	"testing"

	"rdmasweep/results"
)

// walk drives w with measure, a fake link: each value's repetitions get
// the figures measure gives. It returns the values probed in order and the
// final step.
func walk(t *testing.T, spec Spec, measure func(v int64, rep int) float64, start []results.Row) ([]int64, Step, []results.Row) {
	t.Helper()
	w := New(spec)
	rows := append([]results.Row(nil), start...)
	var probed []int64
	for range 200 {
		st := w.Next(rows)
		if st.Done {
			return probed, st, rows
		}
		probed = append(probed, st.Value)
		for rep := 1; rep <= max(spec.Repeat, 1); rep++ {
			rows = append(rows, row(spec, st.Value, rep, measure(st.Value, rep)))
		}
	}
	t.Fatal("the walk did not end in 200 steps")
	return nil, Step{}, nil
}

func row(spec Spec, v int64, rep int, x float64) results.Row {
	return results.Row{
		Status: results.StatusOK, Scope: results.ScopeClient, Repetition: rep,
		Params:   map[string]string{spec.Param: fmt.Sprint(v)},
		LatP99Us: &x,
	}
}

// p99 is a queue behind a shaped link: latency grows with depth.
func p99(v int64, rep int) float64 { return 40*float64(v) + float64(rep%3) }

func spec() Spec {
	return Spec{Param: "queue_depth", From: 1, To: 256, Until: Until{Metric: "lat_p99_us", AtMost: true, Limit: 500}, Repeat: 3}
}

func TestWalkFindsKnee(t *testing.T) {
	probed, st, _ := walk(t, spec(), p99, nil)
	// 40·v + {0,1,2}: the median is 40·v+1, ≤ 500 up to v = 12.
	if !st.Found || st.Knee != 12 {
		t.Fatalf("knee %+v, want 12 (probed %v)", st, probed)
	}
	want := []int64{1, 2, 4, 8, 16, 12, 14, 13}
	if fmt.Sprint(probed) != fmt.Sprint(want) {
		t.Errorf("probed %v, want %v", probed, want)
	}
	if b := MaxProbes(spec()); len(probed) > b {
		t.Errorf("%d probes, more than the bound %d", len(probed), b)
	}
}

func TestWalkKneeIsTo(t *testing.T) {
	_, st, _ := walk(t, spec(), func(int64, int) float64 { return 1 }, nil)
	if !st.Found || st.Knee != 256 {
		t.Errorf("always under the target: knee %+v, want to (256)", st)
	}
}

func TestWalkFailsAtFrom(t *testing.T) {
	probed, st, _ := walk(t, spec(), func(int64, int) float64 { return 1e6 }, nil)
	if st.Found || len(probed) != 1 {
		t.Errorf("over the target at from: %+v after %v, want no knee after one probe", st, probed)
	}
}

func TestWalkAtLeastAndResolution(t *testing.T) {
	// The largest block size whose bandwidth stays at least 100: falls
	// past 1000 bytes; resolution 64.
	s := Spec{Param: "block_size", From: 64, To: 1 << 20, Until: Until{Metric: "lat_p99_us", Limit: 100}, Resolution: 64, Repeat: 1}
	probed, st, _ := walk(t, s, func(v int64, _ int) float64 { return 100 * 1000 / float64(v) }, nil)
	if !st.Found || st.Knee != 960 {
		t.Errorf("knee %+v after %v, want 960 (the largest multiple of 64 steps under 1000)", st, probed)
	}
}

func TestWalkResumesFromRows(t *testing.T) {
	_, _, rows := walk(t, spec(), p99, nil)
	// Half of the rows are in the CSV; the rest are probed, none twice.
	half := rows[:len(rows)/2]
	probed, st, _ := walk(t, spec(), p99, half)
	if st.Knee != 12 {
		t.Errorf("resumed knee %d, want 12", st.Knee)
	}
	seen := map[int64]bool{}
	for _, r := range half {
		seen[r.ParamInt("queue_depth")] = true
	}
	for _, v := range probed {
		if seen[v] && v != half[len(half)-1].ParamInt("queue_depth") {
			t.Errorf("resume probed %d again, which the CSV has", v)
		}
	}
	if len(probed)+len(half)/3 > 9 {
		t.Errorf("resumed walk probed %v after %d rows", probed, len(half))
	}
}

func TestMarkAndBound(t *testing.T) {
	_, st, rows := walk(t, spec(), p99, nil)
	Mark(rows, "queue_depth", st)
	knees := 0
	for _, r := range rows {
		if r.Search == results.SearchKnee {
			knees++
			if r.ParamInt("queue_depth") != 12 {
				t.Errorf("knee row at %s", r.Param("queue_depth"))
			}
		} else if r.Search != results.SearchProbe {
			t.Errorf("row without a search mark: %q", r.Search)
		}
	}
	if knees != 3 {
		t.Errorf("%d knee rows, want the 3 repetitions", knees)
	}
	for _, tc := range []struct {
		s    Spec
		want int
	}{
		{Spec{From: 1, To: 256}, 9 + 7},
		{Spec{From: 1, To: 1}, 1},
		{Spec{From: 1, To: 2}, 2},
		{Spec{From: 64, To: 1 << 20, Resolution: 64}, 15 + 13},
	} {
		if got := MaxProbes(tc.s); got != tc.want {
			t.Errorf("MaxProbes(%+v) = %d, want %d", tc.s, got, tc.want)
		}
	}
}

// TestWalkIsExact checks, for every target, that the knee is the largest
// value whose median meets it (the fake is monotone), the probe just
// above the knee fails, and the probes stay within the bound.
func TestWalkIsExact(t *testing.T) {
	for limit := 1.0; limit < 12000; limit += 37 {
		s := spec()
		s.Until.Limit = limit
		probed, st, rows := walk(t, s, p99, nil)
		want := int64((limit - 1) / 40)
		if want > 256 {
			want = 256
		}
		if want < 1 {
			if st.Found {
				t.Errorf("limit %v: knee %d, want none", limit, st.Knee)
			}
			continue
		}
		if !st.Found || st.Knee != want {
			t.Errorf("limit %v: knee %+v, want %d", limit, st, want)
		}
		if len(probed) > MaxProbes(s) {
			t.Errorf("limit %v: %d probes, bound %d", limit, len(probed), MaxProbes(s))
		}
		if want < 256 {
			above := false
			for _, r := range rows {
				above = above || r.ParamInt("queue_depth") == want+1
			}
			if !above {
				t.Errorf("limit %v: the value above the knee (%d) was never probed", limit, want+1)
			}
		}
	}
}

// TestWalkJudgesTheMedian gives each value's three repetitions different
// figures: a first run 600 µs over the rest, a last one 300 µs under. Only
// the median (40·v) puts the knee at 12; the first run has none, the mean
// (40·v + 100) puts it at 10, and the last (40·v − 300) at 20.
func TestWalkJudgesTheMedian(t *testing.T) {
	spread := func(v int64, rep int) float64 {
		base := 40 * float64(v)
		switch rep {
		case 1:
			return base + 600
		case 3:
			return base - 300
		}
		return base
	}
	probed, st, _ := walk(t, spec(), spread, nil)
	if !st.Found || st.Knee != 12 {
		t.Fatalf("knee %+v after %v, want 12, where the median of each value's runs crosses 500", st, probed)
	}
}
