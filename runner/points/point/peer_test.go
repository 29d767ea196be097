package point

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/plan"
	"rdmasweep/results"
	"rdmasweep/results/param"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/hosts/role"
	"rdmasweep/testbed/testenv"
)

// freePort is a TCP port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// A plan sweeping workload [node, iperf3, fio] gives rows from each, in
// that order: node's with its CPU from its events, iperf3's from its -J
// report (no latency: it has none), fio's from its JSON, read on the
// server's host from the file node prepare made.
func TestRunPeersMakeRows(t *testing.T) {
	testenv.NeedTool(t, "iperf3", "iperf3")
	testenv.NeedTool(t, "fio", "fio")
	testenv.NeedTool(t, "ss", "iproute2")
	r, pts, rec := localRunner(t, `name: t
hosts: {server: {address: local}, client: {address: local}}
server: {file: %s/f.dat, file_size: 16MiB, create: true, cache: warm, port: `+fmt.Sprint(freePort(t))+`}
client: {queue_depth: 4, block_size: 256KiB, total: 64MiB}
sweep: {matrix: {workload: [node, iperf3, fio]}}
timeouts: {ready: 20s, accept: 20s, point: 60s}
`)
	reported := map[string]*results.Counters{}
	r.Counters = func(pt plan.Point, _ int, tg role.Target, c *results.Counters) {
		reported[pt.Values.Str(param.Workload)+"/"+tg.Role] = c
	}
	var all []results.Row
	for _, pt := range pts {
		rows, tm, err := r.Run(context.Background(), pt, 1)
		if err != nil || len(rows) != 1 || rows[0].Status != results.StatusOK {
			t.Fatalf("point %v: %v %+v", pt.Swept, err, rows)
		}
		row := rows[0]
		if tm.Measured <= 0 || *row.BandwidthMBs <= 0 || *row.Seconds <= 0 || (row.Verified != nil) != (row.Workload() == "node") {
			t.Errorf("%s: row %+v timing %+v", row.Workload(), row, tm)
		}
		all = append(all, row)
	}
	node, iperf, fio := all[0], all[1], all[2]
	if node.Workload() != "node" || node.CPUClient == nil || node.CPUServer == nil || *node.CPUClient <= 0 {
		t.Errorf("node row: workload %q cpu %v %v", node.Workload(), node.CPUClient, node.CPUServer)
	}
	if iperf.Workload() != "iperf3" || iperf.LatP99Us != nil || iperf.IOPS != nil || iperf.CPUClient == nil || iperf.CPUServer == nil ||
		*iperf.Bytes < 32<<20 || iperf.ClientHost != "local" {
		t.Errorf("iperf3 row: %+v", iperf)
	}
	if fio.Workload() != "fio" || fio.LatP99Us == nil || *fio.LatP99Us < *fio.LatP50Us || fio.CPUClient == nil || fio.CPUServer != nil ||
		*fio.Bytes != 64<<20 || fio.CachedFraction == nil || *fio.CachedFraction != 1 {
		t.Errorf("fio row: %+v", fio)
	}
	if fio.EndToEndMBs != nil || iperf.EndToEndMBs != nil {
		t.Errorf("end_to_end_mb_s over 4 passes: fio %v, iperf3 %v; want none", fio.EndToEndMBs, iperf.EndToEndMBs)
	}
	if l := rec.leftover(); l != "" {
		t.Errorf("nodes left: %s", l)
	}
	// A peer's CPU cells are node run's figures of its own processes,
	// each from its role's log; the tool's own figures go to the sidecar.
	for i, cells := range []map[string]*float64{nil, {"client": iperf.CPUClient, "server": iperf.CPUServer}, {"client": fio.CPUClient}} {
		for roleName, cell := range cells {
			want := wrapperCPU(t, r.logBase(pts[i], 1)+"."+roleName+".log")
			if cell == nil {
				t.Errorf("%s's cpu_%s empty, want node run's %v", all[i].Workload(), roleName, *want.PerSecond())
			} else if *cell != *want.PerSecond() {
				t.Errorf("%s's cpu_%s %v, want node run's %v", all[i].Workload(), roleName, *cell, *want.PerSecond())
			}
		}
	}
	t.Logf("cpu client/server: iperf3 %.3f/%.3f (its own %v), fio %.3f (its own %v)", *iperf.CPUClient, *iperf.CPUServer, reported["iperf3/client"].Reported, *fio.CPUClient, reported["fio/client"].Reported)
	if c := reported["iperf3/client"]; c == nil || c.Reported["host_total"] <= 0 || c.Reported["remote_total"] <= 0 {
		t.Errorf("iperf3's own CPU figures for the sidecar: %+v", c)
	}
	if c := reported["fio/client"]; c == nil || c.Reported["usr_cpu"]+c.Reported["sys_cpu"] <= 0 {
		t.Errorf("fio's own CPU figures for the sidecar: %+v", c)
	}
	// iperf3's and fio's reports are in the logs.
	logs, _ := filepath.Glob(filepath.Join(r.LogDir, "*-r1.client.log"))
	var logText strings.Builder
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		logText.Write(b)
	}
	for _, want := range []string{"/node run --deadline ", "iperf3 -c 127.0.0.1", `"sum_received"`, "fio --name=rdmasweep", `"jobs"`} {
		if !strings.Contains(logText.String(), want) {
			t.Errorf("client logs lack %q", want)
		}
	}
}

