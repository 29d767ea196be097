package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"rdmasweep/results"
	"rdmasweep/testbed/clitest"
)

// cellPlans are the checked-in plans TestCellsAreNodesReport runs, each
// with what keeps it short here: a bench plan reads for 300 ms after a
// 100 ms warmup where it reads for a time, a small file where it reads
// one whole, and loopback.yaml and ssd-sweep.yaml two of their block
// sizes.
var cellPlans = map[string][]string{
	"bench-rdma.yaml": {"--set", "duration=300ms", "--set", "warmup=100ms"},
	"bench-tcp.yaml":  {"--set", "duration=300ms", "--set", "warmup=100ms"},
	"bench-ssd.yaml":  {"--set", "file_size=16MiB"},
	"ssd-sweep.yaml":  {"--set", "file_size=16MiB", "--set", "total=16MiB", "--only", "block_size=1MiB,64KiB"},
	"loopback.yaml":   {"--only", "block_size=4KiB,1MiB"},
}

// TestCellsAreNodesReport runs every bench plan, loopback.yaml and
// ssd-sweep.yaml through node, here: both roles local, over tcp (the rdma plans set so),
// the peers left out. Each row's cells that say what node did hold what
// node itself reported for that row, its events in the row's logs: the
// workload it read, its figures, the server's preparation, and no rdma
// cell where node used no RDMA path.
func TestCellsAreNodesReport(t *testing.T) {
	plans, err := filepath.Abs("../plans")
	if err != nil {
		t.Fatal(err)
	}
	benches, _ := filepath.Glob(filepath.Join(plans, "bench-*.yaml"))
	for _, f := range append(benches, filepath.Join(plans, "loopback.yaml"), filepath.Join(plans, "ssd-sweep.yaml")) {
		name := filepath.Base(f)
		extra, ok := cellPlans[name]
		if !ok {
			t.Errorf("%s: a plan this test does not know how to keep short; add it to cellPlans", name)
			continue
		}
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"exec", f, "--set", "transport=tcp", "--only", "workload=node",
				"--set", "hosts.server.address=local", "--set", "hosts.client.address=local", "--set", "port=0",
				"--set", "repeat=1", "--set", "server.file=" + filepath.Join(dir, "data"),
				"--set", "output.logs=" + filepath.Join(dir, "logs"), "--out", filepath.Join(dir, "rows.csv")}, extra...)
			r := clitest.Run(t, filepath.Join(binDir, "runner"), dir, nil, 2*time.Minute, args...)
			if r.Code != 0 {
				t.Fatalf("exec %s: exit %d\n%s", name, r.Code, r.Stderr)
			}
			rows := clitest.ReadRows(t, filepath.Join(dir, "rows.csv"))
			if len(rows) == 0 {
				t.Fatalf("exec %s: no rows\n%s", name, r.Stderr)
			}
			for _, row := range rows {
				what := fmt.Sprintf("%s row %s r%d", name, row.PointKey, row.Repetition)
				if row.Status != results.StatusOK {
					t.Fatalf("%s: %s %q", what, row.Status, row.Error)
				}
				res, ready, done := nodesReport(t, filepath.Join(dir, "logs"), row)
				for _, p := range cellProblems(row, res, ready, done) {
					t.Errorf("%s: %s", what, p)
				}
				// The headline plan reads the file once: each row, cold and
				// warm, has the SSD's figure, the file's way end to end.
				if name == "ssd-sweep.yaml" && (row.EndToEndMBs == nil || row.FirstReadMs == nil || row.Bytes == nil || *row.Bytes != 16<<20) {
					t.Errorf("%s: end_to_end_mb_s %v, first_read_ms %v, bytes %v; want the figures of one pass of the 16MiB file", what, row.EndToEndMBs, row.FirstReadMs, row.Bytes)
				}
			}
			t.Logf("%s: %d rows held to node's report", name, len(rows))
		})
	}
}

// nodesReport is what node reported for row, from the row's logs: the
// client's result, and the server's ready and done.
func nodesReport(t *testing.T, logs string, row results.Row) (*results.Result, *results.Ready, *results.Done) {
	t.Helper()
	var res *results.Result
	var ready *results.Ready
	var done *results.Done
	for _, role := range []string{"client", "server"} {
		files, _ := filepath.Glob(filepath.Join(logs, row.RunID, fmt.Sprintf("*-%s-r%d.%s.log", row.PointKey, row.Repetition, role)))
		if len(files) != 1 {
			t.Fatalf("the %s logs of %s r%d: %v, want one", role, row.PointKey, row.Repetition, files)
		}
		f, err := os.Open(files[0])
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, results.MaxEventLine)
		for sc.Scan() {
			if !strings.HasPrefix(sc.Text(), "{") {
				continue
			}
			ev, err := results.Decode(sc.Bytes())
			if err != nil {
				t.Fatalf("%s: %v", files[0], err)
			}
			switch ev := ev.(type) {
			case *results.Result:
				res = ev
			case *results.Ready:
				ready = ev
			case *results.Done:
				done = ev
			}
		}
		f.Close()
	}
	if res == nil || ready == nil || done == nil {
		t.Fatalf("the logs of %s r%d hold result %v, ready %v, done %v: want node's three", row.PointKey, row.Repetition, res != nil, ready != nil, done != nil)
	}
	return res, ready, done
}

