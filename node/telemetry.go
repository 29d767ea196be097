package main

import (
	"fmt"
	"net"

	"rdmasweep/node/counters"
	"rdmasweep/node/transport"
	"rdmasweep/results"
	"rdmasweep/results/linerate"
)

// The counters a role reads around its measured phase (docs/telemetry.md):
// node serve counts the disk from the moment its file's cache state is
// set (so a cold point's reads show up, at registration or during the
// transfer) and its port and netdev from when it is ready, to its
// clients' departure; node read counts its port and netdev around its
// reads (with rdma its warmup too: the C loop runs both in one call).
// Each role's TCP figures are its data connection's own.

// pathOf is the RDMA path a client connected over, nil for a transport
// with none (tcp): the rdma client tells it from Dial on.
func pathOf(cl transport.Client) *results.RDMAPath {
	if p, ok := cl.(interface{ Path() *results.RDMAPath }); ok {
		return p.Path()
	}
	return nil
}

// beginPort begins counting the RDMA port a role uses and the network
// device under it.
func beginPort(s *counters.Sample, p *results.RDMAPath) {
	s.Port(p.Device, p.IBPort)
	nd, err := counters.PortNetdev("", p.Device, p.IBPort)
	if err != nil {
		s.Netdev("", err.Error())
		return
	}
	s.Netdev(nd, "")
}

// netdevWith names the network device that holds addr, or says why none
// can be named.
func netdevWith(addr net.IP) (name, why string) {
	switch {
	case addr == nil:
		return "", "no data address"
	case addr.IsUnspecified():
		return "", "listening on all addresses, so no one device carries the data"
	}
	ifaces, err := linerate.Ifaces()
	if err != nil {
		return "", err.Error()
	}
	if i, ok := linerate.Holding(ifaces, addr); ok {
		return i.Name, ""
	}
	return "", fmt.Sprintf("no network device has the address %s", addr)
}

// beginClient begins counting what node read's data crosses: its RDMA
// port, or the network device it reaches the server from.
func beginClient(cl transport.Client, server string) *counters.Sample {
	s := counters.NewSample("")
	if p := pathOf(cl); p != nil {
		beginPort(s, p)
		return s
	}
	host, _, err := net.SplitHostPort(server)
	if err != nil {
		s.Netdev("", fmt.Sprintf("server address %q: %v", server, err))
		return s
	}
	src, err := sourceFor(host)
	if err != nil {
		s.Netdev("", fmt.Sprintf("find the local address that reaches %s: %v", host, err))
		return s
	}
	s.Netdev(netdevWith(src))
	return s
}

// beginServer begins counting the server's port and network device, once
// it is ready.
func beginServer(s *counters.Sample, info transport.ReadyInfo) {
	if info.Path != nil {
		beginPort(s, info.Path)
		return
	}
	s.Netdev(netdevWith(net.ParseIP(info.Address)))
}

// addTCP sums two sessions' TCP figures: their retransmits, and the
// larger round trip.
func addTCP(a, b *counters.TCPPhase) *counters.TCPPhase {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return &counters.TCPPhase{Retrans: a.Retrans + b.Retrans, DSACKDups: a.DSACKDups + b.DSACKDups, RTT: max(a.RTT, b.RTT)}
}
