// Package linerate reads a data link's signalling rate from sysfs, in MB/s
// (10^6 bytes a second, as the CSV's bandwidth): an RDMA port's `rate`
// ("100 Gb/sec (4X EDR)" is 12500 MB/s) or a network device's `speed` (in
// Mb/s; -1 when the driver does not know). node serve reads it on the
// server's host; the parsing is pure, and every reader takes the root of
// sysfs so a test can fake one.
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

// Rate is a link's rate, or why it cannot be known.
type Rate struct {
	MBs     float64 // 0 when unknown
	Unknown string  // why, when MBs is 0
}

// Known reports whether the rate was read.
func (r Rate) Known() bool { return r.MBs > 0 }

func (r Rate) String() string {
	if !r.Known() {
		return "unknown (" + r.Unknown + ")"
	}
	return strconv.FormatFloat(r.MBs, 'f', 1, 64) + " MB/s"
}

// ParseIBRate reads an RDMA port's rate file: "100 Gb/sec (4X EDR)",
// "2.5 Gb/sec (1X SDR)".
func ParseIBRate(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) < 2 || f[1] != "Gb/sec" {
		return 0, fmt.Errorf("rate %q is not \"N Gb/sec (…)\"", strings.TrimSpace(s))
	}
	gb, err := strconv.ParseFloat(f[0], 64)
	if err != nil || !(gb > 0) {
		return 0, fmt.Errorf("rate %q is not \"N Gb/sec (…)\"", strings.TrimSpace(s))
	}
	return gb * 1000 / 8, nil
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

// RDMA is the rate of device's port under the sysfs at root ("/" on a
// host).
func RDMA(root, device string, port int) Rate {
	p := filepath.Join(root, "sys/class/infiniband", device, "ports", strconv.Itoa(port), "rate")
	b, err := os.ReadFile(p)
	if err != nil {
		return Rate{Unknown: fmt.Sprintf("read %s port %d's rate: %v", device, port, err)}
	}
	mbs, err := ParseIBRate(string(b))
	if err != nil {
		return Rate{Unknown: fmt.Sprintf("%s port %d: %v", device, port, err)}
	}
	return Rate{MBs: mbs}
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
	return Rate{MBs: mbs}
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
		return Rate{Unknown: "loopback has no line rate"}
	}
	i, ok := Holding(ifaces, addr)
	switch {
	case !ok:
		return Rate{Unknown: fmt.Sprintf("no network device has the address %s", addr)}
	case i.Loopback:
		return Rate{Unknown: "loopback has no line rate"}
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
