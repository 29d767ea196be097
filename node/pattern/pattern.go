// Package pattern defines the content node writes into a file it creates,
// so a reader can check every byte it receives without a copy of the file.
//
// The byte at absolute offset o is byte (o%8) of the little-endian encoding
// of Word(seed, o/8). Any offset can be checked on its own, and the content
// of two files with different seeds differs almost everywhere.
package pattern

import "encoding/binary"

// Word is the 64-bit word at word index index: splitmix64 of
// seed + (index+1)*0x9E3779B97F4A7C15.
//
//	z := seed + (index+1)*0x9E3779B97F4A7C15
//	z = (z ^ (z>>30)) * 0xBF58476D1CE4E5B9
//	z = (z ^ (z>>27)) * 0x94D049BB133111EB
//	return z ^ (z>>31)
func Word(seed, index uint64) uint64 {
	z := seed + (index+1)*0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Fill writes the pattern for seed into buf, as if buf held the file's
// bytes starting at absolute offset off (off >= 0, any alignment).
func Fill(buf []byte, off int64, seed uint64) {
	i := 0
	// Unaligned head: bytes up to the next multiple of 8.
	for i < len(buf) && (off+int64(i))%8 != 0 {
		o := uint64(off + int64(i))
		buf[i] = byte(Word(seed, o/8) >> (8 * (o % 8)))
		i++
	}
	idx := uint64(off+int64(i)) / 8
	for ; i+8 <= len(buf); i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], Word(seed, idx))
		idx++
	}
	if i < len(buf) {
		w := Word(seed, idx)
		for j := 0; i < len(buf); i, j = i+1, j+1 {
			buf[i] = byte(w >> (8 * j))
		}
	}
}

// Check reports whether buf holds the pattern for seed at absolute offset
// off. When it does not, bad is the absolute offset of the first byte that
// differs.
func Check(buf []byte, off int64, seed uint64) (bad int64, ok bool) {
	i := 0
	for i < len(buf) && (off+int64(i))%8 != 0 {
		o := uint64(off + int64(i))
		if buf[i] != byte(Word(seed, o/8)>>(8*(o%8))) {
			return off + int64(i), false
		}
		i++
	}
	idx := uint64(off+int64(i)) / 8
	for ; i+8 <= len(buf); i += 8 {
		if binary.LittleEndian.Uint64(buf[i:]) != Word(seed, idx) {
			return firstDiff(buf[i:i+8], off+int64(i), seed)
		}
		idx++
	}
	for ; i < len(buf); i++ {
		o := uint64(off + int64(i))
		if buf[i] != byte(Word(seed, o/8)>>(8*(o%8))) {
			return off + int64(i), false
		}
	}
	return 0, true
}

// firstDiff finds the differing byte inside an aligned word known to differ.
func firstDiff(word []byte, off int64, seed uint64) (int64, bool) {
	w := Word(seed, uint64(off)/8)
	for j := range word {
		if word[j] != byte(w>>(8*j)) {
			return off + int64(j), false
		}
	}
	return off, false // unreachable when the caller saw a difference
}