// cellProblems lists each cell of row that says other than node's report.
func cellProblems(row results.Row, res *results.Result, ready *results.Ready, done *results.Done) []string {
	var out []string
	cell := func(name, want string) {
		if got := row.Param(name); got != want {
			out = append(out, fmt.Sprintf("%s cell %q, node reported %q", name, got, want))
		}
	}
	num := func(name string, got *float64, want float64) {
		if got == nil || *got != want {
			out = append(out, fmt.Sprintf("%s %v, node reported %v", name, shown(got), want))
		}
	}
	cell("transport", res.Transport)
	cell("block_size", strconv.Itoa(res.BlockSize))
	cell("queue_depth", strconv.Itoa(res.QueueDepth))
	cell("qps", strconv.Itoa(res.QPs))
	if res.Reads*int64(res.BlockSize) != res.Bytes {
		out = append(out, fmt.Sprintf("node read %d bytes in %d reads of %d", res.Bytes, res.Reads, res.BlockSize))
	}
	// What the point was set to read, node read: a total (in whole
	// blocks), or for a duration.
	if total := row.ParamInt("total"); total > 0 && res.Bytes != (total+int64(res.BlockSize)-1)/int64(res.BlockSize)*int64(res.BlockSize) {
		out = append(out, fmt.Sprintf("total cell %d, node read %d bytes", total, res.Bytes))
	}
	if d, _ := strconv.ParseFloat(row.Param("duration"), 64); d > 0 && res.Seconds < d {
		out = append(out, fmt.Sprintf("duration cell %v s, node read for %v s", d, res.Seconds))
	}
	if row.Bytes == nil || *row.Bytes != res.Bytes {
		out = append(out, fmt.Sprintf("bytes %v, node reported %d", shown(row.Bytes), res.Bytes))
	}
	num("seconds", row.Seconds, res.Seconds)
	num("bandwidth_mb_s", row.BandwidthMBs, res.BandwidthMBs)
	num("iops", row.IOPS, res.IOPS)
	num("lat_p50_us", row.LatP50Us, res.LatP50Us)
	num("lat_p99_us", row.LatP99Us, res.LatP99Us)
	num("cpu_client", row.CPUClient, (res.CPUUserS+res.CPUSysS)/res.CPUWallS)
	num("cpu_server", row.CPUServer, (done.CPUUserS+done.CPUSysS)/done.CPUWallS)
	num("cached_fraction", row.CachedFraction, ready.CachedFraction)
	if row.Verified == nil || *row.Verified != res.Verified {
		out = append(out, fmt.Sprintf("verified %v, node reported %v", shown(row.Verified), res.Verified))
	}
	if (row.WarmupUsedS == nil) != (res.WarmupS == nil) || res.WarmupS != nil && *row.WarmupUsedS != *res.WarmupS {
		out = append(out, fmt.Sprintf("warmup_used_s %v, node reported %v", shown(row.WarmupUsedS), shown(res.WarmupS)))
	}
	if row.Mapping != ready.Mapping || (row.Regions == nil) != (ready.Regions == 0) {
		out = append(out, fmt.Sprintf("mapping %q and regions %v, node reported %q and %d", row.Mapping, shown(row.Regions), ready.Mapping, ready.Regions))
	}
	if (row.Saturated == nil) != (res.OpenLoop == nil) || row.Param("rate") != "" != (res.OpenLoop != nil) {
		out = append(out, fmt.Sprintf("open loop cells %q %v, node's open loop %+v", row.Param("rate"), shown(row.Saturated), res.OpenLoop))
	}
	return append(out, rdmaCellProblems(row, res.RDMAPath)...)
}

// rdmaCellProblems lists the rdma cells of row that say other than the
// RDMA path node reported: none of them filled where it used none.
func rdmaCellProblems(row results.Row, p *results.RDMAPath) []string {
	var out []string
	if p == nil {
		for _, name := range []string{"cq_moderation", "max_rd_atomic", "relaxed_ordering", "registration"} {
			if c := row.Param(name); c != "" {
				out = append(out, fmt.Sprintf("%s cell %q, and node used no RDMA path", name, c))
			}
		}
		if row.LinkLayer != "" || row.LID != nil {
			out = append(out, fmt.Sprintf("link layer %q, and node used no RDMA path", row.LinkLayer))
		}
		return out
	}
	if c := row.Param("cq_moderation"); c != strconv.Itoa(p.CQModeration) {
		out = append(out, fmt.Sprintf("cq_moderation cell %q, node used %d", c, p.CQModeration))
	}
	// auto is empty: the devices chose it, as the manifest records.
	if c := row.Param("max_rd_atomic"); c != "" && c != strconv.Itoa(p.MaxRdAtomic) {
		out = append(out, fmt.Sprintf("max_rd_atomic cell %q, node used %d", c, p.MaxRdAtomic))
	}
	if row.LinkLayer != p.LinkLayer {
		out = append(out, fmt.Sprintf("link layer %q, node's %q", row.LinkLayer, p.LinkLayer))
	}
	return out
}

// shown is *p for a message, or "empty".
func shown[T any](p *T) any {
	if p == nil {
		return "empty"
	}
	return *p
}
