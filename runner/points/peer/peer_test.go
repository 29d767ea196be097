package peer

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"rdmasweep/results/param"
)

func TestBuildArgv(t *testing.T) {
	for _, tc := range []struct {
		peer         string
		p            Params
		server, cli  string
		host, report string
		port         int
	}{
		{IBReadBW, Params{BlockSize: 1 << 20, QueueDepth: 16, QPs: 1, Duration: 10 * time.Second, Warmup: 2 * time.Second,
			RDMADevice: "mlx5_0", RDMAIBPort: 1, RDMAGIDIndex: 3, RDMAMaxRdAtomic: 16, RDMACQMod: 4, ServerAddr: "10.0.0.1", OutDir: "/tmp/rs"},
			"ib_read_bw -s 1048576 -q 1 -t 16 -o 16 -Q 4 -d mlx5_0 -i 1 -x 3 -p 18515 -D 14 --margin 2 --cpu_util --out_json --out_json_file=/tmp/rs/ib_read_bw.server.json",
			"ib_read_bw -s 1048576 -q 1 -t 16 -o 16 -Q 4 -d mlx5_0 -i 1 -x 3 -p 18515 -D 14 --margin 2 --cpu_util --out_json --out_json_file=/tmp/rs/ib_read_bw.client.json 10.0.0.1",
			"client", "/tmp/rs/ib_read_bw.client.json", 18515},
		// total-based: -n per QP, rounded up; -t the depth per QP, -Q
		// node's auto at it; no gid index (-1), no -o.
		{IBReadBW, Params{BlockSize: 65536, QueueDepth: 8, QPs: 3, Total: 1 << 30, RDMAGIDIndex: -1, ServerAddr: "h", Port: 19000},
			"ib_read_bw -s 65536 -q 3 -t 3 -Q 1 -p 19000 -n 5462 --out_json --out_json_file=ib_read_bw.server.json",
			"ib_read_bw -s 65536 -q 3 -t 3 -Q 1 -p 19000 -n 5462 --out_json --out_json_file=ib_read_bw.client.json h",
			"client", "ib_read_bw.client.json", 19000},
		// total 0 reads file_size.
		{IBReadBW, Params{BlockSize: 4096, QueueDepth: 1, FileSize: 4 << 20, RDMAGIDIndex: -1, ServerAddr: "h"},
			"ib_read_bw -s 4096 -q 1 -t 1 -Q 1 -p 18515 -n 1024 --out_json --out_json_file=ib_read_bw.server.json",
			"ib_read_bw -s 4096 -q 1 -t 1 -Q 1 -p 18515 -n 1024 --out_json --out_json_file=ib_read_bw.client.json h",
			"client", "ib_read_bw.client.json", 18515},
		{Iperf3, Params{BlockSize: 1 << 20, QueueDepth: 16, QPs: 1, Duration: 10 * time.Second, Warmup: time.Second, ServerAddr: "127.0.0.1"},
			"iperf3 -s -1 -p 5201 -B 127.0.0.1",
			"iperf3 -c 127.0.0.1 -p 5201 -R -l 1048576 -P 1 -t 10 -O 1 -J",
			"client", "", 5201},
		{Iperf3, Params{BlockSize: 4096, QPs: 4, Total: 1 << 30, ServerAddr: "10.1.1.1", Port: 7000},
			"iperf3 -s -1 -p 7000 -B 10.1.1.1",
			"iperf3 -c 10.1.1.1 -p 7000 -R -l 4096 -P 4 -n 1073741824 -J",
			"client", "", 7000},
		{Fio, Params{BlockSize: 1 << 20, QueueDepth: 16, Pattern: "sequential", Duration: 2500 * time.Millisecond, Warmup: time.Second, Cache: "warm", File: "/data/f", FileSize: 1 << 30},
			"",
			"fio --name=rdmasweep --filename=/data/f --readonly --ioengine=io_uring --rw=read --bs=1048576 --iodepth=16 --size=1073741824 --runtime=2500ms --time_based --ramp_time=1000ms --invalidate=0 --lat_percentiles=1 --output-format=json",
			"server", "", 0},
		{Fio, Params{BlockSize: 4096, QueueDepth: 32, Pattern: "random", Total: 1 << 28, Cache: "cold", File: "/data/f", FileSize: 1 << 30},
			"",
			"fio --name=rdmasweep --filename=/data/f --readonly --ioengine=io_uring --rw=randread --bs=4096 --iodepth=32 --size=1073741824 --io_size=268435456 --lat_percentiles=1 --output-format=json",
			"server", "", 0},
	} {
		c, err := Build(tc.peer, tc.p)
		if err != nil {
			t.Errorf("%s %+v: %v", tc.peer, tc.p, err)
			continue
		}
		if got := strings.Join(c.Server, " "); got != tc.server {
			t.Errorf("%s server:\n got %s\nwant %s", tc.peer, got, tc.server)
		}
		if got := strings.Join(c.Client, " "); got != tc.cli {
			t.Errorf("%s client:\n got %s\nwant %s", tc.peer, got, tc.cli)
		}
		if c.ClientHost != tc.host || c.ClientReport != tc.report || c.ReadyPort != tc.port {
			t.Errorf("%s: client host %q report %q port %d, want %q %q %d", tc.peer, c.ClientHost, c.ClientReport, c.ReadyPort, tc.host, tc.report, tc.port)
		}
	}
}

