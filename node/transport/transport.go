// Package transport is the contract between node's serve/read commands and
// the ways bytes can move: tcp (node/transport/tcp) and rdma
// (node/transport/rdma). Every transport passes the conformance suite in
// node/transport/transporttest.
//
// The server side owns a Region (the first Size bytes of a file) and serves
// exactly one client. The client side connects, learns the region's size and
// verify seed in the handshake, and runs a Workload against it, timing every
// read itself.
package transport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"rdmasweep/node/counters"
	"rdmasweep/node/region"
	"rdmasweep/results"
)

// Region is what the server exposes: the first Size bytes of File. The
// transport maps or sends it as it needs; it must never expose a byte at or
// beyond Size.
type Region struct {
	File *os.File // open for reading; also writable when Writable is true
	Path string
	Size int64
	Seed uint64 // content seed, sent to the client for verification
	// Patterned reports the file holds node's pattern for Seed (it was made
	// with --create). A user's own file has no pattern and cannot be verified.
	Patterned bool

	// Writable reports File was opened O_RDWR. RDMA needs a shared writable
	// mapping on some kernels to register a file; it still registers the
	// region for remote reads only.
	Writable bool
}

// RDMA holds the per-host RDMA settings. Other transports ignore it. Its
// zero value, with GIDIndex -1, is the defaults.
type RDMA struct {
	// Device "" picks the device whose network interface holds the
	// address the connection uses (the server's listen address, the
	// client's source address); on InfiniBand with no such device, the
	// only active IB port.
	Device   string
	IBPort   int // 1-based; 0: the port holding the address, or 1
	GIDIndex int // -1 picks the GID from the address in use
	// Connect is how the QPs are connected: "tcp" ("" too), node's own
	// exchange over the TCP connection with hand-built QP transitions, or
	// "cm", the RDMA connection manager, which iWARP needs.
	Connect string
	// Fabric is the QPs' fabric attributes; nil is DefaultFabric.
	Fabric *Fabric

	// MaxRdAtomic (client) is the READs in flight per QP on the wire; 0
	// is the most both sides allow. The queue depth per QP may be deeper:
	// the HCA holds the rest back, as perftest's tx depth does.
	MaxRdAtomic int
	// CQModeration (client) signals every Nth READ per QP, as perftest's
	// --cq-mod; 0 is auto, max(1, queue depth per QP / 4)
	// (results.CQModeration). Latency is then timed on the signalled READs only.
	CQModeration int
	// NoRelaxedOrdering (client) registers the read buffer without
	// IBV_ACCESS_RELAXED_ORDERING, as perftest's --disable_pcie_relaxed.
	NoRelaxedOrdering bool
	// ODPPrefetch (server), with registration odp, prefetches the whole
	// region with ibv_advise_mr before the server is ready.
	ODPPrefetch bool
}

// Fabric is what a fabric may need set on each QP, on both sides: READ
// responses carry the server QP's GRH, so RoCE DSCP/ECN needs
// TrafficClass on both.
type Fabric struct {
	TrafficClass int // GRH traffic class: RoCE DSCP << 2 | ECN; -1 unset
	ServiceLevel int // InfiniBand SL
	PKeyIndex    int
	Timeout      int // local ACK timeout, 4.096 µs × 2^Timeout
	RetryCnt     int
	RNRRetry     int
	MinRNRTimer  int
}

// DefaultFabric is what perftest sets: its timers, and no traffic class
// unless asked (rdma_cm then uses the port's default_roce_tos; a
// hand-built GRH carries 0).
func DefaultFabric() Fabric {
	return Fabric{TrafficClass: -1, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 12}
}

