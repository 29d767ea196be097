package vmtest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// peerLikeNode is issue 43's check, on the wire, that ib_read_bw runs
// where node runs. Over perftest's own exchange, with gid_index auto,
// both sides of ib_read_bw use the GIDs node used: perftest prints its
// own and its peer's, node's are in the manifest. Over rdma_cm with
// traffic_class 32, ib_read_bw -R -T 32 is ready when its cm_id listens,
// uses the same GIDs, and marks its READ responses ToS 0x20, as node
// does (ToS holds node to it).
func (l *wireLab) peerLikeNode(t *testing.T) {
	plan := l.plan(t, "wire-peer", `server: {file: /tmp/rdmasweep-peer.dat, file_size: 4MiB, create: true, cache: warm}
client: {block_size: 64KiB, total: 1MiB, queue_depth: 4}
sweep: {matrix: {workload: [node, ib_read_bw]}}
`)
	rows := l.exec(t, plan, "wire-peer-tcp", "--set", "rdma.connect=tcp", "--out", "out/wire-peer-tcp.csv")
	if len(rows) != 2 {
		t.Fatalf("%d rows, want node's and ib_read_bw's", len(rows))
	}
	for _, r := range rows {
		if r.Status != "ok" {
			t.Fatalf("%s: %s %s", r.Workload(), r.Status, r.Error)
		}
	}
	var nodeGIDs []string
	for _, h := range onlyManifest(t, filepath.Join(l.dir, "out"), rows[0].RunID).Hosts {
		for _, p := range h.RDMA {
			ip := net.ParseIP(p.GID)
			if ip == nil || p.GIDType != "RoCE v2" {
				t.Fatalf("manifest %s: node's GID %q (%s), want a RoCE v2 address", h.Role, p.GID, p.GIDType)
			}
			nodeGIDs = append(nodeGIDs, ip.String())
		}
	}
	slices.Sort(nodeGIDs)
	nodeGIDs = slices.Compact(nodeGIDs)
	if len(nodeGIDs) != 2 {
		t.Fatalf("node's GIDs %v, want the server's and the client's", nodeGIDs)
	}
	sameGIDs := func(what, runID string) {
		t.Helper()
		got := perftestGIDs(t, filepath.Join(l.dir, "out", "logs", runID))
		t.Logf("%s: ib_read_bw's GIDs %v, node's %v", what, got, nodeGIDs)
		if !slices.Equal(got, nodeGIDs) {
			t.Errorf("%s: ib_read_bw used GIDs %v, node %v; want the same", what, got, nodeGIDs)
		}
	}
	sameGIDs("connect tcp", rows[1].RunID)

	stop := l.server.capture(t)
	rows = l.exec(t, plan, "wire-peer-cm", "--set", "rdma.traffic_class=32", "--set", "workload=ib_read_bw", "--out", "out/wire-peer-cm.csv")
	pkts := parseRoCECapture(stop())
	if len(rows) != 1 || rows[0].Status != "ok" {
		t.Fatalf("connect cm: rows %+v, want one ok ib_read_bw row", rows)
	}
	sameGIDs("connect cm", rows[0].RunID)
	t.Logf("connect cm, traffic_class 32: captured %v; by shape %v", pkts, pkts.shapes)
	for _, dir := range []string{wireClientIP + ">" + wireServerIP, wireServerIP + ">" + wireClientIP} {
		if pkts.dirs[dir] == 0 {
			t.Errorf("connect cm: no RoCE v2 packet of ib_read_bw %s captured", dir)
		}
	}
	// The READ responses (server to client, a full 1 KiB MTU each) are
	// the data QP's, and each must carry -T 32. perftest's own exchange,
	// over an rdma_cm QP of its own without the TOS, sends a few small
	// packets each way (20 to 72 bytes), which are not the measurement.
	responses, marked := 0, 0
	for shape, n := range pkts.shapes {
		var src, dst string
		var tos, length int
		if _, err := fmt.Sscanf(strings.ReplaceAll(shape, ">", " "), "%s %s tos 0x%x length %d", &src, &dst, &tos, &length); err != nil {
			t.Fatalf("shape %q: %v", shape, err)
		}
		if src == wireServerIP && length >= 1024 {
			responses += n
			if tos == 0x20 {
				marked += n
			}
		}
	}
	if responses < 1024 || marked != responses {
		t.Errorf("connect cm: %d of %d READ response packets carry tos 0x20 (-T 32), want all of at least 1024 (1 MiB at MTU 1024)", marked, responses)
	}
}

// perftestGIDRE is the GID perftest prints for each side of its QPs,
// byte by byte in decimal: " GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:09:00:01".
var perftestGIDRE = regexp.MustCompile(`GID: ((?:\d{2,3}:){15}\d{2,3})`)

// perftestGIDs are the GIDs, as addresses, that the ib_read_bw logs of a
// run's directory print, sorted and each once; the test fails on none.
func perftestGIDs(t *testing.T, dir string) []string {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var gids []string
	for _, f := range logs {
		b, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(b), "ib_read_bw") {
			continue
		}
		for _, m := range perftestGIDRE.FindAllStringSubmatch(string(b), -1) {
			ip := make(net.IP, 0, 16)
			for _, d := range strings.Split(m[1], ":") {
				v, _ := strconv.Atoi(d)
				ip = append(ip, byte(v))
			}
			gids = append(gids, ip.String())
		}
	}
	if len(gids) == 0 {
		t.Fatalf("no GID line in the ib_read_bw logs of %s (%d logs)", dir, len(logs))
	}
	slices.Sort(gids)
	return slices.Compact(gids)
}
