package results

// The events node prints, one JSON object per line on stdout, each with a
// "type". The runner reads those lines and turns a point's events into one
// CSV row (see Row):
//
//   - started: first line of every node subcommand, printed before any slow
//     work, so the runner can always find (and kill) the process.
//   - ready:   node serve has prepared its region and is listening (node
//     prepare: has prepared the file, and exits).
//   - result:  node read's measurement.
//   - interval: what node read read in one interval of its measured phase,
//     printed after the phase, before its result.
//   - done:    node serve's own statistics after its clients have gone.
//   - error:   the last line of any failed node run, before a non-zero exit.
//   - warning: something a person should know that did not stop the run.
//
// Field names are snake_case and frozen: external scripts parse them too;
// new fields are only added. Units are in the names: _s seconds, _us
// microseconds, _mb_s 10^6 bytes/s.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Event type names.
const (
	TypeStarted  = "started"
	TypeReady    = "ready"
	TypeResult   = "result"
	TypeDone     = "done"
	TypeInterval = "interval"
	TypeError    = "error"
	TypeWarning  = "warning"
)

// MaxEventLine bounds one event line. A longer line is not an event; the
// runner rejects it rather than buffering without limit.
const MaxEventLine = 1 << 20 // a result's histogram has up to 7424 buckets

// Started is node's first stdout line.
type Started struct {
	Type    string `json:"type"` // "started"
	PID     int    `json:"pid"`
	PGID    int    `json:"pgid"`
	Role    string `json:"role"`    // "serve" or "read"
	Version string `json:"version"` // node's version string
	// StartTime (/proc/self/stat field 22) and BootID identify this very
	// process across pid reuse, so a later runner can tell whether a pid
	// it recorded is still this node before it kills it.
	StartTime string `json:"start_time,omitempty"`
	BootID    string `json:"boot_id,omitempty"`
}

// Ready is printed by node serve once the region is prepared and the
// listener is open, and by node prepare once the file is prepared (then
// with no address, port or registration: nothing listens). Registration figures are nil for transports that do not
// register memory (tcp); they are then empty in the CSV.
type Ready struct {
	Type            string   `json:"type"` // "ready"
	Transport       string   `json:"transport"`
	Address         string   `json:"address"` // the address node listens on
	Port            int      `json:"port"`
	RegistrationS   *float64 `json:"registration_s"`
	RegistrationMBs *float64 `json:"registration_mb_s"`
	CachedFraction  float64  `json:"cached_fraction"`     // 0..1, from mincore before registration
	Mapping         string   `json:"mapping,omitempty"`   // how the file was mapped, e.g. "private-ro"
	Regions         int      `json:"regions,omitempty"`   // memory regions registered (rdma)
	GIDIndex        *int     `json:"gid_index,omitempty"` // RDMA only
	FileCreated     bool     `json:"file_created"`        // this run wrote the file
	// PrefetchS is how long ibv_advise_mr's prefetch of an odp region
	// took (--odp-prefetch), after RegistrationS, which is then the
	// ibv_reg_mr call alone.
	PrefetchS *float64 `json:"prefetch_s,omitempty"`
	// PopulateS is how long --populate parallel took to bring the file
	// into the page cache, before the registration; nil with fault.
	PopulateS   *float64 `json:"populate_s,omitempty"`
	PopulateMBs *float64 `json:"populate_mb_s,omitempty"`
	// Prep is what the preparation before ready used (node serve);
	// bound_by_prep judges it.
	Prep *Prep `json:"prep,omitempty"`
	// RDMAPath is the rdma transport's side of the path; nil for tcp.
	*RDMAPath
	// LineRateMBs is the rate of the link the data crosses (the rdma
	// port, or the netdev with the listen address); nil when it cannot be
	// known, and LineRateUnknown says why.
	LineRateMBs     *float64 `json:"line_rate_mb_s,omitempty"`
	LineRateUnknown string   `json:"line_rate_unknown,omitempty"`
	// LineMTU is that netdev's MTU over tcp, in bytes; 0 for rdma (the
	// client's result has the path MTU) and where unknown.
	LineMTU int `json:"line_mtu,omitempty"`
}

