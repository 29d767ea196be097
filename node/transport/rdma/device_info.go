package rdma

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"rdmasweep/node/transport"
	"rdmasweep/results"
)

// ErrNotBuilt is returned by every entry point of a node built without the
// rdma build tag.
var ErrNotBuilt = errors.New("rdma: not built into this node binary (build with: make node-rdma)")

// Device, Port and GID are what `node devices` prints; the runner reads
// the same types (package results, the wire between them).
type (
	Device = results.Device
	Port   = results.Port
	GID    = results.GID
)

// GID types, as enum ibv_gid_type numbers them.
const (
	gidTypeIB     = 0
	gidTypeRoCEv1 = 1
	gidTypeRoCEv2 = 2
)

func gidTypeName(t int) string {
	switch t {
	case gidTypeIB:
		return "IB"
	case gidTypeRoCEv1:
		return "RoCE v1"
	case gidTypeRoCEv2:
		return "RoCE v2"
	}
	return fmt.Sprintf("type %d", t)
}

func newGID(index int, raw [16]byte, typ int, ifindex int) GID {
	g := GID{Index: index, GID: gidString(raw), Type: gidTypeName(typ)}
	if ifindex > 0 {
		if ifc, err := net.InterfaceByIndex(ifindex); err == nil {
			g.Netdev = ifc.Name
		}
	}
	return g
}

// gidString writes a GID as ibv_devinfo does: IPv6 notation, with an
// IPv4-mapped GID as ::ffff:a.b.c.d rather than Go's bare a.b.c.d.
func gidString(raw [16]byte) string {
	ip := net.IP(raw[:])
	if v4 := ip.To4(); v4 != nil {
		return "::ffff:" + v4.String()
	}
	return ip.String()
}

// chooseGID picks the GID for addr when the plan gave none, by the rule
// results.ChooseGID keeps for node and runner check alike.
func chooseGID(gids []GID, addr net.IP) (GID, error) {
	i, err := results.ChooseGID(gids, addr)
	if err != nil {
		if len(gids) > 0 {
			err = fmt.Errorf("%w: is the RDMA device bound to the interface holding %s? Or set gid_index", err, addr)
		}
		return GID{}, err
	}
	return gids[i], nil
}

// gidRaw is g's 16 bytes as the connection record carries them.
func gidRaw(g GID) [16]byte {
	var raw [16]byte
	copy(raw[:], g.IP())
	return raw
}

func listGIDs(gids []GID) string { return results.ListGIDs(gids) }

// VerbError is a failed verbs call: which verb, its errno, and a hint for a
// person. It unwraps to the errno, so errors.Is(err, syscall.EINVAL) works.
type VerbError struct {
	Verb  string
	Errno syscall.Errno
	Hint  string
}

func (e *VerbError) Error() string {
	s := fmt.Sprintf("%s: %s (errno %d)", e.Verb, e.Errno.Error(), int(e.Errno))
	if e.Hint != "" {
		s += "; hint: " + e.Hint
	}
	return s
}

func (e *VerbError) Unwrap() error { return e.Errno }

// devCandidate is one device as device selection sees it.
type devCandidate struct {
	Device
	// sysDevice is where /sys/class/infiniband/<name>/device leads: the
	// PCI function, shared with the netdevs of the same NIC; "" for
	// software devices (rxe, siw).
	sysDevice string
}

// netOwner is the network interface that holds an address.
type netOwner struct {
	ifname    string
	sysDevice string // where /sys/class/net/<if>/device leads; "" if virtual
	devPort   int    // /sys/class/net/<if>/dev_port: 0 for a NIC's first port
	mac       net.HardwareAddr
}

// macGID reports whether g is the interface's MAC padded with zeros: the
// GID iWARP devices (siw, cxgb4, irdma) give a port, which names no
// netdev.
func macGID(g GID, mac net.HardwareAddr) bool {
	ip := g.IP()
	if len(mac) != 6 || ip == nil {
		return false
	}
	for i, b := range ip {
		if (i < 6 && b != mac[i]) || (i >= 6 && b != 0) {
			return false
		}
	}
	return true
}

// usable reports whether node's rdma transport can use the device.
func (c *devCandidate) usable() bool { return c.Error == "" && c.Unsupported == "" }

