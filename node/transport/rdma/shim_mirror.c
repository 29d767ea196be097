//go:build rdma

// The C mirrors of Go code that the read loop needs without a call into
// Go: node/pattern's words and the latency histogram's buckets. Their
// tests (mirror_test.go) hold them to Go's. See shim.h for the rules.

#include "shim_impl.h"

uint64_t rs_word(uint64_t seed, uint64_t index) {
	uint64_t z = seed + (index + 1) * 0x9E3779B97F4A7C15ULL;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

int rs_bucket(uint64_t ns) {
	const uint64_t sub = 1u << RS_SUB_BUCKET_BITS;
	if (ns < sub)
		return (int)ns;
	int e = 63 - __builtin_clzll(ns);
	int shift = e - RS_SUB_BUCKET_BITS;
	return (e - RS_SUB_BUCKET_BITS + 1) * (int)sub + (int)(ns >> shift) - (int)sub;
}

static inline uint8_t pattern_byte(uint64_t seed, uint64_t o) {
	return (uint8_t)(rs_word(seed, o / 8) >> (8 * (o % 8)));
}

int rs_check(const uint8_t *buf, size_t len, uint64_t off, uint64_t seed, int64_t *bad) {
	size_t i = 0;
	for (; i < len && (off + i) % 8 != 0; i++)
		if (buf[i] != pattern_byte(seed, off + i))
			goto mismatch;
	for (uint64_t idx = (off + i) / 8; i + 8 <= len; i += 8, idx++) {
		uint64_t w;
		memcpy(&w, buf + i, 8); // little-endian host, as pattern defines the bytes
		if (w != rs_word(seed, idx))
			break;
	}
	for (; i < len; i++)
		if (buf[i] != pattern_byte(seed, off + i))
			goto mismatch;
	return 1;
mismatch:
	*bad = (int64_t)(off + i);
	return 0;
}
