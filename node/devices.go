package main

// node devices: what RDMA hardware this host has, as the transport sees it,
// so a person can pick device, ib_port and gid_index for a plan.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"text/tabwriter"

	"rdmasweep/node/session"
	"rdmasweep/node/transport/rdma"
	"rdmasweep/results"
	"rdmasweep/results/linerate"
)

func runDevices(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("devices", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON line instead of a table")
	address := fs.String("address", "", "also say which device, port and GID a connection over this address would use")
	routeTo := fs.String("route-to", "", "as --address, with the source address the kernel picks to reach this one (what node read uses)")
	device := fs.String("rdma-device", "", "with --address: the device the plan names")
	port := fs.Int("ib-port", 0, "with --address: the port the plan names")
	gidIndex := fs.Int("gid-index", -1, "with --address: the GID index the plan names")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var addr net.IP
	switch {
	case *address != "" && *routeTo != "":
		return usagef("devices: give --address or --route-to, not both")
	case *address != "":
		if addr = net.ParseIP(*address); addr == nil {
			return usagef("devices: --address %q is not an IP address", *address)
		}
	case *routeTo != "":
		src, err := sourceFor(*routeTo)
		if err != nil {
			return fmt.Errorf("devices: --route-to %s: %w", *routeTo, err)
		}
		addr, *address = src, src.String()
	}
	if !*asJSON {
		e.out = session.NewPrinter(e.stdout, e.stderr, "text")
	}
	devs, err := rdma.Devices()
	if err != nil {
		return fmt.Errorf("list rdma devices: %w", err)
	}
	withLineRates(devs)
	l := results.DevicesList{Type: results.TypeDevices, Devices: devs, Address: *address}
	if addr != nil {
		c, err := rdma.Choose(*device, *port, *gidIndex, addr)
		if err != nil {
			l.ChoiceError = err.Error()
		} else {
			l.Choice = &c
		}
	}
	if *asJSON {
		b, err := json.Marshal(l)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "%s\n", b)
		return err
	}
	if err := printDevices(e.stdout, devs); err != nil {
		return err
	}
	switch {
	case l.Choice != nil:
		_, err = fmt.Fprintf(e.stdout, "%s: %s port %d gid %d %s (%s)\n", l.Address, l.Choice.Device, l.Choice.IBPort, l.Choice.GIDIndex, l.Choice.GID, l.Choice.GIDType)
	case l.ChoiceError != "":
		_, err = fmt.Fprintf(e.stdout, "%s: %s\n", l.Address, l.ChoiceError)
	}
	return err
}

// sourceFor is the local address the kernel picks to reach host (an IP
// or a name): a UDP socket's connect chooses it, sending nothing.
func sourceFor(host string) (net.IP, error) {
	c, err := net.Dial("udp", net.JoinHostPort(host, "9"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP, nil
}

func printDevices(w io.Writer, devs []rdma.Device) error {
	if len(devs) == 0 {
		_, err := fmt.Fprintln(w, "no RDMA devices")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, d := range devs {
		numa := "numa -"
		if d.NUMANode != nil {
			numa = fmt.Sprintf("numa %d", *d.NUMANode)
		}
		fmt.Fprintf(tw, "%s\t%s\tmax_qp_rd_atom %d\tmax_qp_init_rd_atom %d\tmax_qp_wr %d\todp %v\t%s\n",
			d.Name, d.Transport, d.MaxQPRdAtom, d.MaxQPInitRdAtom, d.MaxQPWR, d.ODP, numa)
		if d.Error != "" {
			fmt.Fprintf(tw, "  error: %s\n", d.Error)
		}
		if d.Unsupported != "" {
			fmt.Fprintf(tw, "  unsupported: %s\n", d.Unsupported)
		}
		for _, p := range d.Ports {
			fmt.Fprintf(tw, "  port %d\t%s\t%s\tmtu %d\t%s\tlid %d\tmax_msg_sz %d\tline rate %s\n", p.Port, p.State, p.LinkLayer, p.ActiveMTU, portLink(p), p.LID, p.MaxMsgSz, rateText(p))
			for _, g := range p.GIDs {
				fmt.Fprintf(tw, "    gid %d\t%s\t%s\t%s\n", g.Index, g.GID, g.Type, g.Netdev)
			}
		}
	}
	return tw.Flush()
}

// portLink is a port's width and lane speed, with its signalling rate:
// "4x QDR (40 Gb/s signalling)".
func portLink(p rdma.Port) string {
	if p.Speed == "" {
		return p.Width
	}
	return fmt.Sprintf("%s %s (%g Gb/s signalling)", p.Width, p.Speed, p.RateGbps)
}

// rateText is a port's line rate, as the CSV's line_rate_mb_s has it:
// "4000.0 MB/s", or "unknown (why)".
func rateText(p rdma.Port) string {
	r := linerate.Rate{Unknown: p.LineRateUnknown}
	if p.LineRateMBs != nil {
		r.MBs = *p.LineRateMBs
	}
	return r.String()
}
