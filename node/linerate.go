package main

import (
	"net"

	"rdmasweep/node/transport"
	"rdmasweep/results/linerate"
)

// lineRate is the rate of the link the server's data crosses: the rdma
// port it serves on, or the netdev that has the address it listens on.
func lineRate(info transport.ReadyInfo) (mbs *float64, unknown string) {
	var r linerate.Rate
	switch {
	case info.Path != nil:
		r = linerate.RDMA("/", info.Path.Device, info.Path.IBPort)
	default:
		ifaces, err := linerate.Ifaces()
		if err != nil {
			return nil, err.Error()
		}
		r = linerate.TCP("/", ifaces, net.ParseIP(info.Address))
	}
	if !r.Known() {
		return nil, r.Unknown
	}
	return &r.MBs, ""
}
