package main

import (
	"net"

	"rdmasweep/node/counters"
	"rdmasweep/node/transport"
	"rdmasweep/node/transport/rdma"
	"rdmasweep/results/linerate"
)

// lineRate is the rate of the link the server's data crosses: the rdma
// port it serves on, or the netdev that has the address it listens on;
// mtu is that netdev's MTU over tcp (an rdma client reports its path's).
func lineRate(info transport.ReadyInfo) (mbs *float64, unknown string, mtu int) {
	if info.Path != nil {
		mbs, unknown = portLineRate(info.Path.Device, info.Path.IBPort)
		return mbs, unknown, 0
	}
	ifaces, err := linerate.Ifaces()
	if err != nil {
		return nil, err.Error(), 0
	}
	r := linerate.TCP("/", ifaces, net.ParseIP(info.Address))
	mbs, unknown = known(r)
	return mbs, unknown, r.MTU
}

// portLineRate is the line rate of an RDMA port, as node serve records it
// and node devices shows it: an Ethernet port's netdev is found as the
// counters find it.
func portLineRate(device string, port int) (mbs *float64, unknown string) {
	nd, err := counters.PortNetdev("", device, port)
	why := ""
	if err != nil {
		why = err.Error()
	}
	return known(linerate.RDMA("/", device, port, nd, why))
}

func known(r linerate.Rate) (*float64, string) {
	if !r.Known() {
		return nil, r.Unknown
	}
	return &r.MBs, ""
}

// withLineRates fills in each port's line rate.
func withLineRates(devs []rdma.Device) {
	for i := range devs {
		for j := range devs[i].Ports {
			p := &devs[i].Ports[j]
			p.LineRateMBs, p.LineRateUnknown = portLineRate(devs[i].Name, p.Port)
		}
	}
}
