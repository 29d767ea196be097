package results

import (
	"strconv"

	"rdmasweep/results/param"
)

// Status values.
const (
	StatusOK     = "ok"
	StatusFailed = "failed"
)

// Row is one run of one point: the run's own fields and its measurements
// as typed fields, tagged with their columns, and the point's parameters
// in Params. Pointer fields are empty in the CSV when nil: measurements of
// a failed run, registration figures of tcp.
type Row struct {
	RunID      string `csv:"run_id"`
	Plan       string `csv:"plan"`
	PointKey   string `csv:"point_key"`
	Repetition int    `csv:"repetition"` // from 1
	StartedAt  string `csv:"started_at"` // RFC 3339, UTC
	Status     string `csv:"status"`     // ok | failed
	Error      string `csv:"error"`      // one line; the full stderr is in the log file
	// ErrorCode is node's code for the failure (ErrorCode*), for the
	// runner's own decisions; it is not a column.
	ErrorCode  string `csv:"-"`
	ServerHost string `csv:"server_host"`
	ClientHost string `csv:"client_host"`

	// Params holds each parameter column's cell by parameter name
	// ("block_size" → "4096"), as the CSV has it (see Param.Cell); a
	// missing name is an empty cell.
	Params map[string]string `csv:"-"`

	Bytes        *int64   `csv:"bytes"`
	Seconds      *float64 `csv:"seconds"`
	BandwidthMBs *float64 `csv:"bandwidth_mb_s"`
	IOPS         *float64 `csv:"iops"`
	LatAvgUs     *float64 `csv:"lat_avg_us"`
	LatP50Us     *float64 `csv:"lat_p50_us"`
	LatP99Us     *float64 `csv:"lat_p99_us"`
	LatP999Us    *float64 `csv:"lat_p999_us"`
	LatMaxUs     *float64 `csv:"lat_max_us"`

	Verified        *bool    `csv:"verified"`
	RegistrationS   *float64 `csv:"registration_s"`
	RegistrationMBs *float64 `csv:"registration_mb_s"`
	CachedFraction  *float64 `csv:"cached_fraction"`

	Scope      string   `csv:"scope"` // client | aggregate
	StartSkewS *float64 `csv:"start_skew_s"`

	// CPU seconds (user + sys) per second of each role; nil when the
	// role reports none.
	CPUServer *float64 `csv:"cpu_server"`
	CPUClient *float64 `csv:"cpu_client"`

	// Mapping is how the rdma server mapped the file, from its ready
	// event; PrefetchS how long its odp prefetch took.
	Mapping   string   `csv:"mapping"`
	PrefetchS *float64 `csv:"prefetch_s"`

	// LinkLayer and LID are the client's RDMA port's, from its result;
	// LID only on InfiniBand.
	LinkLayer string `csv:"link_layer"`
	LID       *int   `csv:"lid"`
	// LineRateMBs is the server's data link's rate, nil when unknown, and
	// LineRateUnknown why; Verdict and VerdictDetail the judgement of the
	// plan's expectations; Search the knee search's mark.
	LineRateMBs     *float64 `csv:"line_rate_mb_s"`
	LineRateUnknown string   `csv:"-"`
	Verdict         string   `csv:"verdict"`
	VerdictDetail   string   `csv:"verdict_detail"`
	Search          string   `csv:"search"`
	// Round is the round of a pairwise or ring sweep the pair ran in,
	// from 1; nil for the other topologies.
	Round *int64 `csv:"round"`
	// Regions is how many memory regions the rdma server registered the
	// file as; nil for tcp and peers.
	Regions *int `csv:"regions"`
	// BwMinIntervalMBs and BwCoV are a client's steadiness over its
	// time series' whole intervals, from its result; nil for aggregate
	// rows, peers, and too few intervals.
	BwMinIntervalMBs *float64 `csv:"bw_min_interval_mb_s"`
	BwCoV            *float64 `csv:"bw_cov"`
	// WarmupUsedS is how long a warmup steady read, from the result.
	WarmupUsedS *float64 `csv:"warmup_used_s"`

	// The host counters' headlines (SetCounters); nil where a host lacks
	// the counter.
	DiskReadBytes     *int64 `csv:"disk_read_bytes"`
	ServerMajorFaults *int64 `csv:"server_major_faults"`
	ServerMinorFaults *int64 `csv:"server_minor_faults"`
	TCPRetrans        *int64 `csv:"tcp_retrans"`
	RDMARetransEvents *int64 `csv:"rdma_retrans_events"`
	RDMACNP           *int64 `csv:"rdma_cnp"`
	RDMAECNMarked     *int64 `csv:"rdma_ecn_marked"`
	NetDrops          *int64 `csv:"net_drops"`
	// Response latency of an open-loop client, due time to completion,
	// and whether its queue depth held reads back (Result.Saturated); nil
	// for a closed loop.
	RespP50Us  *float64 `csv:"resp_p50_us"`
	RespP99Us  *float64 `csv:"resp_p99_us"`
	RespP999Us *float64 `csv:"resp_p999_us"`
	RespMaxUs  *float64 `csv:"resp_max_us"`
	Saturated  *bool    `csv:"saturated"`
	// PopulateS and PopulateMBs are the server's populate figures, from
	// its ready event; nil with populate fault.
	PopulateS   *float64 `csv:"populate_s"`
	PopulateMBs *float64 `csv:"populate_mb_s"`
	// DiskBusyPct and DiskAvgQueue are the server's block device's busy
	// share and mean queue (SetCounters); BoundBy and BoundByDetail say
	// which resource limited the row (SetBoundBy).
	DiskBusyPct   *float64 `csv:"disk_busy_pct"`
	DiskAvgQueue  *float64 `csv:"disk_avg_queue"`
	BoundBy       string   `csv:"bound_by"`
	BoundByDetail string   `csv:"bound_by_detail"`
	// FirstReadMs and EndToEndMBs time the file's way from the server's
	// preparation to the client's memory (SetEndToEnd); nil where the
	// point did not read the file once from its start.
	FirstReadMs *float64 `csv:"first_read_ms"`
	EndToEndMBs *float64 `csv:"end_to_end_mb_s"`
	// ColdReadFraction proves a cold row cold (SetColdReadFraction).
	ColdReadFraction *float64 `csv:"cold_read_fraction"`
	// DiskCeilingMBs is the disk's ceiling under a cold row's file
	// (SetDiskCeiling).
	DiskCeilingMBs *float64 `csv:"disk_ceiling_mb_s"`
	// DiskReadMBs is the server's disk rate while its clients read
	// (Counters.DiskReadMBs), the disk's share in SetBoundBy.
	DiskReadMBs *float64 `csv:"disk_read_mb_s"`
	// CPUServerThread and CPUClientThread are each node role's busiest
	// thread's CPU seconds per second: a CPU's share in SetBoundBy, since
	// one thread at one core is the bound, however many others idle.
	CPUServerThread *float64 `csv:"cpu_server_thread"`
	CPUClientThread *float64 `csv:"cpu_client_thread"`
	// PathMTU is the data's MTU (rdma: the client's path MTU; tcp: the
	// server's netdev's), LinkCapacityMBs the most payload the link
	// carries and LinkCapacityFrom how it is known (SetLinkCapacity): the
	// link's bound_by share is of it.
	PathMTU          *int     `csv:"path_mtu"`
	LinkCapacityMBs  *float64 `csv:"link_capacity_mb_s"`
	LinkCapacityFrom string   `csv:"link_capacity_from"`
	// CPUClientBusy is an rdma client's busy-polling loop's share of its
	// measured phase spent working rather than polling an empty queue:
	// its CPU's bound_by share, where cpu_client_thread is always near 1.
	CPUClientBusy *float64 `csv:"cpu_client_busy"`
	// BoundByPrep and BoundByPrepDetail judge a serial cold rdma row's
	// preparation (Prep, from its ready event) as bound_by judges its
	// READs (SetBoundBy).
	BoundByPrep       string `csv:"bound_by_prep"`
	BoundByPrepDetail string `csv:"bound_by_prep_detail"`
	Prep              *Prep  `csv:"-"`
	// DiskIdlePct is a pipelined server's populate readers' idle share
	// (Pipeline.DiskIdlePct).
	DiskIdlePct *float64 `csv:"disk_idle_pct"`
	// PinnedPeakBytes is the most node's server had registered at once
	// (Done.PinnedPeakBytes).
	PinnedPeakBytes *int64 `csv:"pinned_peak_bytes"`
}

