package results

// The rdma client's resolved values, each written once: node uses them,
// the plan's CSV cell predicts them, and a row takes node's report of
// them where node ran.

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
// auto (0 or less) is min(100, the depth per QP), perftest's bandwidth
// default with its per-QP tx depth.
func CQModeration(asked, queueDepth, qps int, openLoop bool) int {
	if openLoop {
		return 1
	}
	per := DepthPerQP(queueDepth, qps)
	if asked <= 0 {
		return min(100, per)
	}
	return min(asked, per)
}