// Prep is the server's preparation before ready, populate and
// registration together: Seconds of it, its disk's read rate over them
// (nil without a disk under the file), and its busiest thread's CPU
// seconds per second.
type Prep struct {
	Seconds     float64  `json:"seconds"`
	DiskReadMBs *float64 `json:"disk_read_mb_s,omitempty"`
	CPUThread   *float64 `json:"cpu_thread,omitempty"`
}

// Result is node read's measurement. MB is 10^6 bytes. Latency is per read,
// from issue to completion, so it includes queueing when queue_depth > 1.
type Result struct {
	Type         string  `json:"type"` // "result"
	Transport    string  `json:"transport"`
	Bytes        int64   `json:"bytes"`
	Reads        int64   `json:"reads"`
	Seconds      float64 `json:"seconds"`
	BandwidthMBs float64 `json:"bandwidth_mb_s"`
	IOPS         float64 `json:"iops"`
	LatAvgUs     float64 `json:"lat_avg_us"`
	LatP50Us     float64 `json:"lat_p50_us"`
	LatP99Us     float64 `json:"lat_p99_us"`
	LatP999Us    float64 `json:"lat_p999_us"`
	LatMaxUs     float64 `json:"lat_max_us"`
	Verified     bool    `json:"verified"` // true only when verify was on and every byte matched
	GIDIndex     *int    `json:"gid_index,omitempty"`
	// CPU the node process used (getrusage: every thread), in seconds of
	// user and system time, over CPUWallS seconds of wall time: the
	// measured phase for tcp, warmup and measured phase for rdma (its C
	// loop runs both in one call). (cpu_user_s + cpu_sys_s) / cpu_wall_s
	// is CPU seconds per second. cpu_wall_s 0: not measured (older node).
	CPUUserS float64 `json:"cpu_user_s"`
	CPUSysS  float64 `json:"cpu_sys_s"`
	CPUWallS float64 `json:"cpu_wall_s"`
	// CPUThreadS is the busiest thread's CPU seconds over the same wall
	// (0: not read).
	CPUThreadS float64 `json:"cpu_thread_s,omitempty"`
	// IdleS is the measured phase's time an rdma client's busy-polling
	// loop had nothing to do (Seconds less it is work); absent for tcp.
	IdleS *float64 `json:"idle_s,omitempty"`
	// StartUnixNs is when the first measured read was issued, wall clock
	// (CLOCK_REALTIME) in nanoseconds since the epoch, and Histogram every
	// measured read's latency: what the runner needs to line up several
	// clients' phases and merge their latencies. 0 and nil from an older
	// node.
	StartUnixNs int64      `json:"start_unix_ns,omitempty"`
	Histogram   *Histogram `json:"histogram,omitempty"`
	// LatSumUs is the sum of the LatSamples latencies: at queue depth 1,
	// where reads cannot overlap, it is below Seconds by what the client
	// spends between reads (verifying, posting).
	LatSumUs float64 `json:"lat_sum_us"`
	// LatSamples is how many reads the latency figures come from: every
	// read, or with rdma cq_moderation N > 1 the signalled ones only.
	LatSamples int64 `json:"lat_samples"`
	// RDMAPath is the rdma transport's side of the path; nil for tcp.
	*RDMAPath
	// LineRateMBs is the rate of the link the data crosses (the rdma
	// port, or the netdev with the listen address); nil when it cannot be
	// known, and LineRateUnknown says why.
	LineRateMBs     *float64 `json:"line_rate_mb_s,omitempty"`
	LineRateUnknown string   `json:"line_rate_unknown,omitempty"`
	// WarmupS is how long warmup steady read, wall clock; nil for a
	// fixed warmup, which the plan says.
	WarmupS *float64 `json:"warmup_s,omitempty"`
	// BwMinIntervalMBs and BwCoV are the slowest whole interval's
	// bandwidth and the whole intervals' coefficient of variation (with
	// --interval); nil with too few whole intervals.
	BwMinIntervalMBs *float64 `json:"bw_min_interval_mb_s,omitempty"`
	BwCoV            *float64 `json:"bw_cov,omitempty"`
	// Counters is what the client's host counted over the read (nil
	// from an older node).
	Counters *Counters `json:"counters,omitempty"`
	// OpenLoop is an open-loop client's (--rate) account; nil for a
	// closed loop.
	OpenLoop *OpenLoop `json:"open_loop,omitempty"`
	// BlockSize, QueueDepth and QPs are the workload node read, as it
	// ran it: bytes per read, reads in flight in all, and the QPs (rdma)
	// or connections (tcp: 1) they went over. 0 from an older node.
	BlockSize  int `json:"block_size,omitempty"`
	QueueDepth int `json:"queue_depth,omitempty"`
	QPs        int `json:"qps,omitempty"`
	// FirstReadS and LastReadS are from the end of the connection's
	// handshake to the first and the last READ's completion (rdma), for a
	// run that read the file once from its start without warmup; nil
	// otherwise.
	FirstReadS *float64 `json:"first_read_s,omitempty"`
	LastReadS  *float64 `json:"last_read_s,omitempty"`
}

