// Package workload decides which block a client reads next. Both transports
// use it, so "sequential" and "random" mean the same everywhere.
package workload

import (
	"fmt"
	"math/bits"

	"rdmasweep/node/pattern"
)

// Blocks returns how many whole blocks of blockSize fit in size. A partial
// tail block is never read.
func Blocks(size int64, blockSize int) int64 {
	if blockSize <= 0 {
		return 0
	}
	return size / int64(blockSize)
}

// Permutation returns block indices 0..blocks-1 shuffled by a Fisher-Yates
// shuffle driven by splitmix64 (pattern.Word) from seed, so the same seed
// gives the same order on every machine and Go version. "random" reuses
// this one permutation for every pass over the region. It holds 8 bytes
// per block.
func Permutation(blocks int64, seed uint64) []int64 {
	p := make([]int64, blocks)
	for i := range p {
		p[i] = int64(i)
	}
	for i := blocks - 1; i > 0; i-- {
		j := int64(bounded(pattern.Word(seed, uint64(i)), uint64(i+1)))
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// bounded maps a uniform 64-bit word onto [0,n) (Lemire's multiply-shift;
// the bias is below n/2^64, irrelevant here).
func bounded(w, n uint64) uint64 {
	hi, _ := bits.Mul64(w, n)
	return hi
}

// Order yields the block index of the i-th read of a workload, wrapping
// around the region for as many passes as the workload needs.
type Order struct {
	blocks int64
	perm   []int64 // nil for sequential
}

// New returns the order for pattern ("sequential" or "random") over blocks
// blocks (> 0).
func New(patternName string, blocks int64, seed uint64) (*Order, error) {
	if blocks <= 0 {
		return nil, fmt.Errorf("region holds no whole block")
	}
	switch patternName {
	case "sequential":
		return &Order{blocks: blocks}, nil
	case "random":
		return &Order{blocks: blocks, perm: Permutation(blocks, seed)}, nil
	}
	return nil, fmt.Errorf("unknown pattern %q (want sequential or random)", patternName)
}

// Block returns the block index of read number i (i >= 0).
func (o *Order) Block(i int64) int64 {
	k := i % o.blocks
	if o.perm != nil {
		return o.perm[k]
	}
	return k
}

// Blocks returns the number of blocks in one pass.
func (o *Order) Blocks() int64 { return o.blocks }