// wrapperCPU is node run's cpu line in a role's log.
func wrapperCPU(t *testing.T, log string) results.RunCPU {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var found []results.RunCPU
	for _, l := range strings.Split(string(b), "\n") {
		if _, c, ok, err := results.CutRunCPU([]byte(l)); ok && err == nil {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s holds %d cpu lines of node run, want 1:\n%s", log, len(found), b)
	}
	return found[0]
}

// A tool's stderr goes whole to its log, and without node run's cpu line
// to the tail that messages quote. The line is the last one, or the end
// of it where the tool's last words lack a newline; a line like it
// before the last, or a long one, is the tool's.
func TestCopyToolStderr(t *testing.T) {
	cpu := results.RunCPU{CPUUserS: 1.5, CPUSysS: 0.25, CPUWallS: 2}
	long := results.RunCPUPrefix + strings.Repeat("x", 5000) + "\n"
	early := string(results.RunCPU{CPUUserS: 9, CPUWallS: 1}.Line())
	for _, tc := range []struct{ name, in, tail string }{
		{"last line", "warming up\n" + early + long + "the tool's last words\n" + string(cpu.Line()), "warming up\n" + early + long + "the tool's last words\n"},
		{"no newline before it", "warming up\nthe tool's last words" + string(cpu.Line()), "warming up\nthe tool's last words"},
	} {
		var log bytes.Buffer
		tl := newTail(1 << 20)
		got := copyToolStderr(strings.NewReader(tc.in), &log, tl)
		if got == nil || *got != cpu {
			t.Errorf("%s: figures %+v, want the last line's %+v", tc.name, got, cpu)
		}
		if log.String() != tc.in {
			t.Errorf("%s: the log lost something of stderr", tc.name)
		}
		if tl.text() != tc.tail {
			t.Errorf("%s: tail ends %q, holds %d bytes; want the tool's lines alone, %d bytes", tc.name, tl.lastLine(), len(tl.text()), len(tc.tail))
		}
	}
	for _, in := range []string{"no cpu line\n" + results.RunCPUPrefix + "{broken\n", early + "a line after it\n", ""} {
		if c := copyToolStderr(strings.NewReader(in), io.Discard, newTail(100)); c != nil {
			t.Errorf("figures %+v from %q", c, in)
		}
	}
}

// A peer's port that something else already listens on is refused before
// the peer starts: that socket would pass for its readiness.
func TestRunPeerRefusesABusyPort(t *testing.T) {
	testenv.NeedTool(t, "iperf3", "iperf3")
	testenv.NeedTool(t, "ss", "iproute2")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r, pts, _ := localRunner(t, `name: t
hosts: {server: {address: local}, client: {address: local}}
server: {file: %s/f.dat, file_size: 16MiB, create: true, port: `+fmt.Sprint(l.Addr().(*net.TCPAddr).Port)+`}
workload: iperf3
timeouts: {ready: 20s, accept: 20s, point: 60s}
`)
	rows, _, err := r.Run(context.Background(), pts[0], 1)
	if err != nil || len(rows) != 1 {
		t.Fatalf("rows %+v, %v", rows, err)
	}
	row := rows[0]
	if row.Status != results.StatusFailed || !strings.HasPrefix(row.Error, "server (local): port ") || !strings.Contains(row.Error, "already in use") {
		t.Fatalf("row %s %q, %v", row.Status, row.Error, err)
	}
}

// An OutputFile role's report is read back from its host once it exits,
// removed there, and kept beside its log.
func TestRunReadsReportFiles(t *testing.T) {
	r, _, _ := localRunner(t, "name: t\nhosts: {server: {address: local}, client: {address: local}}\nserver: {file: %s/f.dat, file_size: 1MiB}\n")
	report := filepath.Join(t.TempDir(), "r.json")
	roles := []Role{{
		Target: role.Target{Role: "server", Host: remote.Local{}, Label: "server (local)"},
		Tool:   "sh",
		Argv: func(map[string]*results.Ready) []string {
			return []string{"sh", "-c", `printf '{"a":1}' > "$0"`, report}
		},
		Ready: OnStart, Output: OutputFile, Report: report,
	}}
	base := filepath.Join(r.LogDir, "x")
	reports, _, err := r.run(context.Background(), roles, results.Control{}, base, nil)
	if err != nil || string(reports[0].Output) != `{"a":1}` {
		t.Fatalf("report %q, %v", reports[0].Output, err)
	}
	if _, err := os.Stat(report); !os.IsNotExist(err) {
		t.Errorf("report left on the host: %v", err)
	}
	if b, _ := os.ReadFile(base + ".server.report.json"); string(b) != `{"a":1}` {
		t.Errorf("log copy %q", b)
	}
	// A tool that exits cleanly without writing it fails the role, named.
	roles[0].Argv = func(map[string]*results.Ready) []string { return []string{"true"} }
	_, _, err = r.run(context.Background(), roles, results.Control{}, base, nil)
	if err == nil || !strings.Contains(err.Error(), "server (local): sh exited, but its report") {
		t.Fatalf("missing report: %v", err)
	}
}

// A peer tool that fails for a reason its own last line does not give
// has it said in the error: ib_read_bw's "Can't produce a report" after
// perftest's clock check.
func TestRunDiagnosesToolFailure(t *testing.T) {
	r, _, _ := localRunner(t, "name: t\nhosts: {server: {address: local}, client: {address: local}}\nserver: {file: %s/f.dat, file_size: 1MiB}\n")
	roles := []Role{{
		Target: role.Target{Role: "client", Host: remote.Local{}, Label: "client (local)"},
		Tool:   "ib_read_bw",
		Argv: func(map[string]*results.Ready) []string {
			return []string{"sh", "-c", `printf 'Correlation coefficient r^2: 0.41 < 0.9\nCan'"'"'t produce a report\n' >&2; exit 1`}
		},
		Ready: OnStart, Output: OutputFile, Report: filepath.Join(t.TempDir(), "r.json"),
	}}
	_, _, err := r.run(context.Background(), roles, results.Control{}, filepath.Join(r.LogDir, "x"), nil)
	if err == nil || !strings.Contains(err.Error(), "before its report: Can't produce a report (perftest times its cycle counter") || !strings.Contains(err.Error(), "r² 0.41") {
		t.Fatalf("error %v, want perftest's line and why", err)
	}
}

// A symlink planted at a report's name (issue 31) is neither read nor
// followed when removed: the runner gets an error, not the target's
// bytes, and the target is left as it was.
func TestReportSymlinkIsNotFollowed(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("not a report"), 0o600); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "ib_read_bw.0123.client.json")
	if err := os.Symlink(secret, report); err != nil {
		t.Fatal(err)
	}
	tg := role.Target{Role: "client", Host: remote.Local{}, Label: "client (local)"}
	out, err := fetchReport(context.Background(), tg, report)
	if err == nil || strings.Contains(string(out), "not a report") {
		t.Errorf("fetch through a symlink = %q, %v; want a refusal", out, err)
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "not a report" {
		t.Errorf("the symlink's target: %q, %v; want it untouched", b, err)
	}
	if _, err := os.Lstat(report); !os.IsNotExist(err) {
		t.Errorf("the planted symlink is still there: %v", err)
	}
}

