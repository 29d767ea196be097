package peer

import (
	"os"
	"slices"
	"strings"
	"testing"

	"rdmasweep/results"
)

// TestNVMeOFCommands: both sides name the same subsystem and host NQNs,
// new for each point's tag; the server listens for readiness on the port
// after the target's; both run node's own commands; each side needs its
// own modules for the point's transport.
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
	for _, f := range []string{"--nqn", "--hostnqn", "--addr", "--svcid", "--transport"} {
		if s, cl := flag(c.Server, f), flag(c.Client, f); s == "" || s != cl {
			t.Errorf("%s: server %q, client %q; want the same", f, s, cl)
		}
	}
	if flag(c.Server, "--nqn") == flag(c.Server, "--hostnqn") || c.ReadyPort != 4421 {
		t.Errorf("nqn %q, hostnqn %q, ready port %d; want two NQNs, and 4421", flag(c.Server, "--nqn"), flag(c.Server, "--hostnqn"), c.ReadyPort)
	}
	p.ReportTag = "bb"
	d, _ := Build(NVMeOF, p)
	if flag(d.Server, "--nqn") == flag(c.Server, "--nqn") || flag(d.Server, "--hostnqn") == flag(c.Server, "--hostnqn") {
		t.Errorf("two points' NQNs are the same: %s", flag(d.Server, "--nqn"))
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
// report; no verified line is an error, naming what came instead.
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
	if _, err := Parse(NVMeOF, []byte(warn+string(fioJSON))); err == nil || !strings.Contains(err.Error(), "verified line") {
		t.Errorf("no verified line: %v, want an error saying so", err)
	}
}