// OpenLoop is what an open-loop client measured beside service latency:
// response latency, from each read's due time to its completion (a read
// held back by the queue depth, or by a stalled server, is late from its
// due time on), and how often the queue depth held reads back.
type OpenLoop struct {
	OfferedMBs float64 `json:"offered_mb_s"`
	Arrivals   string  `json:"arrivals"` // "fixed" or "poisson"
	// ArrivalSeed seeded a poisson schedule.
	ArrivalSeed *uint64 `json:"arrival_seed,omitempty"`
	RespP50Us   float64 `json:"resp_p50_us"`
	RespP99Us   float64 `json:"resp_p99_us"`
	RespP999Us  float64 `json:"resp_p999_us"`
	RespMaxUs   float64 `json:"resp_max_us"`
	// RespHistogram holds every measured read's response latency, so the
	// runner can merge several clients'.
	RespHistogram *Histogram `json:"resp_histogram,omitempty"`
	// Due is the measured reads, each with its due time; HeldBack those
	// due while queue_depth reads were in flight; Saturated is
	// IsSaturated(HeldBack, Due).
	Due       int64 `json:"due"`
	HeldBack  int64 `json:"held_back"`
	Saturated bool  `json:"saturated"`
}

// SetResponse sets the response figures from h.
func (o *OpenLoop) SetResponse(h *Histogram) {
	l := h.Summary()
	o.RespP50Us, o.RespP99Us, o.RespP999Us, o.RespMaxUs = l.P50Us, l.P99Us, l.P999Us, l.MaxUs
	o.RespHistogram = h
}

// SaturatedShare is the share of an open loop's due times that its queue
// depth may hold back before the run counts as saturated: beyond it, the
// client did not offer the load it was asked to.
const SaturatedShare = 0.01

// IsSaturated reports whether heldBack of due reads is more than
// SaturatedShare.
func IsSaturated(heldBack, due int64) bool {
	return due > 0 && float64(heldBack) > SaturatedShare*float64(due)
}

