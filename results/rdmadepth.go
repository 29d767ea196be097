package results

// The rdma transport's resolved values, each written once: node uses
// them (and hands the C shim the result), the plan and the runner's
// checks predict them, and a row takes node's report of them where node
// ran and its cell would otherwise be a prediction.

import "rdmasweep/results/param"

// DepthPerQP is the READs node keeps posted on each QP: the queue depth
// spread over the QPs, rounded up, at least 1.
func DepthPerQP(queueDepth, qps int) int {
	qps = max(1, qps)
	return max(1, (queueDepth+qps-1)/qps)
}

// CQModeration is the N with which node signals every Nth READ per QP,
// the one rule for cq_moderation: an open loop signals every READ, to
// time each from its due time; an N asked for (> 0) is at most the depth
// per QP, since a QP must signal at least once in the READs it holds;
// auto (0 or less) is max(1, the depth per QP ÷ 4): a QP signals while
// three quarters of its READs are still in flight, so its slots are
// refilled before the ring runs dry. (perftest's bandwidth default,
// min(100, its tx depth), signals once per full window: the ring
// refills only after it has emptied.)
func CQModeration(asked, queueDepth, qps int, openLoop bool) int {
	if openLoop {
		return 1
	}
	per := DepthPerQP(queueDepth, qps)
	if asked <= 0 {
		return max(1, per/4)
	}
	return min(asked, per)
}

// RdAtomicLimit is the most READs in flight per QP a device allows in one
// role, from its attribute: max_qp_init_rd_atom as the requester (the
// client), max_qp_rd_atom as the responder (the server). It is at most
// 255, the width of the QP attribute and of the endpoint's byte that
// carries it to the other side.
func RdAtomicLimit(attr int) int { return max(0, min(attr, 255)) }

// MaxRdAtomic is the one rule for max_rd_atomic, the READs in flight per
// QP on the wire, given the two sides' RdAtomicLimit: auto (asked 0 or
// less) is the most both allow, perftest's default; an N asked for is N.
// n is 0 where the sides cannot give it: they allow none, or fewer than
// N. most is the most both allow, for the message that says so.
func MaxRdAtomic(asked, requester, responder int) (n, most int) {
	most = RdAtomicLimit(min(requester, responder))
	switch {
	case most < 1, asked > most:
		return 0, most
	case asked <= 0:
		return most, most
	}
	return asked, most
}

// MRCount is the one rule for how many memory regions node registers a
// region of size bytes as, with server.mr_size mrSize: one for mr_size 0
// or at least the size, else size ÷ mr_size rounded up, the last region
// holding the rest. It is at most MaxRegions for node to register it.
func MRCount(size, mrSize int64) int64 {
	if mrSize <= 0 || mrSize >= size {
		return 1
	}
	return (size + mrSize - 1) / mrSize
}

// PinnedBytes is the one rule for the most bytes node's pinned server
// registers at once: the whole file, but for a pipelined server with a
// window of fewer memory regions than the file has, window × mr_size,
// and with io direct its ring (DirectSlots buffers of mr_size).
func PinnedBytes(size, mrSize int64, pipeline bool, window int, io string) int64 {
	if io == IODirect {
		return min(size, int64(DirectSlots(window, MRCount(size, mrSize)))*mrSize)
	}
	if !pipeline || window <= 0 || int64(window) >= MRCount(size, mrSize) {
		return size
	}
	return int64(window) * mrSize
}

// DirectSlots is how many buffers io direct's ring has: window, 4 when
// 0, and never more than the file's regions.
func DirectSlots(window int, regions int64) int {
	if window <= 0 {
		window = 4
	}
	return int(min(int64(window), regions))
}

// DirectRing is how many buffers of buf bytes an io direct ring needs
// for a client keeping inflight bytes of READs posted: twice that, so the
// disk fills the next while the client reads the last; at least 4.
func DirectRing(inflight, buf int64) int {
	if buf <= 0 {
		return 4
	}
	return int(min(MaxRegions, max(4, (2*inflight+buf-1)/buf)))
}

// PinnedAtOnce is PinnedBytes for a point's values.
func PinnedAtOnce(v Values) int64 {
	return PinnedBytes(v.Int(param.FileSize), v.Int(param.MRSize), v.Bool(param.Pipeline), int(v.Int(param.Window)), v.Str(param.IO))
}
