package results

import (
	"fmt"
	"testing"

	"rdmasweep/results/linerate"
)

// The payload a link carries, as a share of its line rate, from each
// protocol's bytes beside the payload: tcp in a 1500-byte Ethernet frame
// 1448 of 1538, RoCE v2 1024 of 1106 and 4096 of 4178, InfiniBand 4096
// of 4122.
func TestPayloadShare(t *testing.T) {
	for _, c := range []struct {
		transport, layer string
		mtu              int
		want             string
	}{
		{TransportTCP, "", 1500, "0.9415"},
		{TransportTCP, "", 9000, "0.9900"},
		{TransportRDMA, "Ethernet", 1024, "0.9259"},
		{TransportRDMA, "Ethernet", 4096, "0.9804"},
		{TransportRDMA, "InfiniBand", 4096, "0.9937"},
		{TransportRDMA, "InfiniBand", 2048, "0.9875"},
		{TransportRDMA, "Ethernet", 0, "0.0000"},
		{TransportTCP, "", 40, "0.0000"},
	} {
		if got := fmt.Sprintf("%.4f", PayloadShare(c.transport, c.layer, c.mtu)); got != c.want {
			t.Errorf("%s over %q at MTU %d: %s, want %s", c.transport, c.layer, c.mtu, got, c.want)
		}
	}
}

// A row's link capacity is its line rate at the protocol's payload share
// where the NIC reports a rate; where it reports none, the capacity
// measured between its two hosts over its transport; over loopback, or
// for a peer's row (no node served it to say), none. The link's bound_by share is of the capacity: RoCE at 1024 bytes
// reading 0.88 of the line rate is bound by the link (0.95 of what the
// link carries), though 0.88 of the line rate alone is not.
func TestSetLinkCapacity(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	mtu := func(n int) *int { return &n }
	measured := map[string]float64{LinkKey("a", "b", TransportTCP): 40, LinkKey("a", "b", TransportRDMA): 12}
	row := func(transport string, bw, line *float64, pmtu *int) Row {
		r := Row{Status: StatusOK, Params: map[string]string{"transport": transport}, ServerHost: "a", ClientHost: "b",
			BandwidthMBs: bw, LineRateMBs: line, PathMTU: pmtu, LinkLayer: map[string]string{TransportRDMA: "Ethernet"}[transport]}
		if line == nil {
			r.LineRateUnknown = "read eth1's speed: invalid argument"
		}
		return r
	}
	loop := row(TransportTCP, f(38), nil, nil)
	loop.LineRateUnknown = linerate.Loopback
	peer := row(TransportRDMA, f(12), nil, nil)
	peer.LineRateUnknown = ""
	peer.Params["workload"] = "ib_read_bw"
	other := row(TransportTCP, f(38), nil, nil)
	other.ClientHost = "c"
	failed := row(TransportTCP, nil, f(1250), mtu(1500))
	failed.Status = StatusFailed
	for _, c := range []struct {
		name       string
		r          Row
		capacity   string
		from       string
		by, detail string
	}{
		{"RoCE at 1024", row(TransportRDMA, f(11000), f(12500), mtu(1024)), "11573.2", LinkFromLineRate, BoundLink, "link 0.95"},
		{"RoCE at 4096", row(TransportRDMA, f(11000), f(12500), mtu(4096)), "12254.7", LinkFromLineRate, BoundUnknown, "nearest: link 0.90"},
		{"tcp at 1500", row(TransportTCP, f(11.4), f(12.5), mtu(1500)), "11.8", LinkFromLineRate, BoundLink, "link 0.97"},
		{"no MTU", row(TransportTCP, f(11.4), f(12.5), nil), "12.5", LinkFromLineRate, BoundLink, "link 0.91"},
		{"virtio, tcp", row(TransportTCP, f(38), nil, mtu(1500)), "40.0", LinkFromMeasured, BoundLink, "link 0.95"},
		{"virtio, rdma", row(TransportRDMA, f(6), nil, mtu(1024)), "12.0", LinkFromMeasured, BoundUnknown, "nearest: link 0.50"},
		{"loopback", loop, "", "", "", ""},
		{"a peer's row, no node serving", peer, "", "", "", ""},
		{"a pair not measured", other, "", "", "", ""},
		{"failed", failed, "", "", "", ""},
	} {
		r := c.r
		r.SetLinkCapacity(measured)
		got := ""
		if r.LinkCapacityMBs != nil {
			got = fmt.Sprintf("%.1f", *r.LinkCapacityMBs)
		}
		r.SetBoundBy()
		if got != c.capacity || r.LinkCapacityFrom != c.from || r.BoundBy != c.by || r.BoundByDetail != c.detail {
			t.Errorf("%s: link_capacity_mb_s %q from %q, bound_by %q (%q); want %q from %q, %q (%q)", c.name, got, r.LinkCapacityFrom, r.BoundBy, r.BoundByDetail, c.capacity, c.from, c.by, c.detail)
		}
	}
}