func TestCheckRefuses(t *testing.T) {
	base := Params{BlockSize: 1 << 20, QueueDepth: 16, QPs: 1, Duration: 10 * time.Second, Pattern: "sequential",
		Cache: "cold", Registration: "pinned", File: "/f", FileSize: 1 << 30, RDMAGIDIndex: -1, ServerAddr: "h"}
	for _, peer := range Names() {
		if errs, err := Check(peer, base); err != nil || len(errs) != 0 {
			t.Errorf("%s refuses a plan's defaults: %v %v", peer, errs, err)
		}
	}
	for _, tc := range []struct {
		peer, param string
		change      func(*Params)
	}{
		{IBReadBW, "verify", func(p *Params) { p.Verify = true }},
		{IBReadBW, "pattern", func(p *Params) { p.Pattern = "random" }},
		{IBReadBW, "registration", func(p *Params) { p.Registration = "odp" }},
		{IBReadBW, "duration", func(p *Params) { p.Duration = 1500 * time.Millisecond }},
		{IBReadBW, "warmup", func(p *Params) { p.Duration, p.Total, p.Warmup = 0, 1<<30, time.Second }},
		{IBReadBW, "total", func(p *Params) { p.Duration, p.Total = 0, 1<<20 }}, // 1 read: perftest wants >= 5
		{IBReadBW, "queue_depth", func(p *Params) { p.QueueDepth = 20000 }},
		{Iperf3, "verify", func(p *Params) { p.Verify = true }},
		{Iperf3, "pattern", func(p *Params) { p.Pattern = "random" }},
		{Iperf3, "duration", func(p *Params) { p.Duration = 2500 * time.Millisecond }},
		{Iperf3, "warmup", func(p *Params) { p.Warmup = 500 * time.Millisecond }},
		{Iperf3, "registration", func(p *Params) { p.Registration = "odp" }},
		{Fio, "verify", func(p *Params) { p.Verify = true }},
		{Fio, "qps", func(p *Params) { p.QPs = 2 }},
		{Fio, "file", func(p *Params) { p.File = "" }},
		{Fio, "block_size", func(p *Params) { p.BlockSize = 2 << 30 }},
		{Fio, "registration", func(p *Params) { p.Registration = "odp" }},
		{FioMatched, "block_size", func(p *Params) { p.FileSize = 4 << 20 }}, // 8 jobs' ranges of 512KiB hold no 1MiB block
		{NVMeOF, "qps", func(p *Params) { p.QPs, p.FileSize = 4, 2<<20 }},    // 4 queues' ranges of 512KiB hold no 1MiB block
		{IBReadBW, "transport", func(p *Params) { p.Transport = "tcp" }},
		{Iperf3, "transport", func(p *Params) { p.Transport = "rdma" }},
	} {
		p := base
		tc.change(&p)
		errs, err := Check(tc.peer, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(errs) != 1 || errs[0].Param != tc.param || errs[0].Peer != tc.peer {
			t.Errorf("%s with %s changed: %v, want one error about %s", tc.peer, tc.param, errs, tc.param)
			continue
		}
		_, err = Build(tc.peer, p)
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Param != tc.param || !strings.Contains(err.Error(), tc.peer) {
			t.Errorf("Build(%s) with %s changed: %v, want a *ParamError naming both", tc.peer, tc.param, err)
		}
	}
	// fio reads the file on its host, whatever the transport.
	for _, tr := range []string{"tcp", "rdma"} {
		p := base
		p.Transport = tr
		if errs, _ := Check(Fio, p); len(errs) != 0 {
			t.Errorf("fio refuses transport %s: %v", tr, errs)
		}
	}
	// All of them at once, so a validator can report every one.
	p := base
	p.Verify, p.Pattern, p.Registration = true, "random", "odp"
	if errs, _ := Check(IBReadBW, p); len(errs) != 3 {
		t.Errorf("three refused parameters gave %d errors: %v", len(errs), errs)
	}
	if _, err := Build("ib_write_bw", base); !errors.Is(err, ErrUnknown) {
		t.Errorf("unknown peer: %v, want ErrUnknown", err)
	}
}

func TestLookup(t *testing.T) {
	for _, n := range Names() {
		tl, err := Lookup(n)
		if err != nil || tl.Binary == "" || tl.Debian == "" || tl.RHEL == "" {
			t.Errorf("Lookup(%s) = %+v, %v", n, tl, err)
		}
	}
	if _, err := Lookup("node"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Lookup(node) = %v, want ErrUnknown: node is not a peer", err)
	}
}

// fixtures returns the checked-in reports of a peer (not the server's).
func fixtures(t *testing.T, peer string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", peer, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, p := range paths {
		if strings.HasSuffix(p, ".server.json") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m[filepath.Base(p)] = b
	}
	if len(m) < 2 {
		t.Fatalf("%d fixtures for %s, want at least 2 (see fixtures_test.go)", len(m), peer)
	}
	return m
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

// checkResult checks what holds for every parsed report.
func checkResult(t *testing.T, name string, r Result) {
	t.Helper()
	if r.Bytes <= 0 || !(r.Seconds > 0) || !near(r.BandwidthMBs, float64(r.Bytes)/r.Seconds/1e6) {
		t.Errorf("%s: %d bytes in %v s at %v MB/s do not agree", name, r.Bytes, r.Seconds, r.BandwidthMBs)
	}
	if c := r.IOPS; c != nil && (*c < 0 || !finite(*c)) {
		t.Errorf("%s: negative or infinite IOPS %v", name, *c)
	}
	for k, c := range r.Reported {
		if c < 0 || !finite(c) {
			t.Errorf("%s: negative or infinite %s %v", name, k, c)
		}
	}
	if l := r.Latency; l != nil && !(l.P50Us > 0 && l.P50Us <= l.P99Us && l.P99Us <= l.P999Us && l.P999Us <= l.MaxUs && l.AvgUs <= l.MaxUs) {
		t.Errorf("%s: latencies out of order: %+v", name, *l)
	}
}

// field reads "key: number" from perftest's report text, independently
// of the relaxed parser.
func field(t *testing.T, b []byte, key string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*` + key + `\s*:\s*([0-9.]+),`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no %s in fixture", key)
	}
	f, _ := strconv.ParseFloat(string(m[1]), 64)
	return f
}

func TestParseIBReadBW(t *testing.T) {
	for name, b := range fixtures(t, IBReadBW) {
		r, err := Parse(IBReadBW, b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkResult(t, name, r)
		size, iters, mib := field(t, b, "MsgSize"), field(t, b, "n_iterations"), field(t, b, "BW_average")
		if r.Bytes != int64(size*iters) || !near(r.BandwidthMBs, mib*1048576/1e6) {
			t.Errorf("%s: %d bytes at %v MB/s, want %v x %v bytes at %v MiB/s", name, r.Bytes, r.BandwidthMBs, size, iters, mib)
		}
		if r.IOPS == nil || !near(*r.IOPS, field(t, b, "MsgRate")*1e6) {
			t.Errorf("%s: IOPS %v, want MsgRate x 1e6", name, r.IOPS)
		}
		// --cpu_util is there only in a duration-based run: the host's
		// share, kept as perftest gives it, for the sidecar.
		if strings.Contains(string(b), "CPU_util") {
			if v, ok := r.Reported["CPU_util"]; !ok || !near(v, field(t, b, "CPU_util")) || len(r.Reported) != 1 {
				t.Errorf("%s: reported %v, want CPU_util as perftest gives it", name, r.Reported)
			}
		} else if r.Reported != nil {
			t.Errorf("%s: reported %v from a report without CPU_util", name, r.Reported)
		}
		if r.Latency != nil {
			t.Errorf("%s: latency that ib_read_bw does not report", name)
		}
	}
	// The server writes a report too, holding the client's figures.
	srv, err := filepath.Glob("testdata/ib_read_bw/*.server.json")
	if err != nil || len(srv) == 0 {
		t.Fatal("no server reports")
	}
	for _, p := range srv {
		b, _ := os.ReadFile(p)
		if _, err := Parse(IBReadBW, b); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestParseIperf3(t *testing.T) {
	for name, b := range fixtures(t, Iperf3) {
		r, err := Parse(Iperf3, b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkResult(t, name, r)
		var doc map[string]any
		json.Unmarshal(b, &doc)
		end := doc["end"].(map[string]any)
		recv := end["sum_received"].(map[string]any)
		cpu := end["cpu_utilization_percent"].(map[string]any)
		if r.Bytes != int64(recv["bytes"].(float64)) || r.Seconds != recv["seconds"].(float64) {
			t.Errorf("%s: %d bytes in %v s, want end.sum_received's", name, r.Bytes, r.Seconds)
		}
		if rp := r.Reported; len(rp) != 2 || !near(rp["host_total"], cpu["host_total"].(float64)) || !near(rp["remote_total"], cpu["remote_total"].(float64)) {
			t.Errorf("%s: reported %v, want host_total and remote_total", name, rp)
		}
	}
	bad := []struct{ in, want string }{
		{`{"start":{"test_start":{"reverse":0}},"end":{"sum_received":{"bytes":10,"seconds":1}}}`, "reverse"},
		{`{"error":"unable to connect to server: Connection refused"}`, "unable to connect"},
		{`{"start":{"test_start":{"reverse":1}},"end":{}}`, "no measurement"},
	}
	for _, b := range bad {
		if _, err := Parse(Iperf3, []byte(b.in)); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: %v, want an error about %q", b.in, err, b.want)
		}
	}
}

func TestParseFio(t *testing.T) {
	for name, b := range fixtures(t, Fio) {
		r, err := Parse(Fio, b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkResult(t, name, r)
		var doc struct {
			Jobs []struct {
				Read struct {
					IOBytes int64          `json:"io_bytes"`
					Runtime int64          `json:"runtime"`
					Lat     map[string]any `json:"lat_ns"`
				} `json:"read"`
				Usr float64 `json:"usr_cpu"`
				Sys float64 `json:"sys_cpu"`
			} `json:"jobs"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		j := doc.Jobs[0]
		if r.Bytes != j.Read.IOBytes || r.Seconds != float64(j.Read.Runtime)/1000 {
			t.Errorf("%s: %d bytes in %v s, want io_bytes in runtime ms", name, r.Bytes, r.Seconds)
		}
		if rp := r.Reported; len(rp) != 2 || !near(rp["usr_cpu"], j.Usr) || !near(rp["sys_cpu"], j.Sys) {
			t.Errorf("%s: reported %v, want usr_cpu and sys_cpu", name, rp)
		}
		pc := j.Read.Lat["percentile"].(map[string]any)
		if r.Latency == nil || !near(r.Latency.P99Us, min(pc["99.000000"].(float64), j.Read.Lat["max"].(float64))/1e3) {
			t.Errorf("%s: latency %+v, want lat_ns (issue to completion) percentiles in µs", name, r.Latency)
		}
	}
	// fio's notes before the JSON are skipped.
	for name, b := range fixtures(t, Fio) {
		if _, err := Parse(Fio, append([]byte("note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will be capped at 1\n"), b...)); err != nil {
			t.Errorf("%s after a note: %v", name, err)
		}
		break
	}
	if _, err := Parse(Fio, []byte(`{"jobs":[{"error":5,"read":{"io_bytes":1,"runtime":1}}]}`)); err == nil {
		t.Error("a failed job parsed")
	}
}

