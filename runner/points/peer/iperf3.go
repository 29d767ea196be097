package peer

// iperf3 (3.12). The server handles one client and exits (-1); the client
// reverses the stream (-R), so the bytes flow server -> client as node
// read's do, and prints JSON (-J) on stdout. The mapping is iperf3Map,
// below; total (no duration) becomes -n in bytes, which iperf3 counts at
// the sender, and the server's address is -B on the server and -c on the
// client.
//
// -Z (zero copy): not used. With -R the server would send with
// sendfile(2) from a file of its own; measured here on loopback, that made
// iperf3 slower, not faster (1 MiB, one stream, same run: 2186 and 1751
// MB/s with -Z, 3166 and 3055 MB/s without). The baseline is iperf3 as
// people run it, and here its faster form, so the ratio cannot flatter
// node by handicapping the peer.
//
// queue_depth has no meaning for a stream (the TCP window bounds what is
// in flight) and is ignored.

import (
	"encoding/json"
	"fmt"
	"strconv"

	"rdmasweep/results"
	"rdmasweep/results/param"
)

// Iperf3 is the TCP peer, as a plan's workload names it.
const Iperf3 = "iperf3"

var iperf3 = Tool{Name: Iperf3, Binary: "iperf3", Debian: "iperf3", RHEL: "iperf3", Version: "3.12",
	Transport: results.TransportTCP, Roles: []string{"server", "client"}, HasServer: true, Map: iperf3Map,
	build: buildIperf3, parse: parseIperf3}

// iperf3Map is how iperf3 takes the plan's parameters.
var iperf3Map = []Mapping{
	{Param: param.BlockSize, Option: "-l", Refuse: func(p Params) string {
		return refuseIf(p.BlockSize > 1<<30, "iperf3's -l takes at most 1GiB (got %d)", p.BlockSize)
	}},
	{Param: param.QPs, Option: "-P", Refuse: func(p Params) string { // parallel streams
		return refuseIf(p.qps() > 128, "iperf3's -P takes at most 128 streams (got %d)", p.QPs)
	}},
	{Param: param.Duration, Option: "-t", Refuse: func(p Params) string {
		_, whole := wholeSeconds(p.Duration)
		return refuseIf(p.Duration > 0 && !whole, "iperf3's -t takes whole seconds (got %s)", p.Duration)
	}},
	{Param: param.Warmup, Option: "-O", Refuse: func(p Params) string { // omitted from the sums
		_, whole := wholeSeconds(p.Warmup)
		return refuseIf(!whole, "iperf3's -O takes whole seconds (got %s)", p.Warmup)
	}},
	{Param: param.Total, Option: "-n"},
	{Param: param.Port, Option: "-p"}, // 0: iperf3's 5201
	{Param: param.Verify, Refuse: func(p Params) string {
		return refuseIf(p.Verify, "iperf3 sends its own buffer's bytes, not the server's file, so there are no bytes to verify")
	}},
	{Param: param.Pattern, Refuse: func(p Params) string {
		return refuseIf(p.Pattern == "random", "iperf3 sends one stream; it has no random order")
	}},
	{Param: param.Registration, Refuse: func(p Params) string {
		return refuseIf(p.Registration == "odp", "iperf3 registers no memory")
	}},
	{Param: param.QueueDepth, Ignored: true},
	{Param: param.Cache, Ignored: true},
	{Param: param.File, Ignored: true},
	{Param: param.Device, Ignored: true},
	{Param: param.IBPort, Ignored: true},
	{Param: param.GIDIndex, Ignored: true},
	{Param: param.MaxRdAtomic, Ignored: true},
}

func buildIperf3(p Params) Commands {
	port := p.Port
	if port == 0 {
		port = 5201 // iperf3's default
	}
	ps := strconv.Itoa(port)
	server := []string{"iperf3", "-s", "-1", "-p", ps}
	if p.ServerAddr != "" {
		server = append(server, "-B", p.ServerAddr)
	}
	client := []string{"iperf3", "-c", p.ServerAddr, "-p", ps, "-R",
		"-l", strconv.FormatInt(p.BlockSize, 10), "-P", strconv.Itoa(p.qps())}
	if p.Duration > 0 {
		d, _ := wholeSeconds(p.Duration)
		client = append(client, "-t", strconv.FormatInt(d, 10))
	} else {
		client = append(client, "-n", strconv.FormatInt(p.total(), 10))
	}
	if w, _ := wholeSeconds(p.Warmup); w > 0 {
		client = append(client, "-O", strconv.FormatInt(w, 10))
	}
	client = append(client, "-J")
	return Commands{Server: server, Client: client, ClientHost: "client", ReadyPort: port}
}

// iperfReport is the part of iperf3 -J's output that Parse reads.
type iperfReport struct {
	Error string `json:"error"`
	Start struct {
		TestStart struct {
			Reverse int `json:"reverse"`
		} `json:"test_start"`
	} `json:"start"`
	End struct {
		SumReceived *struct {
			Seconds float64 `json:"seconds"`
			Bytes   int64   `json:"bytes"`
		} `json:"sum_received"`
		CPU *struct {
			HostTotal   float64 `json:"host_total"`
			RemoteTotal float64 `json:"remote_total"`
		} `json:"cpu_utilization_percent"`
	} `json:"end"`
}

func parseIperf3(b []byte) (Result, error) {
	var rep iperfReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return Result{}, err
	}
	if rep.Error != "" {
		return Result{}, fmt.Errorf("iperf3 failed: %s", rep.Error)
	}
	if rep.Start.TestStart.Reverse != 1 {
		return Result{}, fmt.Errorf("not a reverse (-R) run: the client sent, so it measured the wrong direction")
	}
	s := rep.End.SumReceived
	if s == nil || s.Bytes <= 0 || !(s.Seconds > 0) || !finite(s.Seconds) {
		return Result{}, fmt.Errorf("end.sum_received holds no measurement")
	}
	// The receiver is the client (-R); its sum leaves out the -O seconds.
	r := Result{Bytes: s.Bytes, Seconds: s.Seconds, BandwidthMBs: float64(s.Bytes) / s.Seconds / 1e6}
	// cpu_utilization_percent is each process's own user+sys time over
	// the test's wall time (getrusage), 100 = one CPU. host is the side
	// that printed the JSON, the client; remote is the server.
	if c := rep.End.CPU; c != nil {
		r.Reported = reported(map[string]float64{"host_total": c.HostTotal, "remote_total": c.RemoteTotal})
	}
	return r, nil
}