// ServerConfig is what node serve passes to Listen.
type ServerConfig struct {
	Region        Region
	Host          string // address to listen on; "" is all addresses
	Port          int    // 0 picks a free port
	AcceptTimeout time.Duration
	Secret        []byte // nil: no authentication (node run by hand)
	Registration  string // "pinned" or "odp"; tcp ignores it
	// MRSize registers the region as memory regions of at most this many
	// bytes; 0 is one region. tcp ignores it.
	MRSize int64
	RDMA   RDMA
	// Pipeline (rdma) registers the region one memory region at a time
	// after the client connects, and announces each to it as it is
	// ready; Listen then registers nothing. Populate, when set, brings
	// the file into the page cache as memory regions of the lengths in
	// sizes, calling ready in order as each is in, while the regions
	// before it are registered (populate parallel: region.PopulateStream);
	// admit, when not nil, waits until region i may be read. nil leaves
	// that to the registration.
	Pipeline bool
	Populate func(ctx context.Context, sizes []int64, admit func(ctx context.Context, i int) error, ready func(i int, t region.RegionTimes)) (region.Stream, error)
	// Window (with Pipeline) keeps at most this many memory regions
	// registered: each is deregistered, and its pages dropped, once the
	// client has read it, before the one Window after it is registered;
	// Populate's admit holds its readers within reach of them. 0: every
	// region stays until the session ends.
	Window int
	// IO (rdma) is how the file is read: results.IOMmap, or IODirect: one
	// pass with O_DIRECT into a ring of results.DirectSlots(Window)
	// buffers of MRSize, registered once before ready, each announced
	// when full and refilled once the client has released it.
	IO string
}

// ReadyInfo is what a Server reports once it can accept its client.
type ReadyInfo struct {
	Address string // the host part it listens on
	Port    int
	// RegistrationS is how long registering the region took (nil when
	// the transport registers nothing); RegistrationMBs its rate, when
	// registering brought every page in (pinned, or odp with prefetch).
	RegistrationS   *float64
	RegistrationMBs *float64
	PrefetchS       *float64 // odp prefetch, after RegistrationS
	Mapping         string   // how the region is mapped, "" if not mapped
	Regions         int      // the memory regions registered, 0 if none
	GIDIndex        *int
	Path            *results.RDMAPath // rdma only
}

// ServeStats is the server's own account of one client's session.
type ServeStats struct {
	BytesServed int64
	Requests    int64
	Seconds     float64
	// CPU is the process's CPU time over the client's session (its
	// warmup included: the server cannot tell the client's phases apart).
	CPU CPUTime
	// TCP is the data connection's own TCP_INFO over the session; nil
	// for a transport whose data crosses no TCP connection (rdma).
	TCP *counters.TCPPhase
	// Pipeline is a pipelined session's preparation (ServerConfig.Pipeline).
	Pipeline *results.Pipeline
	// PinnedPeakBytes is the most bytes an rdma server had registered
	// pinned at once; nil for odp and tcp.
	PinnedPeakBytes *int64
}

// Server is a prepared, listening server. Listen returns only once the
// region is prepared (registered) and the port is open, so Ready is valid.
type Server interface {
	Ready() ReadyInfo
	// Serve waits up to AcceptTimeout for one client that authenticates,
	// serves it until it ends the session, and returns. A session that
	// ends abnormally, as far as the transport can tell (rdma: a client
	// that aborts or vanishes without its bye), is an error. A connection
	// that fails the handshake is dropped and logged (through the warn
	// callback given to Listen), and Serve keeps waiting for a proper
	// client. Cancelling ctx stops Serve promptly. Serve may be called
	// several times at once, one call per client the server expects
	// (fan-in): the region is shared, each call accepts and serves its
	// own client and returns that client's stats.
	Serve(ctx context.Context) (ServeStats, error)
	// Close releases the listener and every resource; it is safe to call
	// more than once and after Serve.
	Close() error
}

// ClientConfig is what node read passes to Dial.
type ClientConfig struct {
	Addr   string // host:port of the server
	Secret []byte
	// QPs and QueueDepth and BlockSize are known at connect time because
	// RDMA sizes its queues and registers its buffer then.
	QPs        int
	QueueDepth int
	BlockSize  int
	RDMA       RDMA
}

// RegionInfo is what the client learns in the handshake.
type RegionInfo struct {
	Size      int64
	Seed      uint64
	Patterned bool
}

// Workload says what to read. Offsets are multiples of BlockSize below
// RegionInfo.Size, in the order Pattern gives (see node/workload).
type Workload struct {
	BlockSize  int
	QueueDepth int
	Pattern    string // "sequential" or "random"
	// Total bytes to read after warmup; when Duration > 0, read for that
	// long instead. One of them is non-zero.
	Total    int64
	Duration time.Duration
	Warmup   time.Duration
	Verify   bool
	Seed     uint64 // shuffle seed for "random"
	// Interval, when > 0, asks for the reads completed in each interval of
	// the measured phase (Measurement.Intervals).
	Interval time.Duration
	// Rate, when > 0, makes the client open-loop: reads per second, each
	// due at its time in the Arrivals schedule ("fixed" or "poisson",
	// seeded by ArrivalSeed; see node/workload.Schedule) and posted then,
	// never early, while fewer than QueueDepth are in flight. Warmup runs
	// at the same rate. 0: closed loop, a read posted as one completes.
	Rate        float64
	Arrivals    string
	ArrivalSeed uint64
}

