package results

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// BoundShare is the share of its capacity a resource must reach to be
// named what bound a row (docs/telemetry.md#what-bound-a-row).
const BoundShare = 0.9

// BoundTie is how close to the top share another resource's must be to be
// named with it: 0.05, within what one run's shares move between repeats.
const BoundTie = 0.05

// The resources bound_by names.
const (
	BoundDisk      = "disk"
	BoundLink      = "link"
	BoundCPUServer = "cpu_server"
	BoundCPUClient = "cpu_client"
	BoundUnknown   = "unknown"
)

// share is one resource's use of its capacity in a row.
type share struct {
	name  string
	share float64
}

// shares are the row's resources, each with its use of its capacity,
// where the row has the figures:
//   - disk: disk_read_mb_s ÷ disk_ceiling_mb_s, the rate it read at while
//     the clients read against the most it gives; without a ceiling,
//     disk_busy_pct ÷ 100 (io_ticks: any I/O in flight, so a device that
//     serves many at once, an NVMe, reads 100 % busy at depth 1);
//   - link: bandwidth_mb_s ÷ line_rate_mb_s;
//   - cpu_server, cpu_client: the busiest thread's CPU seconds per
//     second (node's roles; a peer's, the whole process's) ÷ one core:
//     a thread at one core bounds its role however many others idle,
//     and eight threads at a fifth each do not. An rdma client
//     busy-polls its completions (node and ib_read_bw alike), so its CPU
//     says nothing of a bound and is left out.
func (r Row) shares() []share {
	var out []share
	switch {
	case r.DiskReadMBs != nil && r.DiskCeilingMBs != nil && *r.DiskCeilingMBs > 0:
		out = append(out, share{BoundDisk, *r.DiskReadMBs / *r.DiskCeilingMBs})
	case r.DiskBusyPct != nil:
		out = append(out, share{BoundDisk, *r.DiskBusyPct / 100})
	}
	if r.BandwidthMBs != nil && r.LineRateMBs != nil && *r.LineRateMBs > 0 {
		out = append(out, share{BoundLink, *r.BandwidthMBs / *r.LineRateMBs})
	}
	if c := cmp.Or(r.CPUServerThread, r.CPUServer); c != nil {
		out = append(out, share{BoundCPUServer, *c})
	}
	if c := cmp.Or(r.CPUClientThread, r.CPUClient); c != nil && r.Transport() != TransportRDMA {
		out = append(out, share{BoundCPUClient, *c})
	}
	return out
}

// SetBoundBy names the resource that bound an ok row: the one at the
// highest share of its capacity, when that is BoundShare or more, joined
// by every other at BoundShare or more within BoundTie of it
// ("disk+link": a pipeline that keeps both busy is bound by both); else
// unknown. The detail lists every share, highest first, so an unknown
// row names the nearest. A failed row, or one without figures, gets
// neither.
func (r *Row) SetBoundBy() {
	r.BoundBy, r.BoundByDetail = "", ""
	sh := r.shares()
	if r.Status != StatusOK || len(sh) == 0 {
		return
	}
	slices.SortStableFunc(sh, func(a, b share) int { return cmp.Compare(b.share, a.share) })
	parts := make([]string, len(sh))
	for i, s := range sh {
		parts[i] = fmt.Sprintf("%s %.2f", s.name, s.share)
	}
	r.BoundByDetail = strings.Join(parts, ", ")
	if sh[0].share >= BoundShare {
		names := []string{sh[0].name}
		for _, o := range sh[1:] {
			if o.share >= BoundShare && sh[0].share-o.share <= BoundTie {
				names = append(names, o.name)
			}
		}
		r.BoundBy = strings.Join(names, "+")
		return
	}
	r.BoundBy = BoundUnknown
	r.BoundByDetail = "nearest: " + r.BoundByDetail
}
