// Package linerate reads the data rate of a link from sysfs, in MB/s
// (10^6 bytes a second, as the CSV's bandwidth): an RDMA port's, or a
// network device's `speed` (in Mb/s; -1 when the driver does not know).
// An InfiniBand port's rate is the data its lanes carry, from its width
// and lane speed (Speeds); an Ethernet port (RoCE, iWARP) runs at the
// speed of the network device under it. node serve reads it on the
// server's host and node devices for every port; the parsing is pure,
// and every reader takes the root of sysfs so a test can fake one.
package linerate

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// Loopback is why a rate over loopback is unknown: no link carries the
// data, so there is none to measure either.
const Loopback = "loopback has no line rate"

// Rate is a link's rate, or why it cannot be known.
type Rate struct {
	MBs     float64 // 0 when unknown
	Unknown string  // why, when MBs is 0
	// MTU is a network device's MTU in bytes, where its rate was read
	// from one (Netdev); 0 otherwise.
	MTU int
}

// Known reports whether the rate was read.
func (r Rate) Known() bool { return r.MBs > 0 }

func (r Rate) String() string {
	if !r.Known() {
		return "unknown (" + r.Unknown + ")"
	}
	return strconv.FormatFloat(r.MBs, 'f', 1, 64) + " MB/s"
}

// Speed is an InfiniBand lane speed: its name, as sysfs `rate` and
// verbs.h's IBV_PORT_LINK_SPEED_<name>_SUP write it; its number in the
// kernel's enum ib_port_speed (ibv_port_attr's active_speed); and what a
// lane carries, in Gb/s: data, and the signalling rate on the wire.
type Speed struct {
	Name       string
	Enum       int
	DataGbps   float64
	SignalGbps float64
}

// Speeds are the InfiniBand lane speeds. SDR, DDR and QDR code 8 bits in
// 10 (2.5 Gb/s of signalling carries 2), FDR10 and FDR 64 in 66, EDR
// 64b/66b at 25.78125 Gbaud for 25 Gb/s, HDR onward PAM4 with FEC for 50,
// 100 and 200 Gb/s.
var Speeds = []Speed{
	{"SDR", 1, 2, 2.5},
	{"DDR", 2, 4, 5},
	{"QDR", 4, 8, 10},
	{"FDR10", 8, 10, 10.3125},
	{"FDR", 16, 13.64, 14.0625},
	{"EDR", 32, 25, 25.78125},
	{"HDR", 64, 50, 53.125},
	{"NDR", 128, 100, 106.25},
	{"XDR", 256, 200, 212.5},
}

// widths are enum ib_port_width (ibv_port_attr's active_width) and the
// lanes each has.
var widths = map[int]int{1: 1, 16: 2, 2: 4, 4: 8, 8: 12}

// Link is an InfiniBand port's width and lane speed.
type Link struct {
	Lanes int
	Speed Speed
}

// LinkOf decodes ibv_port_attr's active_speed and active_width.
func LinkOf(speed, width int) (Link, error) {
	lanes, ok := widths[width]
	if !ok {
		return Link{}, fmt.Errorf("active_width %d is no width the kernel names", width)
	}
	for _, s := range Speeds {
		if s.Enum == speed {
			return Link{lanes, s}, nil
		}
	}
	return Link{}, fmt.Errorf("active_speed %d is no speed the kernel names", speed)
}

// DataMBs is the data the link carries, in MB/s: 4X QDR 4000.
func (l Link) DataMBs() float64 { return float64(l.Lanes) * l.Speed.DataGbps * 1000 / 8 }

// SignalGbps is the link's signalling rate in Gb/s: 4X QDR 40.
func (l Link) SignalGbps() float64 { return float64(l.Lanes) * l.Speed.SignalGbps }

// Width is the link's width as node devices writes it: "4x".
func (l Link) Width() string { return strconv.Itoa(l.Lanes) + "x" }

// ParseIBRate reads an RDMA port's rate file, "40 Gb/sec (4X QDR)". The
// kernel (core/sysfs.c, rate_show) writes it from the port's width and
// its own active_speed, which names XDR. Its figure is neither the data
// nor the signalling rate throughout (QDR's 10 is signalling, FDR's 14
// neither), so the link is read from the parenthesis.
func ParseIBRate(s string) (Link, error) {
	bad := fmt.Errorf("rate %q is not \"N Gb/sec (WX SPEED)\"", strings.TrimSpace(s))
	_, in, ok := strings.Cut(s, "(")
	in, _, closed := strings.Cut(in, ")")
	f := strings.Fields(in)
	if !ok || !closed || len(f) != 2 {
		return Link{}, bad
	}
	w, err := strconv.Atoi(strings.TrimSuffix(f[0], "X"))
	if err != nil || !slices.Contains([]int{1, 2, 4, 8, 12}, w) {
		return Link{}, bad
	}
	for _, sp := range Speeds {
		if sp.Name == f[1] {
			return Link{w, sp}, nil
		}
	}
	return Link{}, fmt.Errorf("rate %q: no lane speed named %s", strings.TrimSpace(s), f[1])
}

