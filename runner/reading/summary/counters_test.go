package summary

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/results"
	"rdmasweep/runner/files/manifest"
)

// TestWriteCounters writes a run's counters sidecar as exec does, reads
// it back beside the CSV, and checks what summary --counters prints: each
// run of each point once (a point's aggregate row adds none), its label
// from the parameters that vary, each role's nonzero deltas by the
// kernel's names with the devices, what could not be read, a peer's own
// CPU figures, and a run with no counters.
func TestWriteCounters(t *testing.T) {
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "r.csv")
	row := func(run, key, cache string, rep int, scope string) results.Row {
		return results.Row{RunID: run, Plan: "p", PointKey: key, Repetition: rep, Scope: scope,
			Params: map[string]string{"cache": cache, "block_size": "1048576"}}
	}
	rows := []results.Row{
		row("R1", "k1", "cold", 1, "client"), row("R1", "k1", "cold", 1, "aggregate"),
		row("R1", "k2", "warm", 1, "client"), row("R0", "k2", "warm", 2, "client"),
	}
	cs := manifest.NewCounters(manifest.CountersPathFor(csvPath, "R1"))
	cs.Add(manifest.CounterLine{PointKey: "k1", Repetition: 1, Role: "server", Host: "a", Counters: &results.Counters{
		DiskDevice: "vda1 (partition on vda)", Netdev: "eth0",
		Raw: map[string]int64{"disk/read_sectors": 131072, "disk/write_ios": 0, "tcp/total_retrans": 455, "netdev/rx_dropped": 0}}})
	cs.Add(manifest.CounterLine{PointKey: "k1", Repetition: 1, Role: "client", Host: "b", Counters: &results.Counters{
		RDMADevice: "rxe0", RDMAPort: 1, RDMAFamily: "rxe",
		Raw:    map[string]int64{"rdma/hw_counters/completer_retry_err": 241},
		Unread: map[string]string{"netdev": "rxe0 port 1 has no network device (InfiniBand?)"}}})
	cs.Add(manifest.CounterLine{PointKey: "k2", Repetition: 1, Role: "server", Host: "a", Counters: &results.Counters{Raw: map[string]int64{"disk/read_ios": 0}}})
	// A peer's client line holds only its report's own CPU figures.
	cs.Add(manifest.CounterLine{PointKey: "k2", Repetition: 1, Role: "client", Host: "b", Counters: &results.Counters{Reported: map[string]float64{"CPU_util": 0.47}}})
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	byRun, err := ReadRunCounters(csvPath, rows)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteCounters(&b, rows, byRun); err != nil {
		t.Fatal(err)
	}
	want := `cache=cold r1 (point k1, run R1)
  server on a: disk vda1 (partition on vda), netdev eth0
    disk/read_sectors  131072
    tcp/total_retrans  455
  client on b: rdma rxe0 port 1 (rxe)
    rdma/hw_counters/completer_retry_err  241
    netdev not read: rxe0 port 1 has no network device (InfiniBand?)

cache=warm r1 (point k2, run R1)
  server on a
    no counter moved
  client on b
    CPU_util 0.47 (the peer's own report)

cache=warm r2 (point k2, run R0)
  no counters recorded
`
	if got := b.String(); got != want {
		t.Errorf("summary --counters printed\n%s\nwant\n%s", got, want)
	}

	if err := os.WriteFile(manifest.CountersPathFor(csvPath, "R0"), []byte("{\"point_key\":\"k2\"}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRunCounters(csvPath, rows); err == nil || !strings.Contains(err.Error(), "R0.counters.jsonl:1") {
		t.Errorf("a sidecar with a line that is not a counters line read with error %v, want one naming its line", err)
	}
}
