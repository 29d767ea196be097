package pattern

import (
	"encoding/binary"
	"testing"
)

// TestWordReference pins Word to an independent transcription of
// splitmix64, so the C verify loop and old files keep agreeing.
func TestWordReference(t *testing.T) {
	ref := func(seed, i uint64) uint64 {
		var z uint64 = seed + (i+1)*0x9E3779B97F4A7C15
		z ^= z >> 30
		z *= 0xBF58476D1CE4E5B9
		z ^= z >> 27
		z *= 0x94D049BB133111EB
		return z ^ z>>31
	}
	// splitmix64 seeded with 0 has a well-known first output.
	if got := Word(0, 0); got != 0xE220A8397B1DCDAF {
		t.Fatalf("Word(0,0) = %#x, want splitmix64's first output 0xe220a8397b1dcdaf", got)
	}
	for _, seed := range []uint64{0, 1, 0xdeadbeef, ^uint64(0)} {
		for i := uint64(0); i < 1000; i += 37 {
			if Word(seed, i) != ref(seed, i) {
				t.Fatalf("Word(%#x,%d) disagrees with reference", seed, i)
			}
		}
	}
}

func TestFillMatchesDefinition(t *testing.T) {
	const seed = 42
	whole := make([]byte, 256)
	Fill(whole, 0, seed)
	for o := range whole {
		want := byte(Word(seed, uint64(o)/8) >> (8 * (o % 8)))
		if whole[o] != want {
			t.Fatalf("byte %d = %#x, want %#x", o, whole[o], want)
		}
	}
	if binary.LittleEndian.Uint64(whole[8:]) != Word(seed, 1) {
		t.Fatal("second word is not little-endian Word(seed,1)")
	}
	// Any sub-range filled on its own equals the same slice of the whole.
	for off := 0; off < 20; off++ {
		for n := 0; n < 40; n++ {
			part := make([]byte, n)
			Fill(part, int64(off), seed)
			if string(part) != string(whole[off:off+n]) {
				t.Fatalf("Fill(off=%d,n=%d) differs from the whole", off, n)
			}
			if _, ok := Check(whole[off:off+n], int64(off), seed); !ok {
				t.Fatalf("Check(off=%d,n=%d) rejects the pattern", off, n)
			}
		}
	}
}

func TestCheckFindsFirstBadByte(t *testing.T) {
	const seed = 7
	buf := make([]byte, 1000)
	for _, base := range []int64{0, 3, 4096} {
		for _, flip := range []int{0, 1, 7, 8, 500, 998, 999} {
			Fill(buf, base, seed)
			buf[flip] ^= 0x10
			if flip+1 < len(buf) {
				buf[len(buf)-1] ^= 0x01 // a later difference must not be reported
			}
			bad, ok := Check(buf, base, seed)
			if ok || bad != base+int64(flip) {
				t.Fatalf("base %d flip %d: Check = (%d,%v), want (%d,false)", base, flip, bad, ok, base+int64(flip))
			}
		}
	}
	Fill(buf, 0, seed)
	if _, ok := Check(buf, 0, seed+1); ok {
		t.Fatal("Check accepts content of another seed")
	}
}
