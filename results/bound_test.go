package results

import "testing"

// The resource at the highest share of its capacity bounds a row when
// that share is 0.9 or more (0.9 itself included), named with every other
// at 0.9 or more within 0.05 of it; below that the row is unknown and its
// detail names the nearest first. An rdma client's CPU
// (it busy-polls) is never a bound; a tcp client's is.
func TestSetBoundBy(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	row := func(transport string, bw, line, busy, cpuS, cpuC *float64) Row {
		return Row{Status: StatusOK, Params: map[string]string{"transport": transport},
			BandwidthMBs: bw, LineRateMBs: line, DiskBusyPct: busy, CPUServer: cpuS, CPUClient: cpuC}
	}
	for _, c := range []struct {
		name       string
		r          Row
		by, detail string
	}{
		{"disk throttled", row(TransportRDMA, f(10), f(1250), f(97), f(0.01), f(1)), BoundDisk, "disk 0.97, cpu_server 0.01, link 0.01"},
		{"wire slowed", row(TransportRDMA, f(118), f(125), f(30), f(0), f(1)), BoundLink, "link 0.94, disk 0.30, cpu_server 0.00"},
		{"tcp server CPU", row(TransportTCP, f(2200), nil, nil, f(0.95), f(0.3)), BoundCPUServer, "cpu_server 0.95, cpu_client 0.30"},
		{"tcp client CPU", row(TransportTCP, f(900), nil, nil, f(0.4), f(1.02)), BoundCPUClient, "cpu_client 1.02, cpu_server 0.40"},
		{"at the bound", row(TransportTCP, f(1125), f(1250), nil, nil, nil), BoundLink, "link 0.90"},
		{"under it", row(TransportTCP, f(1124), f(1250), f(20), nil, nil), BoundUnknown, "nearest: link 0.90, disk 0.20"},
		{"nothing near", row(TransportRDMA, f(30), f(1250), f(5), f(0.2), f(1)), BoundUnknown, "nearest: cpu_server 0.20, disk 0.05, link 0.02"},
		{"no figures", row(TransportTCP, f(30), nil, nil, nil, nil), "", ""},
		{"disk and link together", row(TransportRDMA, f(118), f(125), f(97), f(0.1), f(1)), BoundDisk + "+" + BoundLink, "disk 0.97, link 0.94, cpu_server 0.10"},
		{"link just past the tie", row(TransportRDMA, f(114), f(125), f(97), f(0.1), f(1)), BoundDisk, "disk 0.97, link 0.91, cpu_server 0.10"},
		{"three at once", row(TransportTCP, f(1200), f(1250), f(99), f(0.95), f(0.2)), BoundDisk + "+" + BoundLink + "+" + BoundCPUServer, "disk 0.99, link 0.96, cpu_server 0.95, cpu_client 0.20"},
		{"close, but one under the bound", row(TransportTCP, f(1100), f(1250), f(92), nil, nil), BoundDisk, "disk 0.92, link 0.88"},
		// Against the disk's ceiling: an NVMe busy all along at depth 1 is
		// far from its ceiling; one reading at its ceiling is the bound,
		// whatever io_ticks says.
		{"depth 1 on an NVMe", withDisk(row(TransportTCP, f(24), f(1250), f(100), f(0.3), f(0.2)), f(24), f(1400)), BoundUnknown, "nearest: cpu_server 0.30, cpu_client 0.20, link 0.02, disk 0.02"},
		{"at the ceiling", withDisk(row(TransportTCP, f(1300), f(12500), f(60), f(0.3), f(0.2)), f(1330), f(1400)), BoundDisk, "disk 0.95, cpu_server 0.30, cpu_client 0.20, link 0.10"},
		{"ceiling, no rate", withDisk(row(TransportTCP, f(24), f(1250), f(97), nil, nil), nil, f(1400)), BoundDisk, "disk 0.97, link 0.02"},
		// A CPU's share is its role's busiest thread: eight threads at a
		// fifth of a core each bound nothing; one thread at a core does.
		{"many threads, none busy", withThreads(row(TransportTCP, f(800), f(12500), nil, f(1.6), f(0.3)), f(0.2), f(0.3)), BoundUnknown, "nearest: cpu_client 0.30, cpu_server 0.20, link 0.06"},
		{"one thread at a core", withThreads(row(TransportTCP, f(800), f(12500), nil, f(1.1), f(0.3)), f(0.97), f(0.3)), BoundCPUServer, "cpu_server 0.97, cpu_client 0.30, link 0.06"},
	} {
		r := c.r
		r.SetBoundBy()
		if r.BoundBy != c.by || r.BoundByDetail != c.detail {
			t.Errorf("%s: bound_by %q (%q), want %q (%q)", c.name, r.BoundBy, r.BoundByDetail, c.by, c.detail)
		}
	}
	failed := row(TransportTCP, nil, nil, f(99), nil, nil)
	failed.Status = StatusFailed
	if failed.SetBoundBy(); failed.BoundBy != "" || failed.BoundByDetail != "" {
		t.Errorf("a failed row: bound_by %q (%q), want empty", failed.BoundBy, failed.BoundByDetail)
	}
}

// withDisk is r with disk_read_mb_s and disk_ceiling_mb_s.
func withDisk(r Row, read, ceiling *float64) Row {
	r.DiskReadMBs, r.DiskCeilingMBs = read, ceiling
	return r
}

// withThreads is r with cpu_server_thread and cpu_client_thread.
func withThreads(r Row, server, client *float64) Row {
	r.CPUServerThread, r.CPUClientThread = server, client
	return r
}

// TestThreadColumns: each role's busiest thread per second comes from its
// event's cpu_thread_s over cpu_wall_s; a node that did not read it
// leaves the cell empty, and bound_by takes the whole process's.
func TestThreadColumns(t *testing.T) {
	var r Row
	r.SetResult(&Result{CPUUserS: 1.2, CPUSysS: 0.4, CPUWallS: 2, CPUThreadS: 1.5})
	r.SetDone(&Done{CPUUserS: 0.5, CPUWallS: 2, CPUThreadS: 0.2})
	if r.CPUClientThread == nil || *r.CPUClientThread != 0.75 || r.CPUServerThread == nil || *r.CPUServerThread != 0.1 {
		t.Errorf("cpu_client_thread %v, cpu_server_thread %v; want 0.75 and 0.1", r.CPUClientThread, r.CPUServerThread)
	}
	var old Row
	old.SetResult(&Result{CPUUserS: 1.2, CPUWallS: 2})
	old.SetDone(&Done{CPUUserS: 0.5, CPUWallS: 2})
	if old.CPUClientThread != nil || old.CPUServerThread != nil || old.CPUClient == nil {
		t.Errorf("without cpu_thread_s: cpu_client_thread %v, cpu_server_thread %v; want both empty", old.CPUClientThread, old.CPUServerThread)
	}
}
