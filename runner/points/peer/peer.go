// Package peer runs the established tools a node figure is compared with
// (ib_read_bw for the fabric, iperf3 for TCP, fio for the SSD) as plan
// workloads: it turns one point's parameters into each tool's argv, decides
// from `ss -ltn` output when the tool's server listens, and reads the
// tool's JSON into the figures a node row has.
//
// Everything here is pure: no process is started and no host is touched.
// The runner starts the commands on the hosts the Commands name. Each peer
// is one file (ibreadbw.go, iperf3.go, fio.go): its workload name, its
// Tool with its table, its argv builder and its report's parser, and one
// line in tools, below, registers it. Nothing outside the peer's file names
// it. docs/workloads.md writes out every mapping.
package peer

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"rdmasweep/results"
	"rdmasweep/results/param"
)

// Params are one point's parameter values as a peer sees them, with the
// plan's defaults already filled in (FromValues). Field comments give the
// plan's name for each; ParamError.Param uses the same names. Which of
// them a peer takes, as what option, and which values it refuses, is
// that peer's table (ibReadBWMap, iperf3Map, fioMap).
type Params struct {
	// Transport is the point's transport: the one the peer measures must
	// be it ("" = not known, not checked).
	Transport string

	BlockSize  int64         // block_size, bytes
	QueueDepth int           // queue_depth
	QPs        int           // qps
	Pattern    string        // pattern: "sequential" or "random" ("" = sequential)
	Total      int64         // total, bytes; 0 with Duration 0 means FileSize
	Duration   time.Duration // duration; > 0 makes the point time-based
	Warmup     time.Duration // warmup
	Verify     bool          // verify

	File         string // file: the server's file (fio reads it)
	FileSize     int64  // file_size: the bytes of File that are served
	Cache        string // cache: "cold" or "warm" ("" = cold)
	Registration string // registration: "pinned" or "odp" ("" = pinned)

	// ServerAddr is the address the server listens on and the client
	// connects to (the server host's data address); Port is the server's
	// port (0: the peer's own default).
	ServerAddr string
	Port       int

	RDMADevice      string // rdma.device ("" = the peer's choice)
	RDMAIBPort      int    // rdma.ib_port (0 = 1)
	RDMAGIDIndex    int    // rdma.gid_index (-1 = the peer's choice)
	RDMAMaxRdAtomic int    // rdma.max_rd_atomic (0 = the device's maximum)
	RDMACQMod       int    // rdma.cq_moderation (0 = the peer's own default)
	RDMAConnect     string // rdma.connect (tcp or cm)
	RDMATClass      *int   // rdma.traffic_class (nil = none set)
	// Chosen is the device, port and GID node itself uses on this side's
	// host for the point's connection (node devices --route-to the
	// server's data address), or nil when not known. A peer that takes
	// them uses them where the plan leaves device, ib_port or gid_index
	// to auto, so it runs where node runs, not on its own default (GID 0,
	// often RoCE v1 or link-local).
	Chosen *results.DeviceChoice

	// OutDir is a directory on each host where a peer that writes its
	// report to a file (ib_read_bw) puts it. "" is the working directory.
	// It must be one only the runner's user may write: the peer opens the
	// name it is given and follows a symlink there.
	OutDir string
	// ReportTag, when set, is part of each report's file name: the runner
	// gives every point a random one, so no name in OutDir is known ahead.
	ReportTag string
}

// NodeProgram, as an argv's first word, runs the node the runner
// deployed on that host: a peer whose side is one of node's commands.
const NodeProgram = "{node}"

