package results

import (
	"math"
	"strconv"
	"time"

	"rdmasweep/results/param"
)

// The schema: every CSV column and every parameter, declared once.
//
// Rules (TestSchema and TestHeaderHistory hold them):
//   - The CSV's columns are the entries with a Column, in table order. New
//     columns are only ever appended at the end of the table; none is
//     renamed, reordered or removed, because notebooks index them.
//   - A param is swept only if it has a column, so every row says its
//     value.
//   - A param added after version 1 has Since > 1: it enters point keys
//     only when it differs from its default.
//   - A column that is not a param is a field of Row with that csv tag.
//   - Entries without a column (plan-only params) may sit anywhere; they
//     are placed beside their relatives.
//
// docs/plan.md's parameter tables, docs/csv.md and the parameters' Go
// constants (param/names.go) are generated from this table (go generate
// ./results); a test fails when they drift.

//go:generate go run ./internal/gendocs -docs ../docs -names param/names.go

// Field is one entry of the schema: a CSV column, a param, or a param
// recorded in its own column.
type Field struct {
	Column string // the CSV column; "" for a param without one
	Unit   string // of the column's figures
	Doc    string // what the column records
	Param  *Param // the param, or nil for a column that is not one
}

// FirstHeaderLen is the length of the first header, version 1's: every
// rdmasweep CSV starts with those columns.
const FirstHeaderLen = 33