// chooseDevice picks the device and port for a connection over addr:
//
//   - the device named, when one is;
//   - else the device whose port holds addr: a GID equal to it (RoCE), a
//     GID on the interface holding it, the interface's MAC as its GID
//     (iWARP), or the same PCI function as that interface (IPoIB, where
//     GIDs carry no address);
//   - else, since InfiniBand routes by LID and needs no address, the only
//     ACTIVE InfiniBand port;
//   - else the only ACTIVE port of any kind (the GID choice then says
//     what is wrong, unless gid_index was given).
//
// Anything else is an error that lists the candidates. port > 0 limits the
// choice to that port. It returns an index into cands and the port.
func chooseDevice(cands []devCandidate, name string, port int, addr net.IP, own *netOwner) (int, int, error) {
	if name != "" {
		var names []string
		for i, c := range cands {
			if c.Name != name {
				names = append(names, c.Name)
				continue
			}
			switch {
			case c.Error != "":
				return -1, 0, fmt.Errorf("RDMA device %s: %s", name, c.Error)
			case c.Unsupported != "":
				return -1, 0, fmt.Errorf("RDMA device %s cannot be used: %s", name, c.Unsupported)
			}
			if port <= 0 {
				port = 1
			}
			return i, port, nil
		}
		return -1, 0, fmt.Errorf("no RDMA device named %q (found: %s); hint: `node devices` lists them", name, orNone(names))
	}
	type hit struct{ dev, port, rank int }
	var active, ib, owners []hit
	for i, c := range cands {
		if !c.usable() {
			continue
		}
		for _, p := range c.Ports {
			if p.State != "ACTIVE" || (port > 0 && p.Port != port) {
				continue
			}
			h := hit{dev: i, port: p.Port, rank: 9}
			active = append(active, h)
			if p.LinkLayer == "InfiniBand" {
				ib = append(ib, h)
			}
			if addr == nil || addr.IsUnspecified() {
				continue
			}
			for _, g := range p.GIDs {
				switch {
				case g.IP().Equal(addr):
					h.rank = min(h.rank, 0)
				case own != nil && g.Netdev != "" && g.Netdev == own.ifname:
					h.rank = min(h.rank, 1)
				case own != nil && macGID(g, own.mac):
					h.rank = min(h.rank, 1)
				}
			}
			if own != nil && own.sysDevice != "" && c.sysDevice == own.sysDevice &&
				(len(c.Ports) == 1 || p.Port == own.devPort+1) {
				h.rank = min(h.rank, 2)
			}
			if h.rank < 9 {
				owners = append(owners, h)
			}
		}
	}
	if len(owners) > 0 {
		best := owners[0]
		tie := []string{}
		for _, h := range owners[1:] {
			if h.rank < best.rank {
				best = h
			}
		}
		for _, h := range owners {
			if h.rank == best.rank && h.dev != best.dev {
				tie = append(tie, fmt.Sprintf("%s port %d", cands[h.dev].Name, h.port))
			}
		}
		if len(tie) > 0 {
			return -1, 0, fmt.Errorf("address %s is on several RDMA devices (%s port %d, %s); hint: name one (rdma.device)", addr, cands[best.dev].Name, best.port, strings.Join(tie, ", "))
		}
		return best.dev, best.port, nil
	}
	switch {
	case len(ib) == 1:
		return ib[0].dev, ib[0].port, nil
	case len(ib) > 1:
		var l []string
		for _, h := range ib {
			l = append(l, fmt.Sprintf("%s port %d", cands[h.dev].Name, h.port))
		}
		return -1, 0, fmt.Errorf("no RDMA device holds address %s, and several InfiniBand ports are active (%s); hint: name the device (rdma.device) and port (rdma.ib_port)", addrText(addr), strings.Join(l, ", "))
	case len(active) == 1:
		return active[0].dev, active[0].port, nil
	case len(active) == 0:
		what := "no RDMA device"
		if port > 0 {
			what = fmt.Sprintf("no RDMA device with port %d", port)
		}
		return -1, 0, fmt.Errorf("%s is ACTIVE (found: %s); hint: check the link, or load the NIC's driver (for soft-RoCE: `modprobe rdma_rxe && rdma link add rxe0 type rxe netdev IFACE`)", what, describeCands(cands))
	}
	return -1, 0, fmt.Errorf("no RDMA device holds address %s (found: %s); hint: use the address of an RDMA interface, or name the device (rdma.device)", addrText(addr), describeCands(cands))
}

