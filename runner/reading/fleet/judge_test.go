package fleet

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// pool makes the samples of a pairwise sweep of n hosts, reps rows a link,
// each at 1000 MB/s times factor(server, client) with normal noise of sd
// noise (a fraction), from seed.
func pool(n, reps int, noise float64, seed uint64, factor func(s, c string) float64) []Sample {
	rng := rand.New(rand.NewPCG(seed, 21))
	var out []Sample
	for rep := 0; rep < reps; rep++ {
		rounds, _ := Schedule(n, Options{Topology: Pairwise})
		for _, r := range rounds {
			for _, p := range r {
				s, c := host(p.Server), host(p.Client)
				mbs := 1000 * factor(s, c) * (1 + noise*rng.NormFloat64())
				out = append(out, Sample{Server: s, Client: c, MBs: mbs, OK: true})
			}
		}
	}
	return out
}

func host(i int) string { return fmt.Sprintf("h%d", i+1) }

func healthy(s, c string) float64 { return 1 }

func suspectHosts(j Judgment) []string {
	var hs []string
	for _, s := range j.Suspects {
		hs = append(hs, s.Host)
	}
	return hs
}

func TestJudgeSlowHost(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		slow := host(int(seed % 6))
		j := Judge(pool(6, 3, 0.03, seed, func(s, c string) float64 {
			if s == slow || c == slow {
				return 0.25
			}
			return 1
		}), JudgeOptions{})
		if got := suspectHosts(j); !slices.Equal(got, []string{slow}) {
			t.Fatalf("seed %d: suspects %v, want only %s\n%s", seed, got, slow, dump(j))
		}
		s := j.Suspects[0]
		if s.SlowLinks != 10 || s.Links != 10 || s.MedianRatio < 0.2 || s.MedianRatio > 0.3 {
			t.Errorf("seed %d: suspect %+v, want 10 of 10 links slow at a ratio near 0.25", seed, s)
		}
		if len(j.SlowLinks) != 10 {
			t.Errorf("seed %d: %d slow links, want the suspect's 10", seed, len(j.SlowLinks))
		}
		if j.Rule != "0.8 × median" {
			t.Errorf("seed %d: threshold by %q, want 0.8 × median (3%% noise gives a small MAD)", seed, j.Rule)
		}
	}
}

// A host slow only when it serves (its NIC's transmit side) is slow in
// one role only: half its links, all of one role's.
func TestJudgeSlowServerSide(t *testing.T) {
	j := Judge(pool(6, 3, 0.03, 7, func(s, c string) float64 {
		if s == "h4" {
			return 0.5
		}
		return 1
	}), JudgeOptions{})
	if got := suspectHosts(j); !slices.Equal(got, []string{"h4"}) {
		t.Fatalf("suspects %v, want h4\n%s", got, dump(j))
	}
	if s := j.Suspects[0]; s.SlowLinks != 5 || s.Links != 10 {
		t.Fatalf("suspect %+v, want 5 of 10 links slow", s)
	}
}

func TestJudgeSlowLink(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		j := Judge(pool(6, 3, 0.03, seed, func(s, c string) float64 {
			if s == "h2" && c == "h5" {
				return 0.25
			}
			return 1
		}), JudgeOptions{})
		if len(j.Suspects) != 0 {
			t.Fatalf("seed %d: suspects %v, want none for one slow link\n%s", seed, suspectHosts(j), dump(j))
		}
		if len(j.SlowLinks) != 1 || j.SlowLinks[0].Server != "h2" || j.SlowLinks[0].Client != "h5" {
			t.Fatalf("seed %d: slow links %+v, want h2 → h5 alone", seed, j.SlowLinks)
		}
	}
}

