//go:build rdma

package rdma

// #include "shim.h"
import "C"

import "unsafe"

// These expose the C mirrors of results.Bucket and node/pattern to the tests
// that cross-check them (test files cannot use cgo).

// The C loop's bounds on reads in flight and QPs.
const (
	cMaxQD = C.RS_MAX_QD
	cMaxQP = C.RS_MAX_QP
)

func cBucket(ns uint64) int { return int(C.rs_bucket(C.uint64_t(ns))) }

func cWord(seed, index uint64) uint64 { return uint64(C.rs_word(C.uint64_t(seed), C.uint64_t(index))) }

func cCheck(buf []byte, off int64, seed uint64) (int64, bool) {
	if len(buf) == 0 {
		return 0, true
	}
	var bad C.int64_t
	ok := C.rs_check((*C.uint8_t)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), C.uint64_t(off), C.uint64_t(seed), &bad)
	if ok != 0 {
		return 0, true
	}
	return int64(bad), false
}