func addrText(addr net.IP) string {
	if addr == nil || addr.IsUnspecified() {
		return "(none given)"
	}
	return addr.String()
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// describeCands lists devices for an error: each port's state and the
// addresses its GIDs hold, or why the device is unusable.
func describeCands(cands []devCandidate) string {
	var l []string
	for _, c := range cands {
		switch {
		case c.Error != "":
			l = append(l, fmt.Sprintf("%s (%s)", c.Name, c.Error))
			continue
		case c.Unsupported != "":
			l = append(l, fmt.Sprintf("%s (unsupported: %s)", c.Name, c.Unsupported))
			continue
		}
		for _, p := range c.Ports {
			var addrs []string
			for _, g := range p.GIDs {
				if ip := g.IP(); ip != nil && ip.To4() != nil {
					a := ip.To4().String()
					if g.Netdev != "" {
						a += " on " + g.Netdev
					}
					addrs = append(addrs, a)
				}
			}
			s := fmt.Sprintf("%s port %d %s %s", c.Name, p.Port, p.State, p.LinkLayer)
			if len(addrs) > 0 {
				s += " " + strings.Join(dedup(addrs), ", ")
			}
			l = append(l, s)
		}
	}
	return orNone(l)
}

func dedup(l []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range l {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// unsupportedReason says why node's rdma transport cannot use a device of
// this verbs transport and kernel driver, or "" when it can.
func unsupportedReason(transport, driver string) string {
	switch {
	case driver == "efa":
		return "EFA (AWS Elastic Fabric Adapter) offers SRD, not reliable-connected (RC) queue pairs, which node's RDMA READs need; hint: EFA is reached through libfabric's efa provider, which node does not use"
	case transport == "usNIC" || transport == "usNIC UDP":
		return "usNIC offers no reliable-connected (RC) queue pairs, which node's RDMA READs need"
	case transport == "unspecified":
		return "the device has no verbs transport (InfiniBand, RoCE or iWARP), so no reliable-connected (RC) queue pairs for RDMA READ"
	}
	return ""
}

// needsCM reports a device that connects only through rdma_cm.
func needsCM(transport string) bool { return transport == "iWARP" }

// transportName names enum ibv_transport_type.
func transportName(t int) string {
	switch t {
	case 0:
		return "InfiniBand"
	case 1:
		return "iWARP"
	case 2:
		return "usNIC"
	case 3:
		return "usNIC UDP"
	case 4:
		return "unspecified"
	}
	return fmt.Sprintf("transport %d", t)
}

// qpName names QP i (0-based) of n in messages, with its number: the
// index says which of the plan's QPs, the number what the kernel and
// ibv_devinfo call it.
func qpName(i, n int, qpn uint32) string {
	return fmt.Sprintf("QP %d of %d (qp_num %d)", i+1, n, qpn)
}

// needGRH reports whether QPs must carry a GRH: always on RoCE, and on
// InfiniBand when the plan gave gid_index (a routed fabric, where LIDs
// alone do not reach the peer's subnet).
func needGRH(ethernet, gidIndexGiven bool) bool { return ethernet || gidIndexGiven }

// gidTableSize is the entries ibv_query_gid_table needs for ports whose
// GID tables have these lengths: their sum.
func gidTableSize(lens []int) int {
	n := 0
	for _, l := range lens {
		n += l
	}
	return n
}

// pinnable refuses to pin need bytes when only avail are available.
func pinnable(need, avail int64, what string) error {
	if need <= avail {
		return nil
	}
	return fmt.Errorf("%w: %s pins %s (%d bytes), but the host has only %s (%d bytes) available (MemAvailable in /proc/meminfo); pinning it would bring in the OOM killer; hint: lower file_size, free memory, or use registration: odp",
		transport.ErrMemAvailable, what, results.SizeText(need), need, results.SizeText(avail), avail)
}

// wcMessage is the error of a READ that completed with a failure status:
// which QP, the status, and a hint for the statuses a person can act on.
// odp says the server registered its region with on-demand paging.
func wcMessage(qp, status string, code, vendorErr int, g GID, odp bool) string {
	msg := fmt.Sprintf("RDMA READ on %s completed with %s (wc status %d, vendor error %#x)", qp, status, code, vendorErr)
	switch code {
	case wcRetryExceeded:
		msg += fmt.Sprintf("; hint: the server never answered: GID types (RoCE v1/v2) or subnets may not match on the two sides; this side used gid_index %d (%s %s) — compare with `node devices` on both hosts", g.Index, g.Type, g.GID)
		if odp {
			msg += "; the server's region is registered with odp: a page fault on the server pauses its QP, and one that outlasts timeout × retry_cnt ends like this: raise rdma timeout or retry_cnt, or prefetch (odp_prefetch)"
		}
	case wcRemAccessError:
		msg += "; hint: the server refused the access: the read fell outside its region, or the region was deregistered"
	case wcRNRRetryExceeded:
		msg += "; hint: the server's QP had no receive posted for a SEND, or was not ready: raise rnr_retry (7 retries forever) or min_rnr_timer"
	}
	return msg
}

// enum ibv_wc_status values the hints name.
const (
	wcRemAccessError   = 10
	wcRetryExceeded    = 12
	wcRNRRetryExceeded = 13
)