// ParseSpeed reads a network device's speed file (Mb/s) into MB/s; a
// speed of -1 or 0 (the driver does not know: virtual links, some
// bridges) is an error that says so.
func ParseSpeed(s string) (float64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("speed %q is not a number", strings.TrimSpace(s))
	}
	if n <= 0 {
		return 0, fmt.Errorf("speed is %d: the driver does not know the link's rate", n)
	}
	return float64(n) / 8, nil
}

// PortLink is the width and lane speed of device's port under the sysfs
// at root, from its rate file.
func PortLink(root, device string, port int) (Link, error) {
	b, err := os.ReadFile(filepath.Join(root, "sys/class/infiniband", device, "ports", strconv.Itoa(port), "rate"))
	if err != nil {
		return Link{}, fmt.Errorf("read %s port %d's rate: %w", device, port, err)
	}
	l, err := ParseIBRate(string(b))
	if err != nil {
		return Link{}, fmt.Errorf("%s port %d: %w", device, port, err)
	}
	return l, nil
}

// RDMA is the line rate of device's port under the sysfs at root ("/" on
// a host). An InfiniBand port carries its link's data rate. An Ethernet
// port (RoCE, iWARP: its link_layer says which) runs at the speed of
// netdev, the network device under it ("" when none was found, and
// noNetdev says why): the kernel derives such a port's rate from that
// speed, roughly (10GbE reads 1X QDR on mlx5), and for rxe and siw makes
// one up (1X SDR where the speed is unknown).
func RDMA(root, device string, port int, netdev, noNetdev string) Rate {
	b, err := os.ReadFile(filepath.Join(root, "sys/class/infiniband", device, "ports", strconv.Itoa(port), "link_layer"))
	if err != nil {
		return Rate{Unknown: fmt.Sprintf("read %s port %d's link layer: %v", device, port, err)}
	}
	if strings.TrimSpace(string(b)) == "Ethernet" {
		if netdev == "" {
			return Rate{Unknown: fmt.Sprintf("%s port %d is Ethernet, and its network device is not known: %s", device, port, noNetdev)}
		}
		r := Netdev(root, netdev)
		if !r.Known() {
			r.Unknown = fmt.Sprintf("%s port %d: %s", device, port, r.Unknown)
		}
		return r
	}
	l, err := PortLink(root, device, port)
	if err != nil {
		return Rate{Unknown: err.Error()}
	}
	return Rate{MBs: l.DataMBs()}
}