// Commands is what to run for one point. The runner starts Server (when
// there is one) on the server host, waits until ReadyPort is listening
// there (see Listening), then runs Client on the host ClientHost names,
// and hands the report (the client's stdout, or the file ClientReport
// names on the client's host) to Parse.
type Commands struct {
	Server []string // argv of the server; nil for a peer without one (fio)
	Client []string // argv of the measuring side
	// ClientHost is "client", or "server" for a peer that measures on the
	// server's host alone (fio reads the server's own file).
	ClientHost string
	// ReadyPort is the port Server listens on; 0 when there is no server.
	ReadyPort int
	// ReadyCM says Server listens through rdma_cm, not on a TCP socket:
	// it is ready when an rdma_cm id listens on ReadyPort (CMListening).
	ReadyCM bool
	// ClientReport is the path of the client's JSON report on its host;
	// "" means the report is the client's stdout.
	ClientReport string
	// ServerReport is a report file the server writes too ("" = none).
	// Parse does not need it; the runner may keep it in the logs.
	ServerReport string
	// Control says Server and Client are node's own commands that read
	// the point's control line on stdin (its secret, results.Control) and
	// stop when stdin ends: the runner writes them the line, and leaves
	// their stdin open for the point's length.
	Control bool
}

// KernelAuth is a peer's in-band authentication as a host's kernel has
// it: Module depends on Needs (its modules.dep entry names Needs), or
// Needs is built in. Name is what runner check calls it.
type KernelAuth struct{ Name, Module, Needs string }

// Result is a peer's report read into the figures a node row has. MB is
// 10^6 bytes. Optional figures are nil when the peer does not give them.
type Result struct {
	Bytes        int64   // bytes moved in the measured phase
	Seconds      float64 // length of the measured phase
	BandwidthMBs float64 // Bytes / Seconds / 1e6
	IOPS         *float64
	// Latency per operation, issue to completion, in microseconds (fio
	// only: ib_read_bw and iperf3 report no per-operation latency).
	Latency *Latency
	// Verified: the peer checked a sample of what it read against the
	// server's file (nvmeof), and it matched.
	Verified bool
	// Reported are the report's own CPU figures, under its own names:
	// ib_read_bw's CPU_util, iperf3's host_total and remote_total, fio's
	// usr_cpu and sys_cpu. A row's CPU cells come from node run
	// instead, the same measure for every workload; these go to the
	// counters sidecar.
	Reported map[string]float64
}

// Latency is a latency summary in microseconds.
type Latency struct {
	AvgUs, P50Us, P99Us, P999Us, MaxUs float64
}

// ParamError says a peer cannot take one of the point's parameters. Param
// is the plan's name for it (e.g. "verify", "rdma.max_rd_atomic"), so the
// plan's validate can point at the line that sets it.
type ParamError struct {
	Peer   string
	Param  string
	Reason string
}

func (e *ParamError) Error() string {
	return fmt.Sprintf("workload %s cannot take %s: %s", e.Peer, e.Param, e.Reason)
}

// ErrUnknown is wrapped when a workload name is not a peer's.
var ErrUnknown = errors.New("unknown peer workload")

// Tool describes a peer's program and where it comes from, for `runner
// check` and for the message when a host lacks it.
type Tool struct {
	Name    string // the workload name
	Binary  string // looked up on the host's PATH
	Debian  string // package that ships Binary
	RHEL    string
	Version string // the version whose output the parser is tested on
	// Transport is what the peer measures, "rdma" or "tcp"; "" for a peer
	// that reads the file on its host (fio), which takes any.
	Transport string
	// Roles are the roles whose hosts run Binary: "server" and "client",
	// or "server" alone (fio). A peer with a server process (HasServer)
	// also needs ss on the server's host, for its readiness.
	Roles     []string
	HasServer bool
	// Ignored lists the plan parameters the peer takes without effect
	// (their value changes nothing it does), by plan path, from its table.
	// A validator may refuse a sweep over one of them, since its peer rows
	// would repeat.
	Ignored []string
	// Map is how the peer takes each parameter it takes, refuses or
	// ignores, beside the peer (ibreadbw.go, iperf3.go, fio.go).
	Map []Mapping
	// Modules, when set, are the kernel modules role's host needs for a
	// point over transport (loaded, or loadable by modprobe).
	Modules func(role, transport string) []string
	// Auth, when set, is how a host's kernel shows it has the peer's
	// in-band authentication for role, for runner check to say.
	Auth func(role string) KernelAuth
	// Clean, when set, is an argv (starting with NodeProgram) run on every
	// host before an exec's first point, after its leftover nodes are
	// stopped: it removes what a killed run of the peer left on the host.
	Clean []string
	// OnServerHost: the peer measures on the server's host alone, after
	// node prepare has made the server's file (fio reads that file).
	OnServerHost bool
	// ReadsFile: the tool reads the server's file (fio on its host, nvmeof
	// through the target), so a one-pass read's rate is the file's way,
	// as node's end_to_end_mb_s is.
	ReadsFile bool
	// ClockStep is the resolution of the time the tool reports (fio's
	// runtime: whole milliseconds); 0 where it reports finer. A run
	// shorter than MinSteps of it is quantized (TooShort).
	ClockStep time.Duration

	build func(Params) Commands               // argv for a point Check passed
	parse func(report []byte) (Result, error) // the report, into a row's figures
}

