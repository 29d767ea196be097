package workload

import "testing"

func TestPermutationIsSeededShuffle(t *testing.T) {
	const n = 1000
	p := Permutation(n, 99)
	seen := make([]bool, n)
	inPlace := 0
	for i, b := range p {
		if b < 0 || b >= n || seen[b] {
			t.Fatalf("index %d: block %d repeated or out of range", i, b)
		}
		seen[b] = true
		if b == int64(i) {
			inPlace++
		}
	}
	if inPlace > n/10 {
		t.Fatalf("%d of %d blocks left in place: not shuffled", inPlace, n)
	}
	q := Permutation(n, 99)
	r := Permutation(n, 100)
	same, diff := true, false
	for i := range p {
		same = same && p[i] == q[i]
		diff = diff || p[i] != r[i]
	}
	if !same || !diff {
		t.Fatalf("same seed same order: %v; other seed other order: %v", same, diff)
	}
}

func TestOrderWrapsPasses(t *testing.T) {
	o, err := New("random", 5, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 5; i++ {
		if o.Block(i) != o.Block(i+5) {
			t.Fatal("second pass differs from the first")
		}
	}
	s, _ := New("sequential", 4, 0)
	for i := int64(0); i < 9; i++ {
		if s.Block(i) != i%4 {
			t.Fatalf("sequential read %d at block %d", i, s.Block(i))
		}
	}
	if _, err := New("zigzag", 4, 0); err == nil {
		t.Fatal("unknown pattern accepted")
	}
	if _, err := New("sequential", 0, 0); err == nil {
		t.Fatal("empty region accepted")
	}
}