// A slow cable is slow both ways: two slow links between the same two
// hosts are one link's fault, not a host's.
func TestJudgeSlowCable(t *testing.T) {
	j := Judge(pool(6, 3, 0.03, 3, func(s, c string) float64 {
		if (s == "h1" && c == "h3") || (s == "h3" && c == "h1") {
			return 0.25
		}
		return 1
	}), JudgeOptions{})
	if len(j.Suspects) != 0 || len(j.SlowLinks) != 2 {
		t.Fatalf("suspects %v and %d slow links, want none and 2\n%s", suspectHosts(j), len(j.SlowLinks), dump(j))
	}
	// With two hosts, whichever is bad cannot be told from the link.
	j = Judge(pool(2, 3, 0.03, 3, func(s, c string) float64 { return 0.25 }), JudgeOptions{SlowBelow: 900})
	if len(j.Suspects) != 0 || len(j.SlowLinks) != 2 {
		t.Fatalf("two hosts: suspects %v and %d slow links, want none and 2", suspectHosts(j), len(j.SlowLinks))
	}
}

func TestJudgeHealthy(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		for _, n := range []int{3, 6, 16} {
			j := Judge(pool(n, 3, 0.03, seed, healthy), JudgeOptions{})
			if len(j.Suspects)+len(j.SlowLinks)+len(j.Unreachable) != 0 {
				t.Fatalf("seed %d, %d hosts: a healthy pool named %v, %d slow links, %v unreachable\n%s",
					seed, n, suspectHosts(j), len(j.SlowLinks), j.Unreachable, dump(j))
			}
		}
	}
}

func TestJudgeExpect(t *testing.T) {
	samples := pool(4, 3, 0.03, 9, healthy)
	if j := Judge(samples, JudgeOptions{SlowBelow: 2000}); len(j.SlowLinks) != 12 || j.Rule != "slow-below" {
		t.Fatalf("expect 2000 MB/s of a 1000 MB/s pool: %d slow links by %q, want all 12 by expect", len(j.SlowLinks), j.Rule)
	}
	// Every host is then slow everywhere, and every host suspect: an
	// expectation is absolute.
	if j := Judge(samples, JudgeOptions{SlowBelow: 2000}); len(j.Suspects) != 4 {
		t.Fatalf("expect 2000 MB/s: suspects %v, want all 4", suspectHosts(j))
	}
	if j := Judge(samples, JudgeOptions{SlowBelow: 500}); len(j.SlowLinks) != 0 {
		t.Fatalf("expect 500 MB/s: %d slow links, want none", len(j.SlowLinks))
	}
}

func TestJudgeDeadHost(t *testing.T) {
	for _, dieAt := range []int{0, 10} { // dead from the start; dead after 10 rows
		samples := pool(6, 2, 0.03, 4, healthy)
		n := 0
		for i := range samples {
			s := &samples[i]
			if s.Server != "h3" && s.Client != "h3" {
				continue
			}
			if n++; n <= dieAt {
				continue
			}
			s.OK, s.MBs = false, 0
			if s.Server == "h3" {
				s.Error = "server (h3): connect: dial tcp 198.18.18.4:22: connect: connection refused"
			} else {
				s.Error = "client (h3): run: ssh: lost connection"
			}
		}
		j := Judge(samples, JudgeOptions{})
		if len(j.Unreachable) != 1 || j.Unreachable[0].Host != "h3" || j.Unreachable[0].Failed != 2*10-dieAt {
			t.Fatalf("dead after %d rows: unreachable %+v, want h3 with %d failed rows", dieAt, j.Unreachable, 20-dieAt)
		}
		if len(j.Suspects)+len(j.SlowLinks) != 0 {
			t.Fatalf("dead after %d rows: suspects %v, %d slow links; want none: a dead host's links have no figure", dieAt, suspectHosts(j), len(j.SlowLinks))
		}
		measured := 0
		for _, l := range j.Links {
			if l.Measured() {
				measured++
			}
		}
		if want := 20; dieAt == 0 && measured != want {
			t.Fatalf("%d links measured, want the other hosts' %d", measured, want)
		}
	}
}