func TestRelaxed(t *testing.T) {
	doc, err := parseRelaxed([]byte("{\ntest_info: {\ntest: RDMA_Read_BW_Test,\nTX_depth : 16,\n PCIe_relax_order: Unsupported,\nTest with events: Using_rxe0_comp0,\nWARNING1: \"CPU is not PCIe relaxed ordering compliant\",\n},\nresults: {\nMsgSize: 1048576,\n},\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ti := doc["test_info"].(map[string]any)
	if ti["TX_depth"] != 16.0 || ti["PCIe_relax_order"] != "Unsupported" || ti["Test with events"] != "Using_rxe0_comp0" || ti["WARNING1"] != "CPU is not PCIe relaxed ordering compliant" {
		t.Errorf("test_info read as %v", ti)
	}
	for _, bad := range []string{"", "{", "{a: 1", "{a: {b: 2}", "{a 1}", "{: 1}", "{a: 1} x", "{a:\n}", strings.Repeat("{a: ", 20) + strings.Repeat("}", 20)} {
		if _, err := parseRelaxed([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	// Real JSON reads the same way.
	if doc, err := parseRelaxed([]byte(`{"results": {"MsgSize": 4096, "BW_average": 1.5}}`)); err != nil || doc["results"].(map[string]any)["MsgSize"] != 4096.0 {
		t.Errorf("JSON: %v %v", doc, err)
	}
}

func TestListening(t *testing.T) {
	// ss -ltn from Debian 12's iproute2 6.1, columns as printed.
	out := []byte(`State  Recv-Q Send-Q      Local Address:Port  Peer Address:PortProcess
LISTEN 0      4096              0.0.0.0:18515      0.0.0.0:*
LISTEN 0      128             127.0.0.1%lo:53        0.0.0.0:*
LISTEN 0      5                       *:5201             *:*
LISTEN 0      128                  [::]:22            [::]:*
LISTEN 0      4096   [::ffff:10.0.2.15]:7000             *:*
`)
	for port, want := range map[int]bool{18515: true, 53: true, 5201: true, 22: true, 7000: true, 1851: false, 515: false, 2: false} {
		got, err := Listening(out, port)
		if err != nil || got != want {
			t.Errorf("port %d: %v %v, want %v", port, got, err, want)
		}
	}
	if got, err := Listening([]byte("State  Recv-Q Send-Q Local Address:Port Peer Address:PortProcess\n"), 18515); got || err != nil {
		t.Errorf("nothing listening: %v %v", got, err)
	}
	for _, bad := range []string{"", "sh: 1: ss: not found\n", "LISTEN 0 5 nocolon *:*\n"} {
		if _, err := Listening([]byte(bad), 80); err == nil {
			t.Errorf("%q taken for ss output", bad)
		}
	}
	if _, err := Listening(out, 0); err == nil {
		t.Error("port 0 accepted")
	}
}

// TestCMListening reads `rdma resource show cm_id` as a soft-RoCE guest
// prints it while ib_read_bw -R waits for its client: the wildcard
// listener and its child on the device, beside another program's
// connected id.
func TestCMListening(t *testing.T) {
	out := []byte(`link rxe0/- cm-idn 2 state LISTEN ps TCP pid 812 comm ib_read_bw src-addr 0.0.0.0:18515 dst-addr 0.0.0.0:0
link -/- cm-idn 1 state LISTEN ps TCP pid 812 comm ib_read_bw src-addr 0.0.0.0:18515 dst-addr 0.0.0.0:0
link rxe0/1 cm-idn 7 lqpn 17 qp-type RC state CONNECT ps TCP pid 900 comm node src-addr 10.9.0.2:7000 dst-addr 10.9.0.1:51000
link rxe0/- cm-idn 9 state LISTEN ps UDP pid 901 comm other src-addr 0.0.0.0:4791 dst-addr 0.0.0.0:0
`)
	for port, want := range map[int]bool{18515: true, 7000: false, 4791: false, 1851: false, 8515: false} {
		got, err := CMListening(out, port)
		if err != nil || got != want {
			t.Errorf("port %d: %v %v, want %v", port, got, err, want)
		}
	}
	if got, err := CMListening(nil, 18515); got || err != nil {
		t.Errorf("no cm_id at all: %v %v, want not yet", got, err)
	}
	for _, bad := range []string{"sh: 1: rdma: not found\n", "Object \"resource\" is unknown, try \"rdma help\".\n"} {
		if _, err := CMListening([]byte(bad), 18515); err == nil {
			t.Errorf("%q taken for rdma's output", bad)
		}
	}
	for _, cm := range []bool{false, true} {
		v := rdmaValues
		if cm {
			v = v.With(param.Connect, "cm")
		}
		p := FromValues(v)
		p.ServerAddr = "h"
		c, err := Build(IBReadBW, p)
		if err != nil || c.ReadyCM != cm {
			t.Errorf("connect cm %v: ReadyCM %v (%v), want %v", cm, c.ReadyCM, err, cm)
		}
	}
}

// TestTooShort: a run of a peer that times in whole milliseconds is too
// short under 100 ms; a peer that times finer, and node, never are.
func TestTooShort(t *testing.T) {
	for _, c := range []struct {
		workload string
		d        time.Duration
		short    bool
	}{
		{Fio, 99 * time.Millisecond, true},
		{Fio, 100 * time.Millisecond, false},
		{FioMatched, 8 * time.Millisecond, true},
		{NVMeOF, 50 * time.Millisecond, true},
		{IBReadBW, time.Millisecond, false},
		{Iperf3, time.Millisecond, false},
		{"node", time.Millisecond, false},
	} {
		if _, short := TooShort(c.workload, c.d); short != c.short {
			t.Errorf("%s for %s: too short %v, want %v", c.workload, c.d, short, c.short)
		}
	}
}
