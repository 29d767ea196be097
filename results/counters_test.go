package results

import "testing"

// TestSetCountersFromEvents decodes a server's done and a client's result
// as node prints them and checks the row's counter columns: disk and
// faults from the server, TCP retransmits from both ends, a port both
// roles read on one host counted once, and a headline neither role has
// left empty (nil), never 0.
func TestSetCountersFromEvents(t *testing.T) {
	done := `{"type":"done","bytes_served":1,"counters":{"boot_id":"B1","disk_device":"vda1 (partition on vda)","rdma_device":"rxe0","rdma_port":1,"rdma_family":"rxe","netdev":"eth1",
		"disk_read_bytes":67108864,"major_faults":12,"minor_faults":3000,"rdma_retrans_events":704,"net_drops":2,"raw":{"disk/read_sectors":131072,"rdma/hw_counters/duplicate_request":704}}}`
	local := `{"type":"result","bytes":1,"counters":{"boot_id":"B1","rdma_device":"rxe0","rdma_port":1,"rdma_family":"rxe","netdev":"eth1","rdma_retrans_events":704,"net_drops":2,"major_faults":1}}`
	remote := `{"type":"result","bytes":1,"counters":{"boot_id":"B2","rdma_device":"rxe0","rdma_port":1,"rdma_family":"rxe","netdev":"eth1","rdma_retrans_events":241,"net_drops":1}}`
	tcpSrv := `{"type":"done","counters":{"boot_id":"B1","netdev":"lo","tcp_retrans":455,"tcp_rtt_us":80.5,"net_drops":0,"minor_faults":10,"major_faults":0}}`
	tcpCli := `{"type":"result","counters":{"boot_id":"B1","netdev":"lo","tcp_retrans":1,"net_drops":0}}`
	decode := func(line string) *Counters {
		t.Helper()
		ev, err := Decode([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *Done:
			return e.Counters
		case *Result:
			return e.Counters
		}
		t.Fatalf("%T", ev)
		return nil
	}
	i := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		name           string
		server, client *Counters
		want           Row
	}{
		{"rdma, both roles on one host", decode(done), decode(local), Row{
			DiskReadBytes: i(67108864), ServerMajorFaults: i(12), ServerMinorFaults: i(3000),
			RDMARetransEvents: i(704), NetDrops: i(2)}},
		{"rdma across a wire", decode(done), decode(remote), Row{
			DiskReadBytes: i(67108864), ServerMajorFaults: i(12), ServerMinorFaults: i(3000),
			RDMARetransEvents: i(945), NetDrops: i(3)}},
		{"tcp", decode(tcpSrv), decode(tcpCli), Row{
			ServerMajorFaults: i(0), ServerMinorFaults: i(10), TCPRetrans: i(456), NetDrops: i(0)}},
		{"an older node", nil, nil, Row{}},
	} {
		var r Row
		r.SetCounters(c.server, c.client)
		for _, f := range []struct {
			col       string
			got, want *int64
		}{
			{"disk_read_bytes", r.DiskReadBytes, c.want.DiskReadBytes},
			{"server_major_faults", r.ServerMajorFaults, c.want.ServerMajorFaults},
			{"server_minor_faults", r.ServerMinorFaults, c.want.ServerMinorFaults},
			{"tcp_retrans", r.TCPRetrans, c.want.TCPRetrans},
			{"rdma_retrans_events", r.RDMARetransEvents, c.want.RDMARetransEvents},
			{"rdma_cnp", r.RDMACNP, c.want.RDMACNP},
			{"rdma_ecn_marked", r.RDMAECNMarked, c.want.RDMAECNMarked},
			{"net_drops", r.NetDrops, c.want.NetDrops},
		} {
			switch {
			case f.want == nil && f.got != nil:
				t.Errorf("%s: %s = %d, want empty", c.name, f.col, *f.got)
			case f.want != nil && f.got == nil:
				t.Errorf("%s: %s empty, want %d", c.name, f.col, *f.want)
			case f.want != nil && *f.got != *f.want:
				t.Errorf("%s: %s = %d, want %d", c.name, f.col, *f.got, *f.want)
			}
		}
	}
}
