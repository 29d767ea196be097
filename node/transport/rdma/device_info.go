package rdma

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"syscall"
)

// ErrNotBuilt is returned by every entry point of a node built without the
// rdma build tag.
var ErrNotBuilt = errors.New("rdma: not built into this node binary (build with: make node-rdma)")

// Device describes one RDMA device as `node devices` prints it.
type Device struct {
	Name            string `json:"name"`
	MaxQPRdAtom     int    `json:"max_qp_rd_atom"`      // READs in flight a QP answers (responder)
	MaxQPInitRdAtom int    `json:"max_qp_init_rd_atom"` // READs in flight a QP issues (requester)
	// ODP reports on-demand paging for RC RDMA READ: general support and the
	// RC READ capability, which is what registration: odp needs.
	ODP   bool   `json:"odp"`
	Ports []Port `json:"ports"`
}

// Port is one port of a Device.
type Port struct {
	Port      int     `json:"port"`
	State     string  `json:"state"`      // e.g. "ACTIVE", "DOWN"
	LinkLayer string  `json:"link_layer"` // "InfiniBand" or "Ethernet"
	ActiveMTU int     `json:"active_mtu"` // bytes
	RateGbps  float64 `json:"rate_gbps"`  // signalling rate: lanes × lane speed
	Width     string  `json:"width"`      // e.g. "4x"
	LID       int     `json:"lid"`
	GIDs      []GID   `json:"gids"`
}

// GID is one populated entry of a port's GID table.
type GID struct {
	Index  int      `json:"index"`
	GID    string   `json:"gid"`
	Type   string   `json:"type"`             // "IB", "RoCE v1" or "RoCE v2"
	Netdev string   `json:"netdev,omitempty"` // the network interface a RoCE GID belongs to
	raw    [16]byte // the GID as sent on the wire
}

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
	g := GID{Index: index, GID: gidString(raw), Type: gidTypeName(typ), raw: raw}
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

// typeRank orders GID types by preference: RoCE v2 (routable, what
// perftest prefers), then RoCE v1, then IB.
func typeRank(t string) int {
	switch t {
	case "RoCE v2":
		return 0
	case "RoCE v1":
		return 1
	}
	return 2
}

// chooseGID picks a GID index for addr when the plan gave none. With an
// address it takes the GID equal to that address (an IPv4 address appears
// as ::ffff:a.b.c.d), preferring RoCE v2. Without one (nil or unspecified)
// it prefers, as perftest does, an IPv4-mapped GID, then any that is not
// link-local, then any at all, and RoCE v2 within each.
func chooseGID(gids []GID, addr net.IP) (GID, error) {
	if len(gids) == 0 {
		return GID{}, errors.New("the port has no populated GID")
	}
	best := -1
	rank := func(g GID) int {
		r := typeRank(g.Type)
		ip := net.IP(g.raw[:])
		switch {
		case ip.To4() != nil:
		case !ip.IsLinkLocalUnicast():
			r += 10
		default:
			r += 20
		}
		return r
	}
	if addr != nil && !addr.IsUnspecified() {
		want := addr.To16()
		for i, g := range gids {
			if bytes.Equal(g.raw[:], want) && (best < 0 || typeRank(g.Type) < typeRank(gids[best].Type)) {
				best = i
			}
		}
		if best < 0 {
			return GID{}, fmt.Errorf("no GID of the port matches address %s (the GIDs are %s): is the RDMA device bound to the interface holding %s? Or set gid_index", addr, listGIDs(gids), addr)
		}
		return gids[best], nil
	}
	for i, g := range gids {
		if best < 0 || rank(g) < rank(gids[best]) {
			best = i
		}
	}
	return gids[best], nil
}

func listGIDs(gids []GID) string {
	var b bytes.Buffer
	for i, g := range gids {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %s (%s)", g.Index, g.GID, g.Type)
	}
	return b.String()
}

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