var schema = []Field{
	{Column: "run_id", Doc: "one `runner exec`; `RUN_ID.json` beside the CSV is its manifest"},
	{Column: "plan", Doc: "the plan's name"},
	{Column: "point_key", Doc: "the point's key; rows are matched on (point_key, repetition) to resume"},
	{Column: "repetition", Doc: "1..repeat"},
	{Column: "started_at", Unit: "RFC 3339 UTC", Doc: "when the server was started"},
	{Column: "status", Doc: "`ok` or `failed`"},
	{Column: "error", Doc: "one line; the full stderr is in the log file"},
	{Column: "transport", Doc: "`tcp` or `rdma`", Param: &Param{
		Name: "transport", Kind: KindEnum, Enum: []string{TransportTCP, TransportRDMA}, Default: TransportTCP,
		Flag: "transport", Role: "both", Since: 1,
		Doc: "how the client reads the server's region: `rdma` READs, or `tcp` requests (every plan can run without RDMA hardware)"}},
	{Column: "server_host", Doc: "`local`, `user@address:port`, or the host as the pool names it"},
	{Column: "client_host", Doc: "`local`, `user@address:port`, or the host as the pool names it"},

	{Param: &Param{
		Name: "file", Section: "server", Kind: KindPath, Required: true,
		Flag: "file", Role: "serve", Since: 1,
		Doc: "absolute path of the file on the server host"}},
	{Column: "file_size_bytes", Unit: "bytes", Doc: "the region served: the file's first file_size bytes", Param: &Param{
		Name: "file_size", Section: "server", Kind: KindSize, Required: true, Min: 1, Sweep: true,
		Flag: "file-size", Role: "serve", Since: 1,
		Doc: "node serves the first `file_size` bytes of the file; a multiple of block_size"}},
	{Param: &Param{
		Name: "create", Section: "server", Kind: KindBool, Default: "false",
		Flag: "create", Role: "serve", Since: 1,
		Doc: "make the file (and its sidecar) if needed; never overwrites a file it did not make"}},
	{Column: "block_size_bytes", Unit: "bytes", Doc: "bytes per read", Param: &Param{
		Name: "block_size", Section: "client", Kind: KindSize, Default: "1MiB", Min: 1, Max: 1<<31 - 1,
		Limits: []Limit{
			{Transport: TransportTCP, Max: 256 << 20, Why: "the tcp wire's largest reply"},
			{Transport: TransportRDMA, Max: 1 << 30, Why: "node's largest RDMA READ"},
		},
		Sweep: true, Flag: "block-size", Role: "read", Since: 1,
		Doc: "bytes per read"}},
	{Column: "queue_depth", Doc: "reads in flight", Param: &Param{
		Name: "queue_depth", Section: "client", Kind: KindInt, Default: "16", Min: 1, Max: 1 << 20,
		Limits: []Limit{{Transport: TransportRDMA, Max: 4096, Why: "node's RDMA read loop holds 4096 reads in flight"}},
		Sweep:  true, Flag: "queue-depth", Role: "read", Since: 1,
		Doc: "reads in flight in total, spread evenly over the QPs"}},
	{Column: "qps", Doc: "RDMA queue pairs", Param: &Param{
		Name: "qps", Section: "client", Kind: KindInt, Default: "1", Min: 1, Max: 1 << 16,
		Limits: []Limit{{Transport: TransportRDMA, Max: 1024, Why: "node connects at most 1024 QPs"}},
		Sweep:  true, Flag: "qps", Role: "read", Since: 1,
		Doc: "RDMA queue pairs (tcp uses one connection)"}},
	{Column: "pattern", Doc: "`sequential` or `random`", Param: &Param{
		Name: "pattern", Section: "client", Kind: KindEnum, Enum: []string{"sequential", "random"}, Default: "sequential",
		Sweep: true, Flag: "pattern", Role: "read", Since: 1,
		Doc: "`sequential`, or `random`: a seeded shuffled permutation of the blocks, each block once per pass"}},
	{Column: "cache", Doc: "`cold` or `warm`", Param: &Param{
		Name: "cache", Section: "server", Kind: KindEnum, Enum: []string{"cold", "warm"}, Default: "cold",
		Sweep: true, Flag: "cache", Role: "serve", Since: 1,
		Doc: "`cold` drops the file's pages before the point; `warm` reads it once"}},
	{Column: "registration", Doc: "`pinned` or `odp`; empty for tcp", Param: &Param{
		Name: "registration", Section: "server", Kind: KindEnum, Enum: []string{"pinned", "odp"}, Default: "pinned",
		Transports: []string{TransportRDMA}, Sweep: true, Flag: "registration", Role: "serve", Since: 1,
		Doc: "`pinned` registers and pins the whole region; `odp` uses on-demand paging"}},
	{Column: "total_bytes", Unit: "bytes", Doc: "what the point was set to read (`total`, or file_size for 0); 0 for a duration", Param: &Param{
		Name: "total", Section: "client", Kind: KindSize, Default: "0", Min: 0,
		Sweep: true, Flag: "total", Role: "read", Since: 1,
		Doc:  "bytes read per point; 0 reads file_size; may exceed file_size (several passes)",
		cell: func(v Values) string { return formatInt(EffectiveTotal(v)) }, none: "0"}},
	{Column: "duration_s", Unit: "seconds", Doc: "the point's duration; 0 when it reads a total", Param: &Param{
		Name: "duration", Section: "client", Kind: KindDuration, Default: "0s", Min: 0,
		Sweep: true, Flag: "duration", Role: "read", Since: 1,
		Doc: "when > 0, read for this long instead of `total`"}},
	{Column: "warmup_s", Unit: "seconds", Doc: "the plan's warmup; empty for `warmup: steady` (see `warmup_used_s`)", Param: &Param{
		Name: "warmup", Section: "client", Kind: KindDuration, Default: "0s", Min: 0, Auto: true, AutoWord: "steady",
		Sweep: true, Flag: "warmup", Role: "read", Since: 1,
		// steady: empty, so the rows of a point still agree on it (summary
		// and plot group by it); warmup_used_s has what each took.
		cell: func(v Values) string {
			if n := v.Int(param.Warmup); n >= 0 {
				return strconv.FormatFloat(time.Duration(n).Seconds(), 'f', -1, 64)
			}
			return ""
		},
		Doc: "read this long first, unmeasured; `steady`: until the last 5 intervals' bandwidth moves under 1 % an interval, at most `warmup_max`"}},
	{Param: &Param{
		Name: "warmup_max", Section: "client", Kind: KindDuration, Default: "30s", Min: 1,
		Flag: "warmup-max", Role: "read", Since: 6,
		when: func(v Values) bool { return v.Int(param.Warmup) < 0 },
		Doc:  "with `warmup: steady`, the longest warmup; then the point is measured anyway"}},
	{Param: &Param{
		Name: "verify", Section: "client", Kind: KindBool, Default: "false",
		Flag: "verify", Role: "read", Since: 1,
		Doc: "check every byte read against the file's pattern"}},
	{Param: &Param{
		Name: "port", Section: "server", Kind: KindInt, Default: "0", Min: 0, Max: 65535,
		Flag: "port", Role: "serve", Since: 1,
		Doc: "the server's TCP port, 0 for any free one (the RDMA handshake runs over it too)"}},
	{Param: &Param{
		Name: "device", Section: SectionRDMA, Kind: KindString, PerHost: true,
		Transports: []string{TransportRDMA}, Flag: "rdma-device", Role: "both", Since: 1,
		Doc: "the verbs device, e.g. `mlx5_0`; default the one holding the address the role uses, or on InfiniBand the only active port (docs/rdma.md)"}},
	{Param: &Param{
		Name: "ib_port", Section: SectionRDMA, Kind: KindInt, Auto: true, AutoKey: 1, Min: 1, Max: 255, PerHost: true,
		Transports: []string{TransportRDMA}, Flag: "ib-port", Role: "both", Since: 1,
		Doc: "the device's port; auto: the port holding the address in use, else 1"}},
	{Param: &Param{
		Name: "gid_index", Section: SectionRDMA, Kind: KindInt, Auto: true, Min: 0, Max: 255, PerHost: true,
		Transports: []string{TransportRDMA}, Flag: "gid-index", Role: "both", Since: 1,
		Doc: "the GID table entry for RoCE; auto picks the GID of the address in use, preferring RoCE v2"}},

	{Column: "bytes", Unit: "bytes", Doc: "read in the measured phase"},
	{Column: "seconds", Unit: "seconds", Doc: "first read issued to last read completed, after warmup"},
	{Column: "bandwidth_mb_s", Unit: "MB/s (10^6 bytes/s)", Doc: "bytes ÷ seconds"},
	{Column: "iops", Unit: "reads/s", Doc: "reads ÷ seconds"},
	{Column: "lat_avg_us", Unit: "µs", Doc: "mean latency per read, issue to completion"},
	{Column: "lat_p50_us", Unit: "µs", Doc: "median latency per read"},
	{Column: "lat_p99_us", Unit: "µs", Doc: "99th percentile latency per read"},
	{Column: "lat_p999_us", Unit: "µs", Doc: "99.9th percentile latency per read"},
	{Column: "lat_max_us", Unit: "µs", Doc: "the slowest read"},
	{Column: "verified", Doc: "true only when verify was on and every byte matched"},
	{Column: "registration_s", Unit: "seconds", Doc: "RDMA: time to register (and, pinned, fault in) the region; empty for tcp"},
	{Column: "registration_mb_s", Unit: "MB/s (10^6 bytes/s)", Doc: "file_size ÷ registration_s (+ prefetch_s with odp_prefetch; odp without: empty); fault-in plus pinning, not the SSD's rate"},
	{Column: "cached_fraction", Unit: "0..1", Doc: "share of the region in the page cache (mincore) before registration"},

	// Version 2: several clients per point (fan-in and pairs).
	{Param: &Param{
		Name: "topology", Kind: KindEnum, Enum: []string{"fan-in", "pairs", "pairwise", "ring"}, Default: "fan-in", Since: 2,
		Doc: "`fan-in`: every client reads one server; `pairs`: server i serves client i; over `hosts.pool`, `pairwise`: every host reads every other, in rounds; `ring`: host i reads host i+1 (docs/scale.md)"}},
	{Column: "scope", Doc: "`client`: one client's reads; `aggregate`: all clients in their common window (written last)"},
	{Column: "clients", Doc: "how many clients read at once in the point", Param: &Param{
		Name: "clients", Section: "client", Kind: KindInt, Auto: true, AutoWord: "all", Min: 1, Max: 1024,
		Sweep: true, Since: 2,
		Doc: "how many of the listed clients take part in a point, the first k; sweep it to find the knee"}},
	{Column: "start_skew_s", Unit: "seconds", Doc: "aggregate rows: the spread of the clients' first reads after the start barrier"},

	// Version 3: peer workloads and CPU (issue 14).
	{Column: "workload", Doc: "`node`, or the peer workload that made the row (docs/workloads.md); empty means node", Param: &Param{
		// A string, not an enum: the peers are runner/points/peer's
		// registry, which refuses a name it does not hold (planload), so a
		// new peer is one file there and no line here.
		Name: "workload", Kind: KindString, Default: "node",
		Sweep: true, Since: 3,
		Doc: "what measures the point: `node`, or a peer workload to compare with (docs/workloads.md); swept, it varies fastest"}},
	{Column: "cpu_server", Unit: "CPU s per s", Doc: "CPU seconds (user + sys) per second of the server role's processes; 1.0 is one core; empty where it has none (docs/workloads.md)"},
	{Column: "cpu_client", Unit: "CPU s per s", Doc: "the same for the client role (the reading side)"},

	// Version 4: RDMA on real clusters (issue 11).
	{Column: "mapping", Doc: "rdma: how the server mapped the file: `shared-ro`, `private-ro` or `shared-rw`; empty for tcp"},
	{Column: "max_rd_atomic", Doc: "rdma: READs in flight per QP on the wire, as the plan set them; empty for auto (the negotiated value is in the manifest)", Param: &Param{
		Name: "max_rd_atomic", Section: SectionRDMA, Kind: KindInt, Auto: true, Min: 1, Max: 255,
		Transports: []string{TransportRDMA}, Sweep: true, Flag: "max-rd-atomic", Role: "read", Since: 4,
		// auto: empty, as a peer's row is; a number here is what the plan asked.
		cell: func(v Values) string {
			if n := v.Int(param.MaxRdAtomic); n > 0 {
				return formatInt(n)
			}
			return ""
		},
		Doc: "RDMA READs in flight per QP on the wire (perftest's `-o`); auto: the most both devices allow"}},
	{Column: "cq_moderation", Doc: "rdma: every Nth READ per QP was signalled, as node used it (auto resolved, capped at the depth per QP, 1 in an open loop); for N > 1 latency is the signalled READs'", Param: &Param{
		Name: "cq_moderation", Section: SectionRDMA, Kind: KindInt, Auto: true, AutoKey: 1, Min: 1, Max: 4096,
		Transports: []string{TransportRDMA}, Sweep: true, Flag: "cq-moderation", Role: "read", Since: 4,
		// What node will use, by its one rule (CQModeration); a row of a
		// run node reported on takes node's own figure (Row.SetResult).
		// auto keys as 1, the default before, so existing plans keep
		// their keys.
		cell: func(v Values) string {
			n := CQModeration(int(v.Int(param.CQModeration)), int(v.Int(param.QueueDepth)), int(v.Int(param.QPs)), v.Str(param.Rate) != "")
			return formatInt(int64(n))
		},
		Doc: "signal every Nth READ per QP (perftest's `--cq-mod`); auto: max(1, depth per QP ÷ 4); latency is the signalled READs'"}},
	{Column: "relaxed_ordering", Doc: "rdma: the client's buffer was registered with `IBV_ACCESS_RELAXED_ORDERING`", Param: &Param{
		Name: "relaxed_ordering", Section: SectionRDMA, Kind: KindBool, Default: "true",
		Transports: []string{TransportRDMA}, Sweep: true, Flag: "relaxed-ordering", Role: "read", Since: 4,
		Doc: "register the client's buffer with relaxed PCIe ordering, as perftest does; `false`: perftest's `--disable_pcie_relaxed`"}},
	{Column: "odp_prefetch", Doc: "rdma odp: the server prefetched the region (`ibv_advise_mr`); empty otherwise", Param: &Param{
		Name: "odp_prefetch", Section: SectionRDMA, Kind: KindBool, Default: "false",
		Transports: []string{TransportRDMA}, Sweep: true, Flag: "odp-prefetch", Role: "serve", Since: 4,
		when: func(v Values) bool { return v.Str(param.Registration) == "odp" },
		Doc:  "with `registration: odp`, fault the region in with `ibv_advise_mr` before ready"}},
	{Column: "prefetch_s", Unit: "seconds", Doc: "rdma, odp_prefetch: how long the prefetch took, after registration_s"},
	{Param: &Param{
		Name: "connect", Section: SectionRDMA, Kind: KindEnum, Enum: []string{ConnectTCP, ConnectCM}, Default: ConnectTCP,
		Transports: []string{TransportRDMA}, Flag: "rdma-connect", Role: "both", Since: 4,
		Doc: "how the QPs are connected: `tcp`, node's own exchange, as perftest by default; `cm`, rdma_cm, which iWARP devices need"}},
	{Param: &Param{
		Name: "traffic_class", Section: SectionRDMA, Kind: KindInt, Auto: true, Min: 0, Max: 255,
		Transports: []string{TransportRDMA}, Flag: "traffic-class", Role: "both", Since: 4,
		Doc: "the GRH traffic class on both roles' QPs (RoCE: DSCP << 2 | ECN); auto sets none: connect cm then uses the port's `default_roce_tos`, connect tcp sends 0"}},
	{Param: &Param{
		Name: "service_level", Section: SectionRDMA, Kind: KindInt, Default: "0", Min: 0, Max: 15,
		Transports: []string{TransportRDMA}, Flag: "service-level", Role: "both", Since: 4,
		Doc: "the InfiniBand service level"}},
	{Param: &Param{
		Name: "pkey_index", Section: SectionRDMA, Kind: KindInt, Default: "0", Min: 0, Max: 65535,
		Transports: []string{TransportRDMA}, Flag: "pkey-index", Role: "both", Since: 4,
		Doc: "the P_Key table index"}},
	{Param: &Param{
		Name: "timeout", Section: SectionRDMA, Kind: KindInt, Default: "14", Min: 0, Max: 31,
		Transports: []string{TransportRDMA}, Flag: "qp-timeout", Role: "both", Since: 4,
		Doc: "the QP's local ACK timeout, 4.096 µs × 2^timeout per try"}},
	{Param: &Param{
		Name: "retry_cnt", Section: SectionRDMA, Kind: KindInt, Default: "7", Min: 0, Max: 7,
		Transports: []string{TransportRDMA}, Flag: "retry-cnt", Role: "both", Since: 4,
		Doc: "transport retries before a READ fails with retry exceeded"}},
	{Param: &Param{
		Name: "rnr_retry", Section: SectionRDMA, Kind: KindInt, Default: "7", Min: 0, Max: 7,
		Transports: []string{TransportRDMA}, Flag: "rnr-retry", Role: "both", Since: 4,
		Doc: "receiver-not-ready retries (7: forever)"}},
	{Param: &Param{
		Name: "min_rnr_timer", Section: SectionRDMA, Kind: KindInt, Default: "12", Min: 0, Max: 31,
		Transports: []string{TransportRDMA}, Flag: "min-rnr-timer", Role: "both", Since: 4,
		Doc: "the minimum RNR NAK timer code the QPs advertise"}},
	{Param: &Param{
		Name: "trust_odp", Section: SectionRDMA, Kind: KindBool, Default: "false",
		Transports: []string{TransportRDMA}, Since: 4, Unkeyed: true,
		Doc: "run odp points on a server whose ODP failed the verified probe (exec refuses them otherwise)"}},

	// What the client's RDMA path used (issue 24).
	{Column: "link_layer", Doc: "rdma: the client port's link layer, `InfiniBand` or `Ethernet`"},
	{Column: "lid", Doc: "rdma on InfiniBand: the client port's LID; empty on RoCE"},
	// Verdicts: the line rate the figures are judged against, the
	// judgement of the plan's expect list, and the knee search's mark.
	{Column: "line_rate_mb_s", Unit: "MB/s", Doc: "the data rate of the server's link (docs/verdicts.md); empty when unknown"},
	{Column: "verdict", Doc: "the plan's `expect` list on this row: `pass`, `fail`, `unknown`, or empty with no expectation"},
	{Column: "verdict_detail", Doc: "why the verdict is not `pass`, one clause per expectation, e.g. `bandwidth_mb_s 812.3 < 0.9 × line_rate 1250.0`"},
	{Column: "search", Doc: "a plan with `search`: `probe` for a value tried, `knee` on the rows at the value found; empty otherwise"},
	// Version 5: pool sweeps, pairwise and ring (issue 21).
	{Param: &Param{
		Name: "pairwise_parallel", Kind: KindInt, Auto: true, AutoWord: "all", Min: 1, Max: 1 << 16, Since: 5,
		Doc: "topology pairwise: pairs run at once in a round; `all`: N/2; 1: one at a time, an idle-fabric baseline"}},
	{Param: &Param{
		Name: "max_parallel", Kind: KindInt, Auto: true, AutoWord: "none", Min: 1, Max: 1 << 16, Since: 5,
		Doc: "pairwise and ring: at most this many pairs in a round; a bigger one is split"}},
	{Column: "round", Doc: "pairwise and ring: the pair's round, from 1; empty otherwise"},
	// Version 6: the file as several memory regions (issue 23).
	{Column: "mr_size", Unit: "bytes", Doc: "rdma: the memory region size; 0: one region over the file", Param: &Param{
		Name: "mr_size", Section: "server", Kind: KindSize, Default: "0", Min: 0,
		Transports: []string{TransportRDMA}, Sweep: true, Flag: "mr-size", Role: "serve", Since: 6,
		Doc: "register the file as memory regions of at most this many bytes, each with its own rkey; 0: one region. block_size must divide it"}},
	{Column: "regions", Doc: "rdma: how many memory regions the file was registered as"},
	// Steadiness from the time series (issue 22).
	{Column: "bw_min_interval_mb_s", Unit: "MB/s (10^6 bytes/s)", Doc: "client rows: the slowest whole interval of the time series; empty with none"},
	{Column: "bw_cov", Unit: "ratio", Doc: "client rows: the whole intervals' bandwidth sd ÷ mean; empty with fewer than 2"},
	{Column: "warmup_used_s", Unit: "seconds", Doc: "client rows of `warmup: steady`: the warmup it read, wall clock; empty otherwise"},
	// What the hosts counted during each run (issue 22,
	// docs/telemetry.md). Every raw delta is in RUN_ID.counters.jsonl.
	{Column: "disk_read_bytes", Unit: "bytes", Doc: "what the block device under the server's file read (sectors × 512) from the cache step to the point's end; empty without one (tmpfs)"},
	{Column: "server_major_faults", Doc: "node serve's major page faults (getrusage) over its life, registration included"},
	{Column: "server_minor_faults", Doc: "node serve's minor page faults over its life"},
	{Column: "tcp_retrans", Unit: "segments", Doc: "tcp: segments the data connection retransmitted (`tcpi_total_retrans`), both ends; empty for rdma"},
	{Column: "rdma_retrans_events", Doc: "rdma: the ports' retransmit, sequence-error and duplicate counters, summed by device family (docs/telemetry.md); empty where it has none (siw)"},
	{Column: "rdma_cnp", Unit: "packets", Doc: "rdma: congestion notification packets the ports sent; empty where the device does not count them (rxe, siw)"},
	{Column: "rdma_ecn_marked", Unit: "packets", Doc: "rdma: RoCE packets that arrived ECN-marked; empty where the device does not count them (rxe, siw)"},
	{Column: "net_drops", Unit: "packets", Doc: "the data's network devices' `rx_dropped` + `tx_dropped` over the read, each device counted once"},
	// Open-loop clients (issue 23, docs/load.md).
	{Column: "resp_p50_us", Unit: "µs", Doc: "open loop: median response latency, from each read's due time to its completion; empty for a closed loop"},
	{Column: "resp_p99_us", Unit: "µs", Doc: "open loop: 99th percentile response latency per read"},
	{Column: "resp_p999_us", Unit: "µs", Doc: "open loop: 99.9th percentile response latency per read"},
	{Column: "resp_max_us", Unit: "µs", Doc: "open loop: the slowest response"},
	{Column: "offered_mb_s", Unit: "MB/s (10^6 bytes/s)", Doc: "open loop: the load each client offered in MB/s; empty for a closed loop", Param: &Param{
		Name: "rate", Section: "client", Kind: KindRate, Sweep: true, Flag: "rate", Role: "read", Since: 6,
		cell: func(v Values) string {
			r, err := ParseRate(v.Str(param.Rate))
			if err != nil || r.IsZero() {
				return ""
			}
			return strconv.FormatFloat(math.Round(r.MBs(v.Int(param.BlockSize))*1e6)/1e6, 'f', -1, 64)
		},
		Doc: "open loop: each client's load, `200MB/s` or `50000iops`, a read posted when due if fewer than queue_depth are in flight; unset: closed loop (docs/load.md)"}},
	{Column: "arrivals", Doc: "open loop: `fixed` or `poisson`; empty for a closed loop", Param: &Param{
		Name: "arrivals", Section: "client", Kind: KindEnum, Enum: []string{"fixed", "poisson"}, Default: "fixed",
		Sweep: true, Flag: "arrivals", Role: "read", Since: 6,
		when: func(v Values) bool { return v.Str(param.Rate) != "" },
		Doc:  "with `rate`: when reads are due; `fixed`, evenly spaced; `poisson`, a seeded Poisson process with as many reads as fixed"}},
	{Column: "saturated", Doc: "open loop: `true` when queue_depth held back reads at more than 1 % of the due times; empty for a closed loop"},
	// Version 7: the SSD itself (issue 34, docs/rdma.md#populate).
	{Column: "populate", Doc: "how node's server brought the file into memory", Param: &Param{
		Name: "populate", Section: "server", Kind: KindEnum, Enum: []string{PopulateFault, PopulateParallel}, Default: PopulateFault,
		Sweep: true, Flag: "populate", Role: "serve", Since: 7,
		when: func(v Values) bool { return v.Str(param.IO) != IODirect }, // it reads the file itself
		Doc:  "`fault`: what first touches the cold file faults it in; `parallel`: readers bring it in first; pipelined, unwritten: `parallel` ([rdma.md](rdma.md#populate))"}},
	{Column: "populate_s", Unit: "seconds", Doc: "populate `parallel`: how long it took, before registration_s"},
	{Column: "populate_mb_s", Unit: "MB/s (10^6 bytes/s)", Doc: "file_size ÷ populate_s"},
	{Column: "disk_busy_pct", Unit: "%", Doc: "the server's block device: `io_ticks` over the span it read in (from the 100 ms tick before its first read to the one after its last)"},
	{Column: "disk_avg_queue", Doc: "the same device's `time_in_queue` over that span: the I/Os it held on average"},
	{Column: "bound_by", Doc: "`disk`, `link`, `cpu_server`, `cpu_client`, several joined by `+` (`disk+link`), or `unknown`: the resource at 90 % or more of its capacity, and any other within 0.05 of it ([telemetry.md](telemetry.md#what-bound-a-row))"},
	{Column: "bound_by_detail", Doc: "each resource's share of its capacity, highest first"},
	{Column: "pipeline", Doc: "rdma: the server populated and registered the file region by region while the client read", Param: &Param{
		Name: "pipeline", Section: "server", Kind: KindBool, Default: "false",
		Transports: []string{TransportRDMA}, Sweep: true, Flag: "pipeline", Role: "serve", Since: 7,
		Doc: "prepare the file region by region (`mr_size`) once the client connects, announcing each as it is ready ([rdma.md](rdma.md#pipeline))"}},
	{Column: "first_read_ms", Unit: "ms", Doc: "a point that reads the file once from its start without warmup: from the start of the server's preparation to the first read's completion, less the wait for the client"},
	{Column: "end_to_end_mb_s", Unit: "MB/s (10^6 bytes/s)", Doc: "the same points: bytes read ÷ the time from the start of the server's preparation to the last read's completion; a peer that reads the file (fio, fio_matched, nvmeof): its rate"},
	// Version 8: the SSD measured honestly (issue 40, docs/ssd.md).
	{Column: "cold_read_fraction", Unit: "ratio", Doc: "node's cold rows: disk_read_bytes ÷ the bytes the point brought in (file_size, or fewer); under 0.95, or cached_fraction over 0.02: not proven cold, verdict `cold` ([verdicts.md](verdicts.md#cold))"},
	{Column: "disk_ceiling_mb_s", Unit: "MB/s (10^6 bytes/s)", Doc: "cold rows: the disk's ceiling under the server's file (fio O_DIRECT, once per run and host: [ssd.md](ssd.md#the-disks-ceiling)); empty without fio or on tmpfs"},
	{Column: "disk_read_mb_s", Unit: "MB/s (10^6 bytes/s)", Doc: "node's server: its block device's read rate while the clients read; ÷ disk_ceiling_mb_s, the disk's bound_by share ([telemetry.md](telemetry.md#what-bound-a-row))"},
	{Column: "cpu_server_thread", Doc: "node serve's busiest thread: its CPU seconds per second, 1.0 at one core; a CPU's bound_by share"},
	{Column: "cpu_client_thread", Doc: "the same for node read"},
	{Column: "path_mtu", Unit: "bytes", Doc: "rdma: the path MTU; tcp: the server's netdev's MTU"},
	{Column: "link_capacity_mb_s", Unit: "MB/s (10^6 bytes/s)", Doc: "the most payload the link carries, of which the link's bound_by share is ([telemetry.md](telemetry.md#what-bound-a-row))"},
	{Column: "link_capacity_from", Doc: "`line_rate` (at path_mtu) or `measured` (no line rate)"},
	{Column: "cpu_client_busy", Unit: "ratio", Doc: "node read over rdma: its busy-polling loop's working share of the measured phase (the client CPU's bound_by share)"},
	{Column: "bound_by_prep", Doc: "a serial cold rdma row: bound_by of the server's preparation before its READs"},
	{Column: "bound_by_prep_detail", Doc: "its shares, as bound_by_detail"},
	// Version 9: the SSD streamed (issue 41, docs/ssd.md).
	{Column: "disk_idle_pct", Unit: "%", Doc: "pipelined, populate `parallel`: the share of the server's span of reads of the file with none in flight ([ssd.md](ssd.md#the-timeline))"},
	{Column: "window", Doc: "pipelined: the regions kept registered", Param: &Param{
		Name: "window", Section: "server", Kind: KindInt, Default: "0", Min: 0, Max: MaxRegions,
		Sweep: true, Flag: "window", Role: "serve", Since: 9,
		when: func(v Values) bool { return v.Bool(param.Pipeline) || v.Str(param.IO) == IODirect },
		Doc:  "pipelined, one pass: at most this many regions registered, each dropped once read ([ssd.md](ssd.md#memory)); 0: all. io direct: its ring's buffers"}},
	{Column: "pinned_peak_bytes", Unit: "bytes", Doc: "rdma, pinned: the most bytes node's server had registered at once"},
	{Column: "io", Doc: "how node's server read the file", Param: &Param{
		Name: "io", Section: "server", Kind: KindEnum, Enum: []string{IOMmap, IODirect}, Default: IOMmap,
		Sweep: true, Flag: "io", Role: "serve", Since: 9,
		Doc: "`mmap`: through the page cache; `direct`: one pass, O_DIRECT into a ring of `window` buffers ([ssd.md](ssd.md#direct-io))"}},
}

