//go:build rdma

package rdma

// #include "shim.h"
import "C"

import "unsafe"

// These expose the C mirrors of results.Bucket and node/pattern, and the C
// loop's interval series, to the tests that cross-check them (test files
// cannot use cgo).

// The C loop's bounds on reads in flight and QPs.
const (
	cMaxQD = C.RS_MAX_QD
	cMaxQP = C.RS_MAX_QP
)

func cBucket(ns uint64) int { return int(C.rs_bucket(C.uint64_t(ns))) }

func cWord(seed, index uint64) uint64 { return uint64(C.rs_word(C.uint64_t(seed), C.uint64_t(index))) }

// VerifyBlock is the check the C loop runs on each block it reads with
// verify on (rs_check): bad is the absolute offset of the first wrong
// byte. Exported for the guest tests, which time it to know what verifying
// costs the loop.
func VerifyBlock(buf []byte, off int64, seed uint64) (bad int64, ok bool) {
	return cCheck(buf, off, seed)
}

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

// cSeries counts one completed read at each time of ts (nondecreasing, at
// or after start) into a C rs_series as rs_run does, making each time's
// interval current only when it crosses the current one's end, and returns
// the counts of the intervals up to the last time's.
func cSeries(start, interval uint64, hint int64, ts []uint64) []int64 {
	var s C.rs_series
	if C.rs_series_init(&s, C.uint64_t(start), C.uint64_t(interval), C.int64_t(hint)) != 0 {
		panic("rs_series_init: out of memory")
	}
	defer C.rs_series_free(&s)
	for _, t := range ts {
		if C.uint64_t(t) >= s.end && C.rs_series_at(&s, C.uint64_t(t)) != 0 {
			panic("rs_series_at: out of memory")
		}
		*s.cur++
	}
	return append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(s.counts)), int(s.len))...)
}

// cSchedule is the C loop's schedule (rs_sched) of n reads at perSecond
// reads per second: each read's due time from the phase's start.
func cSchedule(n int64, perSecond float64, poisson bool, seed uint64) []uint64 {
	var s C.rs_sched
	p := C.int(0)
	if poisson {
		p = 1
	}
	C.rs_sched_init(&s, C.int64_t(n), C.double(1e9/perSecond), p, C.uint64_t(seed))
	due := make([]uint64, 0, n)
	for s.i < s.n {
		due = append(due, uint64(C.rs_sched_next(&s)))
	}
	return due
}