// RDMAPath is what node's rdma transport used on its side of a
// connection: the device and GID, how the QPs were connected, and their
// attributes. It is flattened into Ready (what the server will set on its
// QPs) and Result (read back from the client's first QP with
// ibv_query_qp, after connecting). Fields marked client-only are 0 or ""
// in Ready.
type RDMAPath struct {
	Device    string `json:"device"`
	IBPort    int    `json:"ib_port"`
	LinkLayer string `json:"link_layer"` // "InfiniBand" or "Ethernet"
	// LID is the port's InfiniBand LID (0 on RoCE), which addresses it
	// when the QPs carry no GRH.
	LID int `json:"lid,omitempty"`
	// GID is the GID the QPs send from: the entry gid_index names, the
	// one chosen by address, or with connect cm the one rdma_cm bound;
	// empty on InfiniBand without a GRH. GIDType "IB", "RoCE v1",
	// "RoCE v2".
	GID     string `json:"gid"`
	GIDType string `json:"gid_type"`
	Connect string `json:"connect"` // "tcp" (node's own exchange) or "cm" (rdma_cm)
	// GRH reports the QPs route by GID: always on RoCE, and on
	// InfiniBand when gid_index was given (a routed fabric).
	GRH          bool `json:"grh"`
	TrafficClass int  `json:"traffic_class"`
	ServiceLevel int  `json:"service_level"`
	PKeyIndex    int  `json:"pkey_index"`
	Timeout      int  `json:"timeout"` // 4.096 µs × 2^timeout per try
	RetryCnt     int  `json:"retry_cnt"`
	RNRRetry     int  `json:"rnr_retry"`
	MinRNRTimer  int  `json:"min_rnr_timer"`
	// ODPPrefetch is who carried out the server's odp_prefetch: "provider"
	// (libibverbs' ibv_advise_mr) or "kernel" (the uverbs ioctl, where
	// the provider has none); empty without a prefetch (server-only).
	ODPPrefetch string `json:"odp_prefetch,omitempty"`

	// MaxRdAtomic is the READs in flight per QP on the wire (client-only).
	MaxRdAtomic int `json:"max_rd_atomic,omitempty"`
	// QueueDepthPerQP is the READs posted per QP: up to the queue depth
	// spread over the QPs; beyond MaxRdAtomic the HCA holds them back
	// (client-only).
	QueueDepthPerQP int `json:"queue_depth_per_qp,omitempty"`
	// CQModeration N signals every Nth READ (client-only; 1: all).
	CQModeration int `json:"cq_moderation,omitempty"`
	// RelaxedOrdering reports the client's buffer was registered with
	// IBV_ACCESS_RELAXED_ORDERING (client-only; the device may ignore it).
	RelaxedOrdering *bool `json:"relaxed_ordering,omitempty"`
	// RelaxedOrderingGranted reports whether the buffer holds it, where
	// that can be known: false when not asked for and on a software
	// device, which never holds it; nil, unknown, on hardware, whose
	// driver decides by a rule its PCIe Device Control bit does not show
	// (client-only; docs/rdma.md).
	RelaxedOrderingGranted *bool `json:"relaxed_ordering_granted,omitempty"`
	// PathMTU in bytes, the smaller of the two ports' (client-only).
	PathMTU int `json:"path_mtu,omitempty"`
	// TrafficClassSet reports the plan set traffic_class; without it
	// TrafficClass is what the kernel used: with connect cm the port's
	// DefaultRoCETOS, else 0.
	TrafficClassSet bool `json:"traffic_class_set,omitempty"`
	// DefaultRoCETOS is the port's default_roce_tos in configfs
	// (rdma_cm/<device>/ports/<port>), which rdma_cm uses when no ToS is
	// set; nil where it cannot be read (no configfs, or no directory made
	// for the device: the kernel then uses 0).
	DefaultRoCETOS *int `json:"default_roce_tos,omitempty"`
}

// Interval is what node read completed in one interval of its measured
// phase: StartUnixNs (wall clock) to StartUnixNs + Seconds.
type Interval struct {
	Type        string  `json:"type"` // "interval"
	StartUnixNs int64   `json:"start_unix_ns"`
	Seconds     float64 `json:"seconds"`
	Reads       int64   `json:"reads"`
	Bytes       int64   `json:"bytes"`
}

