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
		// busy is the disk's share in %: read at busy MB/s of a 100 MB/s
		// ceiling, io_ticks saying the same.
		r := Row{Status: StatusOK, Params: map[string]string{"transport": transport},
			BandwidthMBs: bw, LineRateMBs: line, DiskBusyPct: busy, CPUServer: cpuS, CPUClient: cpuC}
		if busy != nil {
			r.DiskReadMBs, r.DiskCeilingMBs = busy, f(100)
		}
		return r
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
		{"ceiling, no rate", withDisk(row(TransportTCP, f(24), f(1250), f(97), nil, nil), nil, f(1400)), BoundUnknown, "nearest: link 0.02"},
		{"io_ticks alone", withDisk(row(TransportTCP, f(24), f(1250), f(100), nil, nil), nil, nil), BoundUnknown, "nearest: link 0.02"},
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

// An rdma client busy-polls, so its thread's CPU is near a core whatever
// it does: node's share is its loop's working time (cpu_client_busy, from
// the result's idle_s over its seconds), ib_read_bw's is left out, and
// nvmeof's fio, which blocks, is counted by its CPU as tcp's client is.
func TestClientCPUOverRDMA(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	var r Row
	r.Params = map[string]string{"transport": TransportRDMA}
	r.SetResult(&Result{Seconds: 4, IdleS: f(0.2), BandwidthMBs: 10, CPUThreadS: 4, CPUWallS: 4})
	if r.CPUClientBusy == nil || *r.CPUClientBusy != 0.95 {
		t.Fatalf("cpu_client_busy %v, want 0.95 (3.8 s of 4 working)", r.CPUClientBusy)
	}
	for _, c := range []struct {
		name       string
		workload   string
		busy, thr  *float64
		by, detail string
	}{
		{"node verifying", "node", f(0.95), f(1), BoundCPUClient, "cpu_client 0.95"},
		{"node waiting", "node", f(0.2), f(1), BoundUnknown, "nearest: cpu_client 0.20"},
		{"ib_read_bw polling", "ib_read_bw", nil, f(1), "", ""},
		{"nvmeof's fio", "nvmeof", nil, f(0.93), BoundCPUClient, "cpu_client 0.93"},
	} {
		r := Row{Status: StatusOK, Params: map[string]string{"transport": TransportRDMA, "workload": c.workload}, CPUClientBusy: c.busy, CPUClientThread: c.thr}
		r.SetBoundBy()
		if r.BoundBy != c.by || r.BoundByDetail != c.detail {
			t.Errorf("%s: bound_by %q (%q), want %q (%q)", c.name, r.BoundBy, r.BoundByDetail, c.by, c.detail)
		}
	}
}

// A serial cold rdma row's preparation is judged apart, by the same rule
// over its own phase: the disk's rate in it against the ceiling, and the
// server's busiest thread. A pipelined, warm or tcp row gets no
// bound_by_prep; the ready event's prep reaches the row.
func TestBoundByPrep(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	row := func(transport, cache, pipeline string, disk, cpu *float64) Row {
		r := Row{Status: StatusOK, Params: map[string]string{"transport": transport, "cache": cache, "pipeline": pipeline}, DiskCeilingMBs: f(8)}
		r.SetReady(&Ready{Prep: &Prep{Seconds: 4, DiskReadMBs: disk, CPUThread: cpu}})
		return r
	}
	for _, c := range []struct {
		name       string
		r          Row
		by, detail string
	}{
		{"the disk's pace", row(TransportRDMA, "cold", "false", f(7.8), f(0.1)), BoundDisk, "disk 0.97, cpu_server 0.10"},
		{"pinning on one core", row(TransportRDMA, "cold", "false", f(2), f(0.98)), BoundCPUServer, "cpu_server 0.98, disk 0.25"},
		{"neither", row(TransportRDMA, "cold", "false", f(4), f(0.5)), BoundUnknown, "nearest: disk 0.50, cpu_server 0.50"},
		{"no disk under it", row(TransportRDMA, "cold", "false", nil, f(0.3)), BoundUnknown, "nearest: cpu_server 0.30"},
		{"pipelined", row(TransportRDMA, "cold", "true", f(7.8), f(0.1)), "", ""},
		{"warm", row(TransportRDMA, "warm", "false", f(7.8), f(0.1)), "", ""},
		{"tcp", row(TransportTCP, "cold", "", f(7.8), f(0.1)), "", ""},
	} {
		r := c.r
		r.SetBoundBy()
		if r.BoundByPrep != c.by || r.BoundByPrepDetail != c.detail {
			t.Errorf("%s: bound_by_prep %q (%q), want %q (%q)", c.name, r.BoundByPrep, r.BoundByPrepDetail, c.by, c.detail)
		}
	}
}