// A host that failed and then came back, or a node error, is not
// unreachable.
func TestJudgeNotUnreachable(t *testing.T) {
	samples := pool(4, 2, 0.03, 5, healthy)
	samples[0].OK, samples[0].Error = false, "server ("+samples[0].Server+"): connect: connection refused"
	for i := range samples {
		if samples[i].Client == "h2" {
			samples[i].OK, samples[i].Error = false, "client (h2): run: node: verify: byte 4096 differs"
		}
	}
	if j := Judge(samples, JudgeOptions{}); len(j.Unreachable) != 0 {
		t.Fatalf("unreachable %+v, want none", j.Unreachable)
	}
}

func TestJudgeJSON(t *testing.T) {
	samples := []Sample{
		{Server: "a", Client: "b", MBs: 1000, OK: true},
		{Server: "b", Client: "a", Error: "server (b): connect: connection refused"},
	}
	out, err := json.Marshal(Judge(samples, JudgeOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"median_mb_s":1000.0`, `"median_mb_s":null`, `"ratio":null`, `"unreachable":[{"host":"b","failed_rows":1,`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("json lacks %s:\n%s", want, out)
		}
	}
}

func TestNaturalOrder(t *testing.T) {
	hs := []string{"h10", "h2", "h1", "node-02", "node-1", "a"}
	slices.SortFunc(hs, naturalCompare)
	if got := strings.Join(hs, " "); got != "a h1 h2 h10 node-1 node-02" {
		t.Fatalf("natural order: %s", got)
	}
}

func dump(j Judgment) string {
	b, _ := json.MarshalIndent(j, "", "  ")
	return string(b)
}

// TestJudgeMADRegime is a pool whose links spread widely: the median is
// 980, the MAD 95, so median − 3 × MAD (695) lies under 0.8 × median
// (784) and sets the threshold. The link at 750 is one of the spread, not
// slow; only the one at 200 is.
func TestJudgeMADRegime(t *testing.T) {
	mbs := []float64{200, 750, 880, 900, 930, 960, 1000, 1040, 1070, 1100, 1120, 1150}
	var samples []Sample
	for s := range 4 {
		for c := range 4 {
			if s != c {
				samples = append(samples, Sample{Server: host(s), Client: host(c), MBs: mbs[len(samples)], OK: true})
			}
		}
	}
	j := Judge(samples, JudgeOptions{})
	if j.Rule != "median - 3 × MAD" || float64(j.Threshold) != 695 || float64(j.MedianMBs) != 980 || float64(j.MADMBs) != 95 {
		t.Fatalf("threshold %v by %q (median %v, MAD %v), want 695 by median - 3 × MAD (980, 95)", j.Threshold, j.Rule, j.MedianMBs, j.MADMBs)
	}
	if len(j.SlowLinks) != 1 || j.SlowLinks[0].MBs != 200 {
		t.Fatalf("slow links %+v, want the one at 200 alone (750 is within 3 MADs)", j.SlowLinks)
	}
}

// In a pool of five, each host serves four links. A host is suspect when
// more than half of its links in one role are slow: two of four, exactly
// half, are not enough; three are.
func TestJudgeSuspectNeedsMoreThanHalf(t *testing.T) {
	for _, tc := range []struct {
		slowTo  []string
		suspect bool
	}{
		{[]string{"h2", "h3"}, false},
		{[]string{"h2", "h3", "h4"}, true},
	} {
		j := Judge(pool(5, 1, 0, 1, func(s, c string) float64 {
			if s == "h1" && slices.Contains(tc.slowTo, c) {
				return 0.25
			}
			return 1
		}), JudgeOptions{})
		if len(j.SlowLinks) != len(tc.slowTo) {
			t.Fatalf("h1 slow to %v: %d slow links, want %d\n%s", tc.slowTo, len(j.SlowLinks), len(tc.slowTo), dump(j))
		}
		if got := suspectHosts(j); (len(got) == 1 && got[0] == "h1") != tc.suspect || len(got) > 1 {
			t.Errorf("h1 slow as server to %v of its 4 clients: suspects %v, want h1 named %v", tc.slowTo, got, tc.suspect)
		}
	}
}