// MinSteps is how many of its clock's steps a peer's run must last for
// its time, and so its figures, to be within 1 %.
const MinSteps = 100

// TooShort reports whether a run of workload that lasted d is shorter
// than MinSteps of its tool's clock, with that step; false for node and a
// tool that times finer.
func TooShort(workload string, d time.Duration) (step time.Duration, short bool) {
	t, err := Lookup(workload)
	if err != nil || t.ClockStep == 0 {
		return 0, false
	}
	return t.ClockStep, d < MinSteps*t.ClockStep
}

// Mapping is how a peer takes one parameter of the plan: the option it
// becomes, or why the peer cannot take the point's value. A parameter a
// peer's table does not name is not passed to it.
type Mapping struct {
	Param param.ID
	// Option is the tool's flag or option the parameter becomes, as the
	// tool spells it; "" when it becomes none.
	Option string
	// Refuse, when set, says why the peer cannot take p's value of the
	// parameter, or returns "" when it can. Only values that ask for
	// something are refused: at its default, a parameter passes, so a
	// plan's defaults never trip it.
	Refuse func(p Params) string
	// Ignored: the peer takes the parameter without effect.
	Ignored bool
}

// tools are the peers, one line each; a peer's Tool is in its own file.
var tools = []Tool{
	ibReadBW,
	iperf3,
	fio,
	fioMatched,
	nvmeof,
}

// Names lists the peer workloads.
func Names() []string {
	var n []string
	for _, t := range tools {
		n = append(n, t.Name)
	}
	return n
}

// Lookup returns the Tool of a peer workload.
func Lookup(name string) (Tool, error) {
	for _, t := range tools {
		if t.Name == name {
			for _, m := range t.Map {
				if m.Ignored {
					t.Ignored = append(t.Ignored, results.ParamOf(m.Param).Path())
				}
			}
			t.Map, t.Clean = slices.Clone(t.Map), slices.Clone(t.Clean)
			return t, nil
		}
	}
	return Tool{}, fmt.Errorf("%w %q (want one of %s)", ErrUnknown, name, strings.Join(Names(), ", "))
}

// nodeOnly are the parameters only node uses: how node makes the file
// servable and serves it (populate, pipeline, window, io, mr_size,
// odp_prefetch) and its QP's PCIe ordering (relaxed_ordering). No peer's
// table names them.
var nodeOnly = []param.ID{param.Populate, param.Pipeline, param.Window, param.IO, param.MRSize, param.ODPPrefetch, param.RelaxedOrdering}

// Unused names the parameters the peer does not use, by plan name:
// node's own (nodeOnly). A plan expands a peer's point once over a sweep
// of them (plan.ExpandOptions.Unused), since every value would run the
// same peer command. (The Ignored ones still have a cell: cache and file
// say what node prepared, and the rows are read by them.)
func Unused(name string) ([]string, error) {
	if _, err := Lookup(name); err != nil {
		return nil, err
	}
	var out []string
	for _, id := range nodeOnly {
		out = append(out, id.String())
	}
	return out, nil
}