// Netdev is the rate of network device dev under the sysfs at root.
func Netdev(root, dev string) Rate {
	b, err := os.ReadFile(filepath.Join(root, "sys/class/net", dev, "speed"))
	if err != nil {
		// Reading speed of a device that is down fails with EINVAL.
		return Rate{Unknown: fmt.Sprintf("read %s's speed: %v", dev, err)}
	}
	mbs, err := ParseSpeed(string(b))
	if err != nil {
		return Rate{Unknown: fmt.Sprintf("%s: %v", dev, err)}
	}
	r := Rate{MBs: mbs}
	if b, err := os.ReadFile(filepath.Join(root, "sys/class/net", dev, "mtu")); err == nil {
		r.MTU, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	return r
}

// Iface is a network device, its kind and its addresses (Ifaces).
type Iface struct {
	Name     string
	Loopback bool
	// Kind is the link's kind as `ip -d link` shows it ("veth",
	// "bridge", "vlan", …); "" for a physical device.
	Kind  string
	Addrs []net.IP
	index int
}

// TCP is the rate of the device among ifaces that carries addr: unknown
// for loopback, for an unspecified address (listening on all of them) and
// for an address no device has.
func TCP(root string, ifaces []Iface, addr net.IP) Rate {
	switch {
	case addr == nil:
		return Rate{Unknown: "no data address"}
	case addr.IsUnspecified():
		return Rate{Unknown: "listening on all addresses, so no one link carries the data"}
	case addr.IsLoopback():
		return Rate{Unknown: Loopback}
	}
	i, ok := Holding(ifaces, addr)
	switch {
	case !ok:
		return Rate{Unknown: fmt.Sprintf("no network device has the address %s", addr)}
	case i.Loopback:
		return Rate{Unknown: Loopback}
	}
	return Netdev(root, i.Name)
}

// Holding is the device among ifaces that has the address addr.
func Holding(ifaces []Iface, addr net.IP) (Iface, bool) {
	for _, i := range ifaces {
		if slices.ContainsFunc(i.Addrs, addr.Equal) {
			return i, true
		}
	}
	return Iface{}, false
}

// Ifaces lists this host's network devices, their kinds and their
// addresses, in two netlink dumps (links, then every address): asking
// each device for its own addresses, as net.Interface.Addrs does, costs a
// dump a device.
func Ifaces() ([]Iface, error) {
	links, err := linkDump()
	if err != nil {
		return nil, fmt.Errorf("list network devices: %w", err)
	}
	addrs, err := addrsByIndex()
	if err != nil {
		return nil, fmt.Errorf("list network addresses: %w", err)
	}
	for i := range links {
		links[i].Addrs = addrs[links[i].index]
	}
	return links, nil
}

// linkDump lists every device from one RTM_GETLINK dump: its name,
// whether it is a loopback, and its kind (IFLA_INFO_KIND).
func linkDump() ([]Iface, error) {
	msgs, err := ribDump(syscall.RTM_GETLINK)
	if err != nil {
		return nil, err
	}
	var out []Iface
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWLINK || len(m.Data) < syscall.SizeofIfInfomsg {
			continue
		}
		ifi := (*syscall.IfInfomsg)(unsafe.Pointer(&m.Data[0]))
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			return nil, os.NewSyscallError("parsenetlinkrouteattr", err)
		}
		i := Iface{index: int(ifi.Index), Loopback: ifi.Flags&syscall.IFF_LOOPBACK != 0}
		for _, a := range attrs {
			switch a.Attr.Type {
			case syscall.IFLA_IFNAME:
				i.Name = string(bytes.TrimRight(a.Value, "\x00"))
			case iflaLinkinfo:
				i.Kind = linkKind(a.Value)
			}
		}
		out = append(out, i)
	}
	return out, nil
}

// IFLA_LINKINFO and, nested in it, IFLA_INFO_KIND (linux/if_link.h).
const (
	iflaLinkinfo = 18
	iflaInfoKind = 1
)

// linkKind is the IFLA_INFO_KIND inside an IFLA_LINKINFO's value: "veth",
// "bridge", …; "" for a physical device, which has none.
func linkKind(b []byte) string {
	for len(b) >= syscall.SizeofRtAttr {
		l := int(*(*uint16)(unsafe.Pointer(&b[0])))
		t := *(*uint16)(unsafe.Pointer(&b[2]))
		if l < syscall.SizeofRtAttr || l > len(b) {
			return ""
		}
		if t == iflaInfoKind {
			return string(bytes.TrimRight(b[syscall.SizeofRtAttr:l], "\x00"))
		}
		b = b[min((l+3)&^3, len(b)):]
	}
	return ""
}

// ribDump is one netlink route dump of typ, parsed.
func ribDump(typ int) ([]syscall.NetlinkMessage, error) {
	rib, err := syscall.NetlinkRIB(typ, syscall.AF_UNSPEC)
	if err != nil {
		return nil, os.NewSyscallError("netlinkrib", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return nil, os.NewSyscallError("parsenetlinkmessage", err)
	}
	return msgs, nil
}

// addrsByIndex is every address of every device, by the device's index,
// from one RTM_GETADDR dump.
func addrsByIndex() (map[int][]net.IP, error) {
	msgs, err := ribDump(syscall.RTM_GETADDR)
	if err != nil {
		return nil, err
	}
	out := map[int][]net.IP{}
	for _, m := range msgs {
		if m.Header.Type == syscall.NLMSG_DONE {
			break
		}
		if m.Header.Type != syscall.RTM_NEWADDR || len(m.Data) < syscall.SizeofIfAddrmsg {
			continue
		}
		ifa := (*syscall.IfAddrmsg)(unsafe.Pointer(&m.Data[0]))
		attrs, err := syscall.ParseNetlinkRouteAttr(&m)
		if err != nil {
			return nil, os.NewSyscallError("parsenetlinkrouteattr", err)
		}
		// IFA_LOCAL is the device's own address where the peer's is in
		// IFA_ADDRESS (point-to-point links); else IFA_ADDRESS is.
		var ip net.IP
		for _, a := range attrs {
			switch a.Attr.Type {
			case syscall.IFA_ADDRESS:
				if ip == nil {
					ip = net.IP(slices.Clone(a.Value))
				}
			case syscall.IFA_LOCAL:
				ip = net.IP(slices.Clone(a.Value))
			}
		}
		if ip != nil {
			out[int(ifa.Index)] = append(out[int(ifa.Index)], ip)
		}
	}
	return out, nil
}
