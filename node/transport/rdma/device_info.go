package rdma

import (
	"errors"
	"fmt"
	"net"
	"syscall"

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