// Scope values.
const (
	ScopeClient    = "client"
	ScopeAggregate = "aggregate"
)

// Param is the row's cell for param name ("" when empty).
func (r Row) Param(name string) string { return r.Params[name] }

// ParamInt is the row's cell for param name as a number (sizes in bytes);
// 0 when empty or not a number.
func (r Row) ParamInt(name string) int64 {
	n, _ := strconv.ParseInt(r.Params[name], 10, 64)
	return n
}

// Streamed reports whether node's server read the file while its client
// READ it: pipelined, or io direct.
func (r Row) Streamed() bool {
	return r.Params[param.Pipeline.String()] == "true" || r.Params[param.IO.String()] == IODirect
}

// Transport is the row's transport column.
func (r Row) Transport() string { return r.Params[param.Transport.String()] }

// SetResult copies a client's measurement into the row.
func (r *Row) SetResult(res *Result) {
	// Copies, not pointers into res: a row outlives its point (a pool
	// sweep keeps every pair's row until its last round), and a pointer
	// into res would keep res's latency histogram (58 KiB) alive with it.
	r.Bytes = ref(res.Bytes)
	r.Seconds = ref(res.Seconds)
	r.BandwidthMBs = ref(res.BandwidthMBs)
	r.IOPS = ref(res.IOPS)
	r.LatAvgUs = ref(res.LatAvgUs)
	r.LatP50Us = ref(res.LatP50Us)
	r.LatP99Us = ref(res.LatP99Us)
	r.LatP999Us = ref(res.LatP999Us)
	r.LatMaxUs = ref(res.LatMaxUs)
	r.Verified = ref(res.Verified)
	r.CPUClient = cpuPerSecond(res.CPUUserS, res.CPUSysS, res.CPUWallS)
	r.CPUClientThread = threadPerSecond(res.CPUThreadS, res.CPUWallS)
	if res.IdleS != nil && res.Seconds > 0 {
		r.CPUClientBusy = ref(max(0, 1-*res.IdleS/res.Seconds))
	}
	r.BwMinIntervalMBs, r.BwCoV, r.WarmupUsedS = res.BwMinIntervalMBs, res.BwCoV, res.WarmupS
	if o := res.OpenLoop; o != nil {
		r.RespP50Us, r.RespP99Us, r.RespP999Us, r.RespMaxUs = &o.RespP50Us, &o.RespP99Us, &o.RespP999Us, &o.RespMaxUs
		r.Saturated = &o.Saturated
	}
	if p := res.RDMAPath; p != nil {
		// What node did, as node reports it, not the plan's prediction.
		if p.CQModeration > 0 && r.Params != nil {
			r.Params["cq_moderation"] = strconv.Itoa(p.CQModeration)
		}
		r.LinkLayer = p.LinkLayer
		if p.PathMTU > 0 {
			r.PathMTU = ref(p.PathMTU)
		}
		if p.LinkLayer == "InfiniBand" {
			lid := p.LID
			r.LID = &lid
		}
	}
}

