package fleet

import (
	"fmt"
	"testing"
)

// checkRounds holds a schedule to its properties: every link of the
// topology in exactly one round, nothing else, no host twice in a round,
// no round over max pairs, and no round empty.
func checkRounds(t *testing.T, n int, topo Topology, rounds []Round, max int) {
	t.Helper()
	want := map[Pair]bool{}
	for _, p := range Links(n, topo) {
		want[p] = true
	}
	seen := map[Pair]int{}
	for i, r := range rounds {
		if len(r) == 0 {
			t.Errorf("round %d is empty", i)
		}
		if max > 0 && len(r) > max {
			t.Errorf("round %d has %d pairs, over the cap of %d", i, len(r), max)
		}
		busy := map[int]bool{}
		for _, p := range r {
			if p.Server == p.Client || p.Server < 0 || p.Client < 0 || p.Server >= n || p.Client >= n {
				t.Fatalf("round %d: pair %v is not a link of %d hosts", i, p, n)
			}
			if busy[p.Server] || busy[p.Client] {
				t.Errorf("round %d: pair %v shares a host with another pair of the round %v", i, p, r)
			}
			busy[p.Server], busy[p.Client] = true, true
			seen[p]++
		}
	}
	for p := range want {
		if seen[p] != 1 {
			t.Errorf("link %v is in %d rounds, want 1", p, seen[p])
		}
	}
	for p := range seen {
		if !want[p] {
			t.Errorf("pair %v is not a link of the %s topology", p, topo)
		}
	}
}

func TestPairwiseCircle(t *testing.T) {
	for n := 2; n <= 64; n++ {
		rounds, err := Schedule(n, Options{Topology: Pairwise})
		if err != nil {
			t.Fatal(err)
		}
		checkRounds(t, n, Pairwise, rounds, 0)
		wantRounds, wantSize := 2*(n-1), n/2
		if n%2 == 1 {
			wantRounds = 2 * n
		}
		if len(rounds) != wantRounds {
			t.Errorf("n=%d: %d rounds, want %d", n, len(rounds), wantRounds)
		}
		for i, r := range rounds {
			if len(r) != wantSize {
				t.Errorf("n=%d: round %d has %d pairs, want %d", n, i, len(r), wantSize)
			}
		}
		if t.Failed() {
			t.Fatalf("n=%d: %v", n, rounds)
		}
	}
}

func TestPairwiseOneAtATime(t *testing.T) {
	for n := 2; n <= 64; n++ {
		rounds, err := Schedule(n, Options{Topology: Pairwise, PairwiseParallel: 1})
		if err != nil {
			t.Fatal(err)
		}
		checkRounds(t, n, Pairwise, rounds, 1)
		if len(rounds) != n*(n-1) {
			t.Fatalf("n=%d: %d rounds, want n(n−1) = %d", n, len(rounds), n*(n-1))
		}
	}
}

func TestMaxParallel(t *testing.T) {
	for n := 2; n <= 64; n++ {
		for _, k := range []int{1, 2, 3, 7, 32, 100} {
			for _, topo := range []Topology{Pairwise, Ring} {
				t.Run(fmt.Sprintf("%s/n=%d/k=%d", topo, n, k), func(t *testing.T) {
					rounds, err := Schedule(n, Options{Topology: topo, MaxParallel: k})
					if err != nil {
						t.Fatal(err)
					}
					checkRounds(t, n, topo, rounds, k)
					uncapped, _ := Schedule(n, Options{Topology: topo})
					// Each uncapped round splits into ceil(size/k) rounds
					// whose sizes differ by at most one.
					i := 0
					for _, u := range uncapped {
						parts := (len(u) + k - 1) / k
						for range parts {
							if i >= len(rounds) {
								t.Fatalf("%d rounds, fewer than the split of the uncapped ones", len(rounds))
							}
							if d := len(rounds[i]) - len(u)/parts; d < 0 || d > 1 {
								t.Errorf("round %d has %d pairs; a round of %d split in %d has %d or %d", i, len(rounds[i]), len(u), parts, len(u)/parts, len(u)/parts+1)
							}
							i++
						}
					}
					if i != len(rounds) {
						t.Errorf("%d rounds, want %d", len(rounds), i)
					}
				})
			}
		}
	}
}

func TestPairwiseParallelUnderCap(t *testing.T) {
	// The smaller of the two wins.
	a, _ := Schedule(10, Options{Topology: Pairwise, PairwiseParallel: 2, MaxParallel: 4})
	b, _ := Schedule(10, Options{Topology: Pairwise, PairwiseParallel: 4, MaxParallel: 2})
	checkRounds(t, 10, Pairwise, a, 2)
	checkRounds(t, 10, Pairwise, b, 2)
	if len(a) != len(b) || len(a) != 18*3 {
		t.Fatalf("%d and %d rounds, want 54 each", len(a), len(b))
	}
}

func TestRing(t *testing.T) {
	for n := 2; n <= 64; n++ {
		rounds, err := Schedule(n, Options{Topology: Ring})
		if err != nil {
			t.Fatal(err)
		}
		checkRounds(t, n, Ring, rounds, 0)
		want := 2
		if n%2 == 1 {
			want = 3
		}
		if len(rounds) != want {
			t.Fatalf("n=%d: %d rounds, want %d: %v", n, len(rounds), want, rounds)
		}
	}
	links := Links(4, Ring)
	if got := fmt.Sprint(links); got != "[0←1 1←2 2←3 3←0]" {
		t.Fatalf("ring links of 4 hosts: %s, want host i reading from host i+1", got)
	}
}

func TestScheduleRefuses(t *testing.T) {
	for _, tc := range []struct {
		n int
		o Options
	}{
		{1, Options{Topology: Pairwise}},
		{0, Options{Topology: Ring}},
		{4, Options{Topology: "fan-in"}},
		{4, Options{Topology: Pairwise, MaxParallel: -1}},
	} {
		if _, err := Schedule(tc.n, tc.o); err == nil {
			t.Errorf("Schedule(%d, %+v) gave no error", tc.n, tc.o)
		}
	}
}