// Done is node serve's last line after a successful run.
type Done struct {
	Type        string  `json:"type"` // "done"
	BytesServed int64   `json:"bytes_served"`
	Requests    int64   `json:"requests"`
	Seconds     float64 `json:"seconds"` // from the first client's arrival to the last one's departure
	MinorFaults int64   `json:"minor_faults"`
	MajorFaults int64   `json:"major_faults"`
	// CPU the serving process used over its clients' sessions (their
	// warmup included), as in Result. cpu_wall_s 0: not measured.
	CPUUserS   float64 `json:"cpu_user_s"`
	CPUSysS    float64 `json:"cpu_sys_s"`
	CPUWallS   float64 `json:"cpu_wall_s"`
	CPUThreadS float64 `json:"cpu_thread_s,omitempty"`
	// Connections is each client's session, in the order they ended, when
	// node served several (--clients).
	Connections []Connection `json:"connections,omitempty"`
	// Counters is what the server's host counted from the cache state
	// set to its clients' departure (nil from an older node).
	Counters *Counters `json:"counters,omitempty"`
	// Pipeline is a pipelined server's (--pipeline) preparation, done
	// region by region after its client connected; nil otherwise.
	Pipeline *Pipeline `json:"pipeline,omitempty"`
	// PinnedPeakBytes is the most bytes an rdma server had registered
	// pinned at once: the file's size serially, its window's pipelined
	// with one (Pipeline.PinnedPeakBytes); nil for odp and tcp.
	PinnedPeakBytes *int64 `json:"pinned_peak_bytes,omitempty"`
}

// Pipeline is what a pipelined server's preparation took, summed over
// its memory regions: populating (populate parallel) and registering
// each, and their rates over the file.
type Pipeline struct {
	Regions         int      `json:"regions"`
	Mapping         string   `json:"mapping"`
	PopulateS       *float64 `json:"populate_s,omitempty"`
	PopulateMBs     *float64 `json:"populate_mb_s,omitempty"`
	RegistrationS   *float64 `json:"registration_s"`
	RegistrationMBs *float64 `json:"registration_mb_s,omitempty"`
	// DiskIdlePct is the share of the span from the populate readers'
	// first read to their last with none of them reading (populate
	// parallel); nil without populate.
	DiskIdlePct *float64 `json:"disk_idle_pct,omitempty"`
	// Window is how many memory regions it kept registered at once
	// (--window; 0: every region stays until the session ends).
	Window int `json:"window,omitempty"`
	// Timeline is each memory region's stages, in order.
	Timeline []RegionStages `json:"timeline,omitempty"`
}

// RegionStages is when a pipelined server's stages of one memory region
// ran, in ms from the pipeline's start (the client's connection): its
// population's first read and last (populate parallel; nil without),
// its registration, and the announcement that let the client READ it.
// In JSON it is an array of the five in that order, to 0.01 ms, null for
// no populate: up to MaxRegions of them fit in one event line.
type RegionStages struct {
	PopulateStartMs, PopulateEndMs *float64
	RegisterStartMs, RegisterEndMs float64
	AnnouncedMs                    float64
}

// MarshalJSON writes the stages as [populate_start, populate_end,
// register_start, register_end, announced].
func (r RegionStages) MarshalJSON() ([]byte, error) {
	ms := func(v float64) string { return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) }
	opt := func(p *float64) string {
		if p == nil {
			return "null"
		}
		return ms(*p)
	}
	return []byte("[" + opt(r.PopulateStartMs) + "," + opt(r.PopulateEndMs) + "," + ms(r.RegisterStartMs) + "," + ms(r.RegisterEndMs) + "," + ms(r.AnnouncedMs) + "]"), nil
}