// SetDone copies node serve's own figures into the row: its CPU, and a
// pipelined server's populate and registration, known only at its end.
func (r *Row) SetDone(d *Done) {
	r.CPUServer = cpuPerSecond(d.CPUUserS, d.CPUSysS, d.CPUWallS)
	r.CPUServerThread = threadPerSecond(d.CPUThreadS, d.CPUWallS)
	r.PinnedPeakBytes = d.PinnedPeakBytes
	if d.Pipeline != nil {
		p := d.Pipeline
		r.PopulateS, r.PopulateMBs = p.PopulateS, p.PopulateMBs
		r.RegistrationS, r.RegistrationMBs = p.RegistrationS, p.RegistrationMBs
		r.Mapping, r.DiskIdlePct = p.Mapping, p.DiskIdlePct
		if p.Regions > 0 {
			r.Regions = ref(p.Regions)
		}
	}
}

// SetEndToEnd sets first_read_ms and end_to_end_mb_s from the client's
// first and last READ (from its handshake) and, on the serial path, the
// server's preparation before ready (populate, registration, prefetch),
// which the client's times do not hold. A pipelined server prepares
// after the handshake, inside the client's times. The wait between the
// server's ready and the client's connection is the harness's, not the
// data's, and is in neither.
func (r *Row) SetEndToEnd(res *Result) {
	r.FirstReadMs, r.EndToEndMBs = nil, nil
	if res == nil || res.FirstReadS == nil || res.LastReadS == nil || !(*res.LastReadS > 0) {
		return
	}
	var prep float64
	switch {
	case r.Params[param.IO.String()] == IODirect:
		// Its ring's registration came before ready; its reads of the
		// file ran beside the READs, as a pipeline's.
		if r.RegistrationS != nil {
			prep = *r.RegistrationS
		}
	case r.Params[param.Pipeline.String()] != "true":
		for _, s := range []*float64{r.PopulateS, r.RegistrationS, r.PrefetchS} {
			if s != nil {
				prep += *s
			}
		}
	}
	r.FirstReadMs = ref((prep + *res.FirstReadS) * 1e3)
	r.EndToEndMBs = ref(float64(res.Bytes) / 1e6 / (prep + *res.LastReadS))
}

