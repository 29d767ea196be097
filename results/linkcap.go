package results

import "rdmasweep/results/linerate"

// How a row's link_capacity_mb_s is known (SetLinkCapacity).
const (
	LinkFromLineRate = "line_rate"
	LinkFromMeasured = "measured"
)

// Bytes a packet carries on the wire beside its payload, by protocol:
//   - Ethernet: 8 of preamble and start delimiter, 12 of gap, 14 of
//     header and 4 of FCS, which the port's speed counts too;
//   - tcp over IPv4: 20 of IP and 32 of TCP with timestamps, inside the
//     MTU;
//   - RoCE v2: 20 of IPv4, 8 of UDP, 12 of BTH and 4 of ICRC, outside the
//     path MTU, which is the payload's;
//   - InfiniBand: 8 of LRH, 12 of BTH, 4 of ICRC and 2 of VCRC, without
//     a GRH (40 more, 1 % at 4 KiB). Its line rate is after encoding.
//
// A READ response's AETH (4 bytes on its first and last packets) is left
// out: under 0.1 % of a 64 KiB read.
const (
	ethernetFrame = 8 + 12 + 14 + 4
	tcpHeaders    = 20 + 32
	roceHeaders   = 20 + 8 + 12 + 4
	ibHeaders     = 8 + 12 + 4 + 2
)

// PayloadShare is the share of a link's line rate that carries payload,
// in full packets of mtu bytes, for transport over linkLayer (an rdma
// port's: "InfiniBand" or "Ethernet"; tcp's is Ethernet); 0 when mtu is
// unknown.
func PayloadShare(transport, linkLayer string, mtu int) float64 {
	if mtu <= 0 {
		return 0
	}
	m := float64(mtu)
	switch {
	case transport == TransportTCP:
		if mtu <= tcpHeaders {
			return 0
		}
		return (m - tcpHeaders) / (m + ethernetFrame)
	case linkLayer == "InfiniBand":
		return m / (m + ibHeaders)
	default: // RoCE
		return m / (m + roceHeaders + ethernetFrame)
	}
}

// LinkKey is the key of a measured link capacity: the server host, the
// client host and the transport, as a row names them.
func LinkKey(server, client, transport string) string {
	return server + " → " + client + " " + transport
}

// NeedsLinkCapacity reports whether an ok row's server said its link has
// no line rate (node serve does; a peer's row, with no node serving, says
// nothing, and measuring its link with the peer itself would name the
// peer's rate the link's) and the link is one a measurement would find:
// not loopback.
func (r Row) NeedsLinkCapacity() bool {
	return r.Status == StatusOK && r.LineRateMBs == nil && r.LineRateUnknown != "" && r.LineRateUnknown != linerate.Loopback &&
		r.ServerHost != "" && r.ClientHost != ""
}

// SetLinkCapacity sets link_capacity_mb_s and link_capacity_from on an ok
// row: its line rate times PayloadShare at its path MTU (the line rate
// alone where the MTU is unknown), or, without a line rate, the capacity
// measured between its hosts (measured, by LinkKey); else neither.
func (r *Row) SetLinkCapacity(measured map[string]float64) {
	r.LinkCapacityMBs, r.LinkCapacityFrom = nil, ""
	if r.Status != StatusOK {
		return
	}
	if r.LineRateMBs != nil && *r.LineRateMBs > 0 {
		share := 1.0
		if r.PathMTU != nil {
			if s := PayloadShare(r.Transport(), r.LinkLayer, *r.PathMTU); s > 0 {
				share = s
			}
		}
		r.LinkCapacityMBs, r.LinkCapacityFrom = ref(*r.LineRateMBs*share), LinkFromLineRate
		return
	}
	if mbs, ok := measured[LinkKey(r.ServerHost, r.ClientHost, r.Transport())]; ok && mbs > 0 && r.NeedsLinkCapacity() {
		r.LinkCapacityMBs, r.LinkCapacityFrom = ref(mbs), LinkFromMeasured
	}
}
