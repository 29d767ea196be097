package point

import (
	"errors"
	"fmt"
	"math"

	"rdmasweep/results"
)

// aggregate fills row with the clients' reads together:
//
//   - the common window runs from the last client's first read to the
//     first client's last read; bandwidth and IOPS are every client's
//     reads within it, divided by its length (an interval that straddles
//     an edge counts by the share inside; a client that reported no
//     intervals counts evenly over its phase);
//   - latency percentiles come from the clients' histograms merged, never
//     from averaging their percentiles;
//   - start_skew_s is the spread of the clients' first reads.
func aggregate(row *results.Row, clients []*Report) error {
	if len(clients) == 0 {
		return errors.New("no client took part")
	}
	// Times are seconds since the first client's first read: seconds
	// since the epoch in a float64 would keep only about 0.2 µs.
	var base int64
	for i, c := range clients {
		res := c.Result
		if res == nil || res.StartUnixNs == 0 || res.Histogram == nil {
			return fmt.Errorf("%s: its node reports no start time or histogram (an older node?): nothing to aggregate", c.Target.Label)
		}
		if i == 0 || res.StartUnixNs < base {
			base = res.StartUnixNs
		}
	}
	var (
		winStart, winEnd = math.Inf(-1), math.Inf(1)
		hist             results.Histogram
		verified         = true
	)
	for _, c := range clients {
		res := c.Result
		start := since(base, res.StartUnixNs)
		winStart = max(winStart, start)
		winEnd = min(winEnd, start+res.Seconds)
		hist.Merge(res.Histogram)
		verified = verified && res.Verified
	}
	skew := winStart // the first read of all is at 0
	row.StartSkewS = &skew
	seconds := winEnd - winStart
	if seconds <= 0 {
		return fmt.Errorf("the clients' measured phases do not overlap (their first reads spread over %.3f s, longer than the shortest phase): no common window", skew)
	}
	var bytes, reads float64
	for _, c := range clients {
		b, n := inWindow(c, base, winStart, winEnd)
		bytes += b
		reads += n
	}
	lat := hist.Summary()
	bw, iops := bytes/seconds/1e6, reads/seconds
	whole := int64(math.Round(bytes))
	row.Bytes, row.Seconds, row.BandwidthMBs, row.IOPS = &whole, &seconds, &bw, &iops
	row.LatAvgUs, row.LatP50Us, row.LatP99Us, row.LatP999Us, row.LatMaxUs = &lat.AvgUs, &lat.P50Us, &lat.P99Us, &lat.P999Us, &lat.MaxUs
	row.Verified = &verified
	aggregateOpenLoop(row, clients)
	return nil
}

// aggregateOpenLoop fills an aggregate row's response latency from the
// open-loop clients' response histograms merged, and says saturated when
// any client was; it leaves them empty when a client has none.
func aggregateOpenLoop(row *results.Row, clients []*Report) {
	var ol results.OpenLoop
	var resp results.Histogram
	for _, c := range clients {
		o := c.Result.OpenLoop
		if o == nil || o.RespHistogram == nil {
			return
		}
		resp.Merge(o.RespHistogram)
		ol.Saturated = ol.Saturated || o.Saturated
	}
	ol.SetResponse(&resp)
	row.RespP50Us, row.RespP99Us, row.RespP999Us, row.RespMaxUs = &ol.RespP50Us, &ol.RespP99Us, &ol.RespP999Us, &ol.RespMaxUs
	row.Saturated = &ol.Saturated
}

// since is the seconds from base to t, both in nanoseconds since the epoch.
func since(base, t int64) float64 { return float64(t-base) / 1e9 }

// inWindow is the bytes and reads client c completed between from and to
// (seconds since base).
func inWindow(c *Report, base int64, from, to float64) (bytes, reads float64) {
	res := c.Result
	start := since(base, res.StartUnixNs)
	if len(c.Intervals) == 0 {
		share := (min(to, start+res.Seconds) - max(from, start)) / res.Seconds
		return float64(res.Bytes) * share, float64(res.Reads) * share
	}
	for _, iv := range c.Intervals {
		s := since(base, iv.StartUnixNs)
		e := s + iv.Seconds
		if last := start + res.Seconds; e > last {
			e = last // the last interval ends with the phase
		}
		if e <= s {
			continue
		}
		share := (min(e, to) - max(s, from)) / (e - s)
		if share <= 0 {
			continue
		}
		bytes += float64(iv.Bytes) * min(share, 1)
		reads += float64(iv.Reads) * min(share, 1)
	}
	return bytes, reads
}