// ref is a pointer to a copy of v.
func ref[T any](v T) *T { return &v }

// cpuPerSecond is (user + sys) / wall, or nil when wall is 0: a node
// too old to measure it.
// threadPerSecond is a busiest thread's CPU seconds per second, nil where
// it was not read (a node before cpu_thread_s).
func threadPerSecond(thread, wall float64) *float64 {
	if !(thread > 0) {
		return nil
	}
	return cpuPerSecond(thread, 0, wall)
}

func cpuPerSecond(user, sys, wall float64) *float64 {
	if !(wall > 0) {
		return nil
	}
	c := (user + sys) / wall
	return &c
}

// Workload is the row's workload, "node" for rows written before the
// column existed.
func (r Row) Workload() string {
	if w := r.Params[param.Workload.String()]; w != "" {
		return w
	}
	return "node"
}

// SetReady copies the server's preparation figures into the row.
func (r *Row) SetReady(rd *Ready) {
	r.RegistrationS = rd.RegistrationS
	r.RegistrationMBs = rd.RegistrationMBs
	r.CachedFraction = ref(rd.CachedFraction)
	r.Mapping = rd.Mapping
	r.PrefetchS = rd.PrefetchS
	r.PopulateS, r.PopulateMBs = rd.PopulateS, rd.PopulateMBs
	if rd.Regions > 0 {
		n := rd.Regions
		r.Regions = &n
	}
	r.LineRateMBs, r.LineRateUnknown = rd.LineRateMBs, rd.LineRateUnknown
	r.Prep = rd.Prep
	if rd.LineMTU > 0 {
		r.PathMTU = ref(rd.LineMTU)
	}
}
