// Package fleet is a sweep over a whole pool of hosts: which pairs run
// together (the schedule) and, from their rows, which link or host is bad
// (the judgment).
//
// The schedule is a value: Schedule is a pure function from a number of
// hosts to rounds, and the runner runs the rounds as it runs points. In a
// round each host plays at most one role, so every link measured in a round
// is alone on its two hosts while the fabric carries the round's other
// flows at the same time.
package fleet

import "fmt"

// Topology is how the hosts of a pool are paired.
type Topology string

const (
	// Pairwise measures every ordered pair of distinct hosts: N(N−1) links.
	Pairwise Topology = "pairwise"
	// Ring measures host i reading from host i+1 (the last from the
	// first): N links.
	Ring Topology = "ring"
)

// Pair is one link measured: the host Client reads from the host Server.
// Both are indices into the pool.
type Pair struct{ Server, Client int }

func (p Pair) String() string { return fmt.Sprintf("%d←%d", p.Client, p.Server) }

// Round is the pairs that start together, at one barrier. No host is in
// two of them.
type Round []Pair

// Options shape a schedule.
type Options struct {
	Topology Topology
	// PairwiseParallel is how many pairs of a round run at once: 0 for all
	// of them (the circle method's N/2), 1 for one pair at a time, an
	// idle-fabric baseline.
	PairwiseParallel int
	// MaxParallel caps the pairs of any round, of either topology; 0 is no
	// cap. A round with more is split into rounds of nearly equal size.
	MaxParallel int
}

// Schedule returns the rounds that measure n hosts as o says. Every link
// of the topology is in exactly one round, and no host is in two pairs of
// a round.
//
// Pairwise uses the circle method: host n−1 (or, for odd n, an idle slot)
// stays put while the others rotate, giving n−1 rounds of n/2 pairs that
// meet every unordered pair once; those rounds are run once in each
// direction, so 2(n−1) rounds for even n and 2n rounds of (n−1)/2 pairs,
// each with one host idle, for odd n. Ring takes 2 rounds for even n and
// 3 for odd n (a cycle of odd length needs three colours).
func Schedule(n int, o Options) ([]Round, error) {
	if n < 2 {
		return nil, fmt.Errorf("a %s schedule needs at least 2 hosts (got %d)", o.Topology, n)
	}
	if o.PairwiseParallel < 0 || o.MaxParallel < 0 {
		return nil, fmt.Errorf("pairwise_parallel and max_parallel must not be negative (got %d, %d)", o.PairwiseParallel, o.MaxParallel)
	}
	var rounds []Round
	switch o.Topology {
	case Pairwise:
		rounds = circle(n)
	case Ring:
		rounds = ring(n)
	default:
		return nil, fmt.Errorf("unknown topology %q: a schedule is pairwise or ring", o.Topology)
	}
	limit := o.MaxParallel
	if o.Topology == Pairwise && o.PairwiseParallel > 0 && (limit == 0 || o.PairwiseParallel < limit) {
		limit = o.PairwiseParallel
	}
	return capRounds(rounds, limit), nil
}

// circle is the circle method's rounds, both directions.
func circle(n int) []Round {
	m := n
	if m%2 == 1 {
		m++ // slot m−1 is the idle host's
	}
	var half []Round
	for r := 0; r < m-1; r++ {
		var round Round
		add := func(a, b int) {
			if a >= n || b >= n {
				return // the idle slot
			}
			// Alternate which end serves, so a host is not always the
			// server in the first half.
			if (r+a+b)%2 == 0 {
				a, b = b, a
			}
			round = append(round, Pair{Server: a, Client: b})
		}
		add(r, m-1)
		for k := 1; k < m/2; k++ {
			add((r+k)%(m-1), (r-k+m-1)%(m-1))
		}
		half = append(half, round)
	}
	rounds := half
	for _, round := range half {
		back := make(Round, len(round))
		for i, p := range round {
			back[i] = Pair{Server: p.Client, Client: p.Server}
		}
		rounds = append(rounds, back)
	}
	return rounds
}

// ring is host i reading from host i+1, in rounds where no host plays
// two roles: the even clients, then the odd ones, then for odd n the last
// host, whose server is host 0 (a client in the first round).
func ring(n int) []Round {
	var even, odd, last Round
	for i := range n {
		p := Pair{Server: (i + 1) % n, Client: i}
		switch {
		case n%2 == 1 && i == n-1:
			last = append(last, p)
		case i%2 == 0:
			even = append(even, p)
		default:
			odd = append(odd, p)
		}
	}
	rounds := []Round{even, odd}
	if len(last) > 0 {
		rounds = append(rounds, last)
	}
	return rounds
}

// capRounds splits each round with more than k pairs into the fewest
// rounds of at most k, their sizes differing by at most one. k 0 is no cap.
func capRounds(rounds []Round, k int) []Round {
	if k == 0 {
		return rounds
	}
	var out []Round
	for _, r := range rounds {
		parts := (len(r) + k - 1) / k
		for i := range parts {
			out = append(out, r[i*len(r)/parts:(i+1)*len(r)/parts])
		}
	}
	return out
}

// Links is every link of the topology over n hosts, in a stable order:
// for pairwise by client, then server; for ring by client.
func Links(n int, t Topology) []Pair {
	var out []Pair
	switch t {
	case Pairwise:
		for c := range n {
			for s := range n {
				if s != c {
					out = append(out, Pair{Server: s, Client: c})
				}
			}
		}
	case Ring:
		for c := range n {
			out = append(out, Pair{Server: (c + 1) % n, Client: c})
		}
	}
	return out
}