// MaxRegions is the most memory regions node registers one file as
// (file_size ÷ mr_size); their rkeys travel in one handshake message.
const MaxRegions = 8192

// Columns is the CSV header, in order: the schema's entries that have a
// column. It only ever grows at its end.
var Columns = func() []string {
	var cols []string
	for _, f := range schema {
		if f.Column != "" {
			cols = append(cols, f.Column)
		}
	}
	return cols
}()

// params is every param, in table order, each with its constant. A param
// the generated constants lack (param/names.go is stale until go generate
// ./results runs) gets an ID no constant has; TestNamesAreGenerated fails.
var params = func() []*Param {
	var ps []*Param
	for _, f := range schema {
		if f.Param != nil {
			id, ok := param.ByName(f.Param.Name)
			if !ok {
				id = param.ID(-1 - len(ps))
			}
			f.Param.id = id
			ps = append(ps, f.Param)
		}
	}
	return ps
}()

// Schema returns the table, for generated docs and tests.
func Schema() []Field { return append([]Field(nil), schema...) }

// ColumnParam returns the param recorded in column, or nil.
func ColumnParam(column string) *Param {
	for _, f := range schema {
		if f.Column == column {
			return f.Param
		}
	}
	return nil
}

// ParamColumn returns the column that records param name, or "".
func ParamColumn(name string) string {
	for _, f := range schema {
		if f.Param != nil && f.Param.Name == name {
			return f.Column
		}
	}
	return ""
}
