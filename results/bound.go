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
//     none: disk_busy_pct (io_ticks, any I/O in flight) reads 100 % on
//     an NVMe at depth 1, far below what it gives;
//   - link: bandwidth_mb_s ÷ link_capacity_mb_s, the payload the link
//     carries at its MTU or as measured (SetLinkCapacity); a row without
//     one (written before it), ÷ line_rate_mb_s;
//   - cpu_server, cpu_client: the busiest thread's CPU seconds per
//     second (node's roles; a peer's, the whole process's) ÷ one core:
//     a thread at one core bounds its role however many others idle,
//     and eight threads at a fifth each do not. An rdma client
//     busy-polls its completions, so its CPU time says nothing: node's
//     is its loop's working share (cpu_client_busy), ib_read_bw's is left
//     out (clientCPU).
func (r Row) shares() []share {
	var out []share
	if r.DiskReadMBs != nil && r.DiskCeilingMBs != nil && *r.DiskCeilingMBs > 0 {
		out = append(out, share{BoundDisk, *r.DiskReadMBs / *r.DiskCeilingMBs})
	}
	if c := cmp.Or(r.LinkCapacityMBs, r.LineRateMBs); r.BandwidthMBs != nil && c != nil && *c > 0 {
		out = append(out, share{BoundLink, *r.BandwidthMBs / *c})
	}
	if c := cmp.Or(r.CPUServerThread, r.CPUServer); c != nil {
		out = append(out, share{BoundCPUServer, *c})
	}
	if c := r.clientCPU(); c != nil {
		out = append(out, share{BoundCPUClient, *c})
	}
	return out
}

// clientCPU is the client CPU's share: a thread's CPU seconds per second
// where the client blocks when idle (tcp, nvmeof's fio); node's
// busy-polling rdma loop's working share; nothing for ib_read_bw, which
// busy-polls and says nothing of its work.
func (r Row) clientCPU() *float64 {
	switch {
	case r.Transport() != TransportRDMA || r.Workload() == "nvmeof":
		return cmp.Or(r.CPUClientThread, r.CPUClient)
	case r.Workload() == "node":
		return r.CPUClientBusy
	}
	return nil
}

// SetBoundBy names the resource that bound an ok row: the one at the
// highest share of its capacity, when that is BoundShare or more, joined
// by every other at BoundShare or more within BoundTie of it
// ("disk+link": a pipeline that keeps both busy is bound by both); else
// unknown. The detail lists every share, highest first, so an unknown
// row names the nearest. A failed row, or one without figures, gets
// neither.
func (r *Row) SetBoundBy() {
	r.BoundBy, r.BoundByDetail, r.BoundByPrep, r.BoundByPrepDetail = "", "", "", ""
	if r.Status != StatusOK {
		return
	}
	r.BoundBy, r.BoundByDetail = judge(r.shares())
	r.BoundByPrep, r.BoundByPrepDetail = judge(r.prepShares())
}

// prepShares are a serial cold rdma row's preparation's shares: the
// disk's read rate in it against the ceiling, and node serve's busiest
// thread. A streamed row (pipelined, io direct) prepares while its
// client reads, which bound_by judges; a warm or tcp row prepares nothing of the disk.
func (r Row) prepShares() []share {
	p := r.Prep
	if p == nil || r.Transport() != TransportRDMA || r.Param("cache") != "cold" || r.Streamed() {
		return nil
	}
	var out []share
	if p.DiskReadMBs != nil && r.DiskCeilingMBs != nil && *r.DiskCeilingMBs > 0 {
		out = append(out, share{BoundDisk, *p.DiskReadMBs / *r.DiskCeilingMBs})
	}
	if p.CPUThread != nil {
		out = append(out, share{BoundCPUServer, *p.CPUThread})
	}
	return out
}

// judge names what bound a phase from its shares: the highest, when it is
// BoundShare or more, with every other at BoundShare or more within
// BoundTie of it; else unknown, the detail then starting "nearest: ". No
// shares, no verdict.
func judge(sh []share) (by, detail string) {
	if len(sh) == 0 {
		return "", ""
	}
	slices.SortStableFunc(sh, func(a, b share) int { return cmp.Compare(b.share, a.share) })
	parts := make([]string, len(sh))
	for i, s := range sh {
		parts[i] = fmt.Sprintf("%s %.2f", s.name, s.share)
	}
	detail = strings.Join(parts, ", ")
	if sh[0].share < BoundShare {
		return BoundUnknown, "nearest: " + detail
	}
	names := []string{sh[0].name}
	for _, o := range sh[1:] {
		if o.share >= BoundShare && sh[0].share-o.share <= BoundTie {
			names = append(names, o.name)
		}
	}
	return strings.Join(names, "+"), detail
}