// TestNVMeOFRolesTakeTheSecret: nvmeof's roles are node's own commands
// that read the point's control line: each is written the line (the
// secret), runs under node run without --stop-on-eof (it stops on stdin's
// end itself, after its teardown), and no argv names an NQN; a tool that
// reads none is written nothing.
func TestNVMeOFRolesTakeTheSecret(t *testing.T) {
	r, pts, _ := localRunner(t, `name: t
hosts: {server: {address: local}, client: {address: local}}
server: {file: %s/f.dat, file_size: 1MiB, create: true}
sweep: {matrix: {workload: [nvmeof]}}
`)
	roles, err := r.PeerRoles(pts[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, rl := range roles {
		argv := strings.Join(rl.Argv(nil), " ")
		if !rl.Control || strings.Contains(argv, "--stop-on-eof") || !strings.Contains(argv, "--control-stdin") || strings.Contains(argv, "nqn") {
			t.Errorf("%s: Control %v, argv %s; want the control line read, no --stop-on-eof, no NQN", rl.Target.Role, rl.Control, argv)
		}
	}
	control := results.Control{Secret: "5ec2e7"}
	iperf := Role{Tool: "iperf3"}
	for _, tc := range []struct {
		control *results.Control
		want    string
	}{{roles[0].controlFor(&control), `{"secret":"5ec2e7"}` + "\n"}, {roles[1].controlFor(&control), `{"secret":"5ec2e7"}` + "\n"}, {iperf.controlFor(&control), ""}} {
		updates, abandon := make(chan update, 8), make(chan struct{})
		pr, err := startProc(context.Background(), r.Targets[0], nil, []string{"sh", "-c", "head -n 1"}, "head", tc.control,
			filepath.Join(t.TempDir(), "x.log"), 0, updates, abandon, nil)
		if err != nil {
			t.Fatal(err)
		}
		pr.p.Stdin().Close()
		<-pr.gone
		close(abandon)
		if got := pr.stdout.String(); got != tc.want {
			t.Errorf("control %v: the tool read %q, want %q", tc.control, got, tc.want)
		}
	}
}

// TestPeerEndToEndOnOnePass: fio reading the file once, untimed and
// without warmup, has read it end to end, so its end_to_end_mb_s is its
// rate, beside node's; with a warmup it has none.
func TestPeerEndToEndOnOnePass(t *testing.T) {
	testenv.NeedTool(t, "fio", "fio")
	r, pts, _ := localRunner(t, `name: t
hosts: {server: {address: local}, client: {address: local}}
server: {file: %s/f.dat, file_size: 16MiB, create: true, cache: warm, port: `+fmt.Sprint(freePort(t))+`}
client: {queue_depth: 4, block_size: 256KiB}
sweep: {matrix: {warmup: [0s, 100ms], workload: [node, fio]}}
timeouts: {ready: 20s, accept: 20s, point: 60s}
`)
	for _, pt := range pts {
		rows, _, err := r.Run(context.Background(), pt, 1)
		if err != nil || len(rows) != 1 || rows[0].Status != results.StatusOK {
			t.Fatalf("point %v: %v %+v", pt.Swept, err, rows)
		}
		row, warm := rows[0], pt.Values.Duration(param.Warmup) > 0
		switch {
		case row.Workload() == "fio" && !warm && (row.EndToEndMBs == nil || *row.EndToEndMBs != *row.BandwidthMBs):
			t.Errorf("fio, one pass: end_to_end_mb_s %v, want its bandwidth %v", row.EndToEndMBs, *row.BandwidthMBs)
		case row.Workload() == "node" && !warm && row.EndToEndMBs == nil:
			t.Errorf("node, one pass: no end_to_end_mb_s")
		case warm && row.Workload() == "fio" && row.EndToEndMBs != nil:
			t.Errorf("%s after a warmup: end_to_end_mb_s %v, want none", row.Workload(), *row.EndToEndMBs)
		}
	}
}

// TestPeerGetsEachSidesChoice: each side of ib_read_bw is built with the
// device, port and GID node chose on that side's own host (the devices
// gate's Choices), not one side's for both.
func TestPeerGetsEachSidesChoice(t *testing.T) {
	r, pts, _ := localRunner(t, `name: t
hosts: {server: {address: local}, client: {address: local}}
transport: rdma
server: {file: %s/f.dat, file_size: 1MiB, create: true}
client: {duration: 2s}
sweep: {matrix: {workload: [ib_read_bw]}}
`)
	r.Choices = map[string]results.DeviceChoice{
		"server": {Device: "rxe0", IBPort: 1, GIDIndex: 1},
		"client": {Device: "rxe1", IBPort: 1, GIDIndex: 3},
	}
	roles, err := r.PeerRoles(pts[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, rl := range roles {
		c := r.Choices[rl.Target.Role]
		argv := " " + strings.Join(rl.Argv(nil), " ") + " "
		if want := fmt.Sprintf(" -d %s -i 1 -x %d ", c.Device, c.GIDIndex); !strings.Contains(argv, want) {
			t.Errorf("%s: argv %s, want %q", rl.Target.Role, argv, want)
		}
	}
}

// TestPeerOverCMListensThroughCM: ib_read_bw with rdma.connect cm runs
// with -R, leaves device, port and GID to rdma_cm as node does, and its
// server is ready when its cm_id listens, not a TCP socket.
func TestPeerOverCMListensThroughCM(t *testing.T) {
	r, pts, _ := localRunner(t, `name: t
hosts: {server: {address: local}, client: {address: local}}
transport: rdma
rdma: {connect: cm}
server: {file: %s/f.dat, file_size: 1MiB, create: true}
client: {duration: 2s}
sweep: {matrix: {workload: [ib_read_bw]}}
`)
	r.Choices = map[string]results.DeviceChoice{"server": {Device: "rxe0", IBPort: 1, GIDIndex: 1}}
	roles, err := r.PeerRoles(pts[0])
	if err != nil {
		t.Fatal(err)
	}
	if srv := roles[0]; srv.Ready != OnListening || !srv.CM {
		t.Errorf("server: Ready %v, CM %v; want OnListening through rdma_cm", srv.Ready, srv.CM)
	}
	for _, rl := range roles {
		argv := " " + strings.Join(rl.Argv(nil), " ") + " "
		if !strings.Contains(argv, " -R ") || strings.Contains(argv, " -x ") {
			t.Errorf("%s: argv %s, want -R and no -x", rl.Target.Role, argv)
		}
	}
}
