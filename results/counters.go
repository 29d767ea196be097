package results

// Counters is what the kernel counted on one role's host over its
// measured phase, carried in node read's result and node serve's done
// event: the portable headlines a row's columns take, and every raw delta
// under the kernel's own name for the run's counters sidecar.
//
// A headline is nil, and its cell empty, where the host has no such
// counter or it could not be read (Unread says why): never 0, which would
// read as "nothing happened".
type Counters struct {
	// BootID is the host's boot id, so the runner counts a host-wide
	// counter (an RDMA port's, a netdev's) once when two roles share it.
	BootID string `json:"boot_id,omitempty"`
	// DiskDevice is the block device whose stat was read, and what it
	// sits on, e.g. "vda1 (partition on vda)" (server only).
	DiskDevice string `json:"disk_device,omitempty"`
	// RDMADevice, RDMAPort and RDMAFamily are the RDMA port whose
	// counters were read and its device family (rxe, mlx5, irdma, siw)
	// (rdma only).
	RDMADevice string `json:"rdma_device,omitempty"`
	RDMAPort   int    `json:"rdma_port,omitempty"`
	RDMAFamily string `json:"rdma_family,omitempty"`
	// Netdev is the network device whose statistics were read: the one
	// with the data address, or the RDMA port's.
	Netdev string `json:"netdev,omitempty"`

	// DiskReadBytes is what the block device read, from just after the
	// server set the cache state to the end of its clients' sessions.
	DiskReadBytes *int64 `json:"disk_read_bytes,omitempty"`
	// DiskBusyPct is the device's io_ticks over the same window, in %,
	// and DiskAvgQueue its time_in_queue over it: the I/Os in flight on
	// average.
	DiskBusyPct  *float64 `json:"disk_busy_pct,omitempty"`
	DiskAvgQueue *float64 `json:"disk_avg_queue,omitempty"`
	// DiskReadMBs is what the device read while the clients read (from
	// the start of serving to its end) ÷ the session's seconds, in MB/s:
	// the disk's rate in the window the link's and CPU's shares are over.
	DiskReadMBs *float64 `json:"disk_read_mb_s,omitempty"`
	// MajorFaults and MinorFaults are node's own page faults
	// (getrusage) over its whole life, registration included.
	MajorFaults *int64 `json:"major_faults,omitempty"`
	MinorFaults *int64 `json:"minor_faults,omitempty"`
	// TCPRetrans is the data connection's own tcpi_total_retrans delta
	// (a server's: all its clients' connections), and TCPRTTUs its
	// smoothed round trip at the end, in µs (tcp only).
	TCPRetrans *int64   `json:"tcp_retrans,omitempty"`
	TCPRTTUs   *float64 `json:"tcp_rtt_us,omitempty"`
	// RDMARetransEvents, RDMACNP and RDMAECNMarked are the port's
	// counters summed by the device family's mapping (docs/telemetry.md).
	RDMARetransEvents *int64 `json:"rdma_retrans_events,omitempty"`
	RDMACNP           *int64 `json:"rdma_cnp,omitempty"`
	RDMAECNMarked     *int64 `json:"rdma_ecn_marked,omitempty"`
	// NetDrops is the netdev's rx_dropped + tx_dropped.
	NetDrops *int64 `json:"net_drops,omitempty"`

	// Raw is every delta, keyed GROUP/NAME with the kernel's own NAME:
	// disk/read_sectors, rdma/hw_counters/duplicate_request,
	// netdev/rx_dropped, process/major_faults, tcp/total_retrans.
	Raw map[string]int64 `json:"raw,omitempty"`
	// Units names, by Raw key, the unit of a raw counter that counts
	// something other than its name says: an InfiniBand port's
	// port_xmit_data and port_rcv_data count 4-byte words (IBA
	// PortCounters; the kernel passes them on as they are), so bytes are
	// 4 × the delta.
	Units map[string]string `json:"units,omitempty"`
	// Unread says, by group, why a group could not be read, e.g. "disk":
	// "no block device under the file".
	Unread map[string]string `json:"unread,omitempty"`
	// Reported, on a peer's client line, are its report's own CPU
	// figures under the report's names, e.g. ib_read_bw's CPU_util
	// (perftest's share of the whole host's CPU time, in percent). The
	// row's CPU cells are node run's instead (docs/workloads.md).
	Reported map[string]float64 `json:"reported,omitempty"`
}

// SetCounters fills the row's counter columns from its server's and its
// client's counters; either may be nil. Disk and faults are the
// server's. TCP retransmits are both ends' connections. The RDMA and
// netdev headlines add the two roles' ports, but count a port once when
// both roles read the same one on the same host (local roles), where
// the server's window spans the client's.
func (r *Row) SetCounters(server, client *Counters) {
	var s, c Counters
	if server != nil {
		s = *server
	}
	if client != nil {
		c = *client
	}
	r.DiskReadBytes = s.DiskReadBytes
	r.DiskBusyPct, r.DiskAvgQueue = s.DiskBusyPct, s.DiskAvgQueue
	r.DiskReadMBs = s.DiskReadMBs
	r.ServerMajorFaults, r.ServerMinorFaults = s.MajorFaults, s.MinorFaults
	r.TCPRetrans = plus(s.TCPRetrans, c.TCPRetrans)
	sameHost := s.BootID != "" && s.BootID == c.BootID
	if sameHost && s.RDMADevice != "" && s.RDMADevice == c.RDMADevice && s.RDMAPort == c.RDMAPort {
		c.RDMARetransEvents, c.RDMACNP, c.RDMAECNMarked = nil, nil, nil
	}
	if sameHost && s.Netdev != "" && s.Netdev == c.Netdev {
		c.NetDrops = nil
	}
	r.RDMARetransEvents = plus(s.RDMARetransEvents, c.RDMARetransEvents)
	r.RDMACNP = plus(s.RDMACNP, c.RDMACNP)
	r.RDMAECNMarked = plus(s.RDMAECNMarked, c.RDMAECNMarked)
	r.NetDrops = plus(s.NetDrops, c.NetDrops)
}

// plus adds two counts; nil only where both are.
func plus(a, b *int64) *int64 {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	s := *a + *b
	return &s
}
