package fleet

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"rdmasweep/results"
)

// rows makes CSV rows of a pool sweep from samples, each in its round.
func rows(samples []Sample, cells map[string]string) []results.Row {
	var out []results.Row
	for i, s := range samples {
		round := int64(i/3 + 1)
		r := results.Row{Plan: "p", ServerHost: s.Server, ClientHost: s.Client, Status: results.StatusOK, Scope: results.ScopeClient, Round: &round, Params: cells}
		if s.OK {
			bw := s.MBs
			r.BandwidthMBs = &bw
		} else {
			r.Status, r.Error = results.StatusFailed, s.Error
		}
		out = append(out, r)
	}
	return out
}

func TestReport(t *testing.T) {
	slow := func(s, c string) float64 {
		if s == "h2" || c == "h2" {
			return 0.25
		}
		return 1
	}
	small := map[string]string{"block_size": "65536", "transport": "tcp"}
	big := map[string]string{"block_size": "1048576", "transport": "tcp"}
	in := append(rows(pool(6, 2, 0.03, 1, slow), small), rows(pool(6, 2, 0.03, 2, healthy), big)...)
	in = append(in, results.Row{Plan: "p", ServerHost: "x", ClientHost: "y", Status: results.StatusOK}) // not a pool row
	points := FromRows(in, JudgeOptions{})
	if len(points) != 2 || points[0].Point != "block_size=64KiB" || points[1].Point != "block_size=1MiB" {
		t.Fatalf("points %+v, want one per block size, named by it", points)
	}
	if got := suspectHosts(points[0].Judgment); len(got) != 1 || got[0] != "h2" || len(points[1].Suspects) != 0 {
		t.Fatalf("suspects %v and %v, want h2 at 64KiB and none at 1MiB", got, suspectHosts(points[1].Judgment))
	}
	var text bytes.Buffer
	if err := WriteText(&text, points); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"point block_size=64KiB", `server\client`, "suspects: 1\n  h2", "10 of 10 links slow", "    h2 → h1", "slow links: 0", "unreachable: 0"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "one read each") {
		t.Errorf("text says links were read once; each was read twice:\n%s", text.String())
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, points[:1]); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Links, SlowLinks []map[string]any
		Suspects         []struct {
			Host        string  `json:"host"`
			SlowLinks   int     `json:"slow_links"`
			Links       int     `json:"links"`
			MedianRatio float64 `json:"median_ratio"`
		}
		Unreachable []any
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, js.String())
	}
	if len(got.Links) != 30 || len(got.Suspects) != 1 || got.Suspects[0].Host != "h2" || got.Suspects[0].SlowLinks != 10 || got.Suspects[0].Links != 10 || got.Unreachable == nil {
		t.Fatalf("json %+v:\n%s", got, js.String())
	}
	for _, k := range []string{`"links":`, `"slow_links": [`, `"suspects":`, `"unreachable": []`} {
		if !strings.Contains(js.String(), k) {
			t.Errorf("json lacks %s:\n%s", k, js.String())
		}
	}
}

// A suspect whose slow links were each read once is named with a caution:
// one busy second of its host makes the same figures.
func TestReportSuspectReadOnce(t *testing.T) {
	slow := func(s, c string) float64 {
		if s == "h2" {
			return 0.3
		}
		return 1
	}
	points := FromRows(rows(pool(6, 1, 0.03, 3, slow), nil), JudgeOptions{})
	var text bytes.Buffer
	if err := WriteText(&text, points); err != nil {
		t.Fatal(err)
	}
	if want := "5 of these slow links are one read each"; !strings.Contains(text.String(), want) {
		t.Errorf("text lacks %q:\n%s", want, text.String())
	}

	// Two suspects share the links between them: each is counted once.
	two := func(s, c string) float64 {
		if s == "h2" || s == "h5" {
			return 0.3
		}
		return 1
	}
	points = FromRows(rows(pool(6, 1, 0.03, 3, two), nil), JudgeOptions{})
	text.Reset()
	if err := WriteText(&text, points); err != nil {
		t.Fatal(err)
	}
	if got := suspectHosts(points[0].Judgment); len(got) != 2 {
		t.Fatalf("suspects %v, want h2 and h5", got)
	}
	if want := "10 of these slow links are one read each"; !strings.Contains(text.String(), want) {
		t.Errorf("text lacks %q:\n%s", want, text.String())
	}
}

// A round run again without a failed pair has fewer pairs reading at once,
// so its rows' clients cell differs: it is still the same point.
func TestReportOnePointWhateverTheRoundsClients(t *testing.T) {
	three := map[string]string{"block_size": "65536", "clients": "3"}
	two := map[string]string{"block_size": "65536", "clients": "2"}
	samples := pool(6, 1, 0.03, 1, healthy)
	in := append(rows(samples[:27], three), rows(samples[27:], two)...)
	points := FromRows(in, JudgeOptions{})
	if len(points) != 1 || points[0].Point != "" || len(points[0].Links) != 30 {
		t.Fatalf("%d points (%+v), want one of 30 links", len(points), points)
	}
}