// UnmarshalJSON reads MarshalJSON's array.
func (r *RegionStages) UnmarshalJSON(b []byte) error {
	var a []*float64
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	if len(a) != 5 || a[2] == nil || a[3] == nil || a[4] == nil {
		return fmt.Errorf("region stages %s: want [populate_start, populate_end, register_start, register_end, announced]", b)
	}
	*r = RegionStages{PopulateStartMs: a[0], PopulateEndMs: a[1], RegisterStartMs: *a[2], RegisterEndMs: *a[3], AnnouncedMs: *a[4]}
	return nil
}

// Connection is one client's session as the server saw it.
type Connection struct {
	BytesServed int64   `json:"bytes_served"`
	Requests    int64   `json:"requests"`
	Seconds     float64 `json:"seconds"`
}

// Error is the last line of every failed node run.
type Error struct {
	Type    string `json:"type"` // "error"
	Message string `json:"message"`
	// Code names the kind of failure a program may act on, "" for the
	// rest: one of the ErrorCode constants.
	Code string `json:"code,omitempty"`
}

// Error codes.
const (
	// ErrorCodeVerifyMismatch: a byte read differs from the file's pattern.
	ErrorCodeVerifyMismatch = "verify_mismatch"
	// ErrorCodeODPVerifyMismatch: the same, from a server that registered
	// its region with on-demand paging: the device's ODP returned wrong
	// data, and figures measured on it are not to be trusted.
	ErrorCodeODPVerifyMismatch = "odp_verify_mismatch"
	// ErrorCodeMemAvailable: pinning the region would need more memory
	// than the host has available.
	ErrorCodeMemAvailable = "mem_available"
	// ErrorCodeNeedsCM: the device is iWARP, which connects only through
	// rdma_cm (rdma connect: cm).
	ErrorCodeNeedsCM = "needs_cm"
)

// Warning is a message for a person that did not stop the run.
type Warning struct {
	Type    string `json:"type"` // "warning"
	Message string `json:"message"`
}

// Control is a line node reads from stdin under --control-stdin. The first
// carries Secret (hex), which authenticates the clients the runner
// started; a later one with Go set releases node read --barrier to read.
type Control struct {
	Secret string `json:"secret,omitempty"`
	Go     bool   `json:"go,omitempty"`
	// AtUnixNs, with Go, is when to start reading, wall clock
	// (CLOCK_REALTIME) in nanoseconds since the epoch: a launcher whose
	// stdin is slow to deliver (srun) would otherwise skew the clients'
	// starts by its delay. A go that arrives after it starts at once; one
	// more than MaxGoWait ahead (a clock that disagrees that much) too.
	AtUnixNs int64 `json:"at_unix_ns,omitempty"`
}

// MaxGoWait bounds how long node read --barrier waits for a go's
// AtUnixNs.
const MaxGoWait = 10 * time.Second

// ErrNotEvent is wrapped by Decode for lines that are not events.
var ErrNotEvent = errors.New("not a node event")

// Decode parses one stdout line of node into *Started, *Ready, *Result,
// *Interval, *Done, *Error or *Warning. Anything else wraps ErrNotEvent.
func Decode(line []byte) (any, error) {
	if len(line) > MaxEventLine {
		return nil, fmt.Errorf("%w: line of %d bytes is over the %d-byte limit", ErrNotEvent, len(line), MaxEventLine)
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotEvent, err)
	}
	var ev any
	switch head.Type {
	case TypeStarted:
		ev = new(Started)
	case TypeReady:
		ev = new(Ready)
	case TypeResult:
		ev = new(Result)
	case TypeDone:
		ev = new(Done)
	case TypeInterval:
		ev = new(Interval)
	case TypeError:
		ev = new(Error)
	case TypeWarning:
		ev = new(Warning)
	default:
		return nil, fmt.Errorf("%w: unknown type %q", ErrNotEvent, head.Type)
	}
	if err := json.Unmarshal(line, ev); err != nil {
		return nil, fmt.Errorf("%w: %s event: %v", ErrNotEvent, head.Type, err)
	}
	return ev, nil
}