// Measurement is the client's account of a workload, after warmup.
type Measurement struct {
	Bytes   int64
	Reads   int64
	Seconds float64 // first read issued to last completed
	// Start is the wall-clock time (CLOCK_REALTIME) the first measured
	// read was issued, so several clients' phases can be lined up.
	Start     time.Time
	Latency   Latencies
	Histogram *results.Histogram // every measured read's latency
	// Intervals counts the reads completed in each Workload.Interval from
	// Start; nil when none was asked for or the transport cannot tell.
	Intervals []int64
	Verified  bool // Verify was on and every byte matched
	GIDIndex  *int
	Path      *results.RDMAPath // rdma only
	// OpenLoop is an open-loop workload's account (Workload.Rate > 0);
	// nil for a closed loop.
	OpenLoop *OpenLoop
	// CPU is the process's CPU time over the measured phase, where the
	// transport can isolate it (tcp), or over warmup and measured phase
	// together (rdma, whose C loop runs both in one call); CPU.WallS says
	// which span it covers.
	CPU CPUTime
	// TCP is the data connection's own TCP_INFO over the measured phase;
	// nil for a transport whose data crosses no TCP connection (rdma).
	TCP *counters.TCPPhase
	// QPs is what the reads went over: the QPs (rdma), or the one
	// connection (tcp), whatever ClientConfig.QPs asked.
	QPs int
	// FirstReadS and LastReadS are from the end of the connection's
	// handshake to the first and the last read's completion, for a
	// closed loop that read the region once from its start without
	// warmup (rdma and tcp); nil otherwise.
	FirstReadS, LastReadS *float64
	// IdleS is the measured phase's time a busy-polling client had
	// nothing to do (rdma); nil where the thread blocks instead (tcp),
	// and its CPU time says the same.
	IdleS *float64
}

// OpenLoop is what an open-loop client measures beside service latency
// (Measurement.Latency, post to completion).
type OpenLoop struct {
	// Response holds each measured read's response latency, from its due
	// time to its completion.
	Response *results.Histogram
	// Due is the measured reads, each with a due time; HeldBack those
	// due while QueueDepth reads were in flight, which were posted late.
	Due, HeldBack int64
}

// Latencies summarises per-read latency, issue to completion, in
// microseconds, over N reads (every read, or a sample of them: see
// RDMA.CQModeration); SumUs is their sum.
type Latencies = results.Latencies

// Client is a connected, authenticated client.
type Client interface {
	Region() RegionInfo
	// Read runs the workload and returns when it is done, failed, or ctx is
	// cancelled. A verify mismatch is an error wrapping ErrMismatch.
	Read(ctx context.Context, w Workload) (Measurement, error)
	Close() error
}

// Transport makes servers and clients of one kind.
type Transport interface {
	Name() string
	// Listen prepares the region and opens the listener. warn receives
	// messages for a person (e.g. a refused handshake); it may be nil.
	Listen(ctx context.Context, cfg ServerConfig, warn func(string)) (Server, error)
	Dial(ctx context.Context, cfg ClientConfig) (Client, error)
}

// ErrMismatch is wrapped by Client.Read when verify finds a byte that differs
// from the file's pattern.
var ErrMismatch = errors.New("verify mismatch")

// ErrODPMismatch wraps ErrMismatch when the server registered its region
// with on-demand paging: the device's ODP returned wrong data.
var ErrODPMismatch = fmt.Errorf("%w on a region registered with on-demand paging (odp)", ErrMismatch)

// ErrMemAvailable is wrapped when pinning would need more memory than the
// host has available.
var ErrMemAvailable = errors.New("not enough available memory to pin")

// ErrNeedsCM is wrapped when a device connects only through rdma_cm
// (iWARP) and connect tcp was asked for.
var ErrNeedsCM = errors.New("the device connects only through rdma_cm")

// ErrAuth is wrapped when a handshake fails authentication.
var ErrAuth = errors.New("authentication failed")
