package peer

import (
	"os"
	"slices"
	"strings"
	"testing"

	"rdmasweep/results"
)

// TestNVMeOFCommands: both sides run node's own commands, name the same
// target and read the point's control line; neither argv names the
// subsystem, the host or a key (ps shows argv to every local user: they
// come from the control line's secret); the server listens for readiness
// on the port after the target's; each side needs its own modules for
// the point's transport.
func TestNVMeOFCommands(t *testing.T) {
	p := Params{Transport: results.TransportRDMA, BlockSize: 4096, QueueDepth: 8, File: "/f", FileSize: 1 << 20, ServerAddr: "10.9.0.1", ReportTag: "aa"}
	c, err := Build(NVMeOF, p)
	if err != nil {
		t.Fatal(err)
	}
	flag := func(argv []string, f string) string {
		if i := slices.Index(argv, f); i >= 0 && i+1 < len(argv) {
			return argv[i+1]
		}
		return ""
	}
	if c.Server[0] != NodeProgram || c.Client[0] != NodeProgram || c.Server[1] != "nvmet" || c.Client[1] != "nvmeof-read" {
		t.Errorf("server %v, client %v; want node nvmet and node nvmeof-read", c.Server[:2], c.Client[:2])
	}
	for _, f := range []string{"--addr", "--svcid", "--transport"} {
		if s, cl := flag(c.Server, f), flag(c.Client, f); s == "" || s != cl {
			t.Errorf("%s: server %q, client %q; want the same", f, s, cl)
		}
	}
	for _, argv := range [][]string{c.Server, c.Client} {
		line := strings.Join(argv, " ")
		if !c.Control || !slices.Contains(argv, "--control-stdin") {
			t.Errorf("%s: Control %v; want the control line read (--control-stdin)", line, c.Control)
		}
		if strings.Contains(line, "nqn") || strings.Contains(line, "DHHC") || strings.Contains(line, "secret") {
			t.Errorf("%s names an NQN or a key in argv", line)
		}
	}
	if flag(c.Server, "--addr") != p.ServerAddr || c.ReadyPort != 4421 {
		t.Errorf("addr %q, ready port %d; want the server's data address %s, and 4421", flag(c.Server, "--addr"), c.ReadyPort, p.ServerAddr)
	}
	tool, _ := Lookup(NVMeOF)
	for _, tc := range []struct{ role, tr, want string }{
		{"server", "rdma", "nvmet nvmet-rdma"}, {"client", "rdma", "nvme-fabrics nvme-rdma"},
		{"server", "tcp", "nvmet nvmet-tcp"}, {"client", "tcp", "nvme-fabrics nvme-tcp"},
	} {
		if got := strings.Join(tool.Modules(tc.role, tc.tr), " "); got != tc.want {
			t.Errorf("%s over %s needs %q, want %q", tc.role, tc.tr, got, tc.want)
		}
	}
}

// TestParseNVMeOF: node's event lines, then the verified line, then fio's
// report; a verified line with 0 blocks checked verifies nothing; no
// verified line is an error, naming what came instead.
func TestParseNVMeOF(t *testing.T) {
	fioJSON, err := os.ReadFile("testdata/fio/cold-rand-4KiB-qd8-total.json")
	if err != nil {
		t.Fatal(err)
	}
	warn := `{"type":"warning","message":"loaded kernel modules nvme-fabrics, nvme-rdma"}` + "\n"
	verified := `{"type":"nvmeof_verified","blocks":64,"block_size":4096}` + "\n"
	r, err := Parse(NVMeOF, []byte(warn+verified+string(fioJSON)))
	if err != nil || !r.Verified || r.Bytes <= 0 || r.Latency == nil {
		t.Fatalf("parse: %+v, %v; want verified, bytes and latency", r, err)
	}
	f, _ := Parse(Fio, fioJSON)
	if r.Bytes != f.Bytes || r.BandwidthMBs != f.BandwidthMBs {
		t.Errorf("bytes %d, %.1f MB/s; want fio's %d, %.1f", r.Bytes, r.BandwidthMBs, f.Bytes, f.BandwidthMBs)
	}
	zero := `{"type":"nvmeof_verified","blocks":0,"block_size":4096}` + "\n"
	if r, err := Parse(NVMeOF, []byte(zero+string(fioJSON))); err != nil || r.Verified {
		t.Errorf("0 blocks checked: verified %v (%v); want not verified", r.Verified, err)
	}
	if _, err := Parse(NVMeOF, []byte(warn+string(fioJSON))); err == nil || !strings.Contains(err.Error(), "verified line") {
		t.Errorf("no verified line: %v, want an error saying so", err)
	}
}