// Check returns every parameter of p that the peer cannot take, so a
// validator can report them all at once. Each error is a *ParamError. Only
// values that ask for something are refused: a parameter at its neutral
// value (verify false, pattern sequential, registration pinned, ...)
// passes, so a plan's defaults never trip it.
func Check(name string, p Params) ([]*ParamError, error) {
	t, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	var errs []*ParamError
	if p.Transport != "" && t.Transport != "" && p.Transport != t.Transport {
		// Its row would record a transport it did not use.
		errs = append(errs, &ParamError{Peer: name, Param: param.Transport.String(), Reason: fmt.Sprintf(
			"%s measures %s, and the point's transport is %s; compare it with node over transport: %s", name, t.Transport, p.Transport, t.Transport)})
	}
	c := &paramErrs{peer: name}
	c.common(p)
	for _, m := range t.Map {
		if m.Refuse == nil {
			continue
		}
		if why := m.Refuse(p); why != "" {
			c.add(m.Param, "%s", why)
		}
	}
	return append(errs, c.errs...), nil
}

// Build returns the commands of a peer for p. It fails when Check finds
// anything (the error joins every *ParamError, for errors.As) or the name
// is unknown.
func Build(name string, p Params) (Commands, error) {
	errs, err := Check(name, p)
	if err != nil {
		return Commands{}, err
	}
	if len(errs) > 0 {
		var all []error
		for _, e := range errs {
			all = append(all, e)
		}
		return Commands{}, errors.Join(all...)
	}
	t, _ := Lookup(name) // Check found it
	return t.build(p), nil
}

// Parse reads a peer's report (see Commands.ClientReport) into a Result.
func Parse(name string, report []byte) (Result, error) {
	t, err := Lookup(name)
	if err != nil {
		return Result{}, err
	}
	r, err := t.parse(report)
	if err != nil {
		return Result{}, fmt.Errorf("read %s report: %w", name, err)
	}
	return r, nil
}

// paramErr collects ParamErrors for one peer.
type paramErrs struct {
	peer string
	errs []*ParamError
}

func (c *paramErrs) add(id param.ID, format string, args ...any) {
	c.errs = append(c.errs, &ParamError{Peer: c.peer, Param: id.String(), Reason: fmt.Sprintf(format, args...)})
}

// common checks what every peer needs of the shape of a point.
func (c *paramErrs) common(p Params) {
	if p.BlockSize <= 0 {
		c.add(param.BlockSize, "must be positive (got %d)", p.BlockSize)
	}
	if p.QueueDepth < 0 {
		c.add(param.QueueDepth, "must be positive (got %d)", p.QueueDepth)
	}
	if p.QPs < 0 {
		c.add(param.QPs, "must be positive (got %d)", p.QPs)
	}
	if p.Warmup < 0 { // warmup: steady, which plan reads as -1
		c.add(param.Warmup, "steady (node's own rule); a peer warms up for a fixed time, such as 2s")
	}
	if p.Duration < 0 || p.Total < 0 {
		c.add(param.Duration, "duration, warmup and total cannot be negative")
	}
	if p.Pattern != "" && p.Pattern != "sequential" && p.Pattern != "random" {
		c.add(param.Pattern, "must be sequential or random (got %q)", p.Pattern)
	}
	if p.Registration != "" && p.Registration != "pinned" && p.Registration != "odp" {
		c.add(param.Registration, "must be pinned or odp (got %q)", p.Registration)
	}
	if p.Cache != "" && p.Cache != "cold" && p.Cache != "warm" {
		c.add(param.Cache, "must be cold or warm (got %q)", p.Cache)
	}
}

// refuseIf is why, when cond holds: a Mapping's Refuse in one line.
func refuseIf(cond bool, format string, args ...any) string {
	if !cond {
		return ""
	}
	return fmt.Sprintf(format, args...)
}

// wholeSeconds returns d in whole seconds, or false when d is not a whole
// number of seconds (ib_read_bw and iperf3 take integers).
func wholeSeconds(d time.Duration) (int64, bool) {
	return int64(d / time.Second), d%time.Second == 0
}

// total is the bytes a total-based point reads: Total, or FileSize.
func (p Params) total() int64 {
	if p.Total > 0 {
		return p.Total
	}
	return p.FileSize
}

func (p Params) qps() int {
	if p.QPs <= 0 {
		return 1
	}
	return p.QPs
}

func ptr(f float64) *float64 { return &f }

// reported keeps the figures of m that are finite and not negative; nil
// when none is.
func reported(m map[string]float64) map[string]float64 {
	for k, v := range m {
		if v < 0 || !finite(v) {
			delete(m, k)
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

func finite(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }
