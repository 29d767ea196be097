package results

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// TypeDevices is the type of DevicesList.
const TypeDevices = "devices"

// DevicesList is what `node devices --json` prints on one line. On failure
// node prints an Error instead.
type DevicesList struct {
	Type    string   `json:"type"` // TypeDevices
	Devices []Device `json:"devices"`
	// With node devices --address A: the device, port and GID node would
	// use for a connection over A (Choice), or why it would refuse
	// (ChoiceError), by the same rule serve and read apply. runner check
	// asks this rather than guessing.
	Address     string        `json:"address,omitempty"`
	Choice      *DeviceChoice `json:"choice,omitempty"`
	ChoiceError string        `json:"choice_error,omitempty"`
}

// DeviceChoice is where a connection over an address lands.
type DeviceChoice struct {
	Device   string `json:"device"`
	IBPort   int    `json:"ib_port"`
	GIDIndex int    `json:"gid_index"`
	GID      string `json:"gid"`
	GIDType  string `json:"gid_type"`
}

// Device is one RDMA device as node's rdma transport sees it.
type Device struct {
	Name            string `json:"name"`
	MaxQPRdAtom     int    `json:"max_qp_rd_atom"`      // READs in flight a QP answers (responder)
	MaxQPInitRdAtom int    `json:"max_qp_init_rd_atom"` // READs in flight a QP issues (requester)
	// ODP reports on-demand paging for RC RDMA READ: general support and the
	// RC READ capability, which is what registration: odp needs. It is only
	// what the device advertises: whether its ODP returns the right bytes
	// takes a verified read (soft-RoCE on 7.x kernels advertises it and
	// returns wrong data).
	ODP   bool   `json:"odp"`
	Ports []Port `json:"ports"`

	// Transport is the device's transport: "InfiniBand" (IB and RoCE),
	// "iWARP" (connects only through rdma_cm), or what else verbs says.
	Transport string `json:"transport,omitempty"`
	// Driver is the kernel driver behind the device, from sysfs (e.g.
	// "mlx5_core", "efa"); "" for software devices (rxe, siw).
	Driver string `json:"driver,omitempty"`
	// NUMANode is the NUMA node of the device's PCI function; nil when
	// the device has none (software devices) or the kernel does not say.
	NUMANode *int `json:"numa_node,omitempty"`
	// MaxQPWR is the deepest send queue a QP may have: the limit of
	// queue_depth per QP.
	MaxQPWR int `json:"max_qp_wr,omitempty"`
	// Unsupported says why node's rdma transport cannot use this device
	// at all (e.g. EFA, which has no RC QPs); "" when it can.
	Unsupported string `json:"unsupported,omitempty"`
	// Error is why the device could not be opened or queried; the other
	// fields are then partly empty. One such device does not stop the
	// listing.
	Error string `json:"error,omitempty"`
}

// Port is one port of a Device.
type Port struct {
	Port      int     `json:"port"`
	State     string  `json:"state"`           // e.g. "ACTIVE", "DOWN"
	LinkLayer string  `json:"link_layer"`      // "InfiniBand" or "Ethernet"
	ActiveMTU int     `json:"active_mtu"`      // bytes
	RateGbps  float64 `json:"rate_gbps"`       // signalling rate: lanes × lane speed
	Width     string  `json:"width"`           // e.g. "4x"
	Speed     string  `json:"speed,omitempty"` // the lane speed, e.g. "QDR"
	LID       int     `json:"lid"`
	GIDs      []GID   `json:"gids"`
	// MaxMsgSz is the largest message the port carries, in bytes: the
	// limit of block_size for one RDMA READ.
	MaxMsgSz int64 `json:"max_msg_sz,omitempty"`
	// PKeyTblLen is the size of the port's P_Key table (pkey_index is an
	// index into it).
	PKeyTblLen int `json:"pkey_tbl_len,omitempty"`
	// LineRateMBs is the data rate node serve would record on this port
	// (line_rate_mb_s), nil when unknown, and LineRateUnknown why.
	LineRateMBs     *float64 `json:"line_rate_mb_s,omitempty"`
	LineRateUnknown string   `json:"line_rate_unknown,omitempty"`
}

// GID is one populated entry of a port's GID table.
type GID struct {
	Index int `json:"index"`
	// GID in IPv6 notation, as ibv_devinfo writes it (an IPv4-mapped GID
	// as ::ffff:a.b.c.d); it parses back to the 16 bytes on the wire.
	GID    string `json:"gid"`
	Type   string `json:"type"`             // "IB", "RoCE v1" or "RoCE v2"
	Netdev string `json:"netdev,omitempty"` // the network interface a RoCE GID belongs to
}

// IP is the GID's 16 bytes, or nil if GID does not parse.
func (g GID) IP() net.IP { return net.ParseIP(g.GID).To16() }

// TypeHost is the type of Host.
const TypeHost = "host"

// Host is what `node host --json` prints on one line: what the host has
// for a run, as node sees it (what runner check judges memory by).
type Host struct {
	Type   string `json:"type"`   // TypeHost
	Kernel string `json:"kernel"` // uname -r
	// MemTotalBytes and MemAvailableBytes are /proc/meminfo's MemTotal
	// and MemAvailable. node serve refuses to pin a region larger than
	// MemAvailable.
	MemTotalBytes     int64 `json:"mem_total_bytes"`
	MemAvailableBytes int64 `json:"mem_available_bytes"`
	// MemlockBytes is the soft RLIMIT_MEMLOCK, -1 for unlimited.
	MemlockBytes int64 `json:"memlock_bytes"`
	// CapIPCLock reports the process may lock memory beyond the limit.
	CapIPCLock bool `json:"cap_ipc_lock"`
	// MemlockHardBytes is the hard RLIMIT_MEMLOCK, -1 for unlimited; nil
	// from a node that did not say.
	MemlockHardBytes *int64 `json:"memlock_hard_bytes,omitempty"`
	// CapSysResource reports the process may raise the hard limit.
	CapSysResource bool `json:"cap_sys_resource,omitempty"`
	NUMANodes      int  `json:"numa_nodes"` // nodes online, 1 when the kernel does not say
	PageSize       int  `json:"page_size"`
}

// Memlock is what decides whether a process may pin memory: its
// RLIMIT_MEMLOCK and two capabilities in its effective set. Being root
// decides nothing: root in a container with the default capabilities
// holds neither.
type Memlock struct {
	Soft, Hard                 int64 // bytes; -1 unlimited
	CapIPCLock, CapSysResource bool
}

// Memlock is h's memlock state; a hard limit h does not say is taken as
// the soft one.
func (h Host) Memlock() Memlock {
	m := Memlock{Soft: h.MemlockBytes, Hard: h.MemlockBytes, CapIPCLock: h.CapIPCLock, CapSysResource: h.CapSysResource}
	if h.MemlockHardBytes != nil {
		m.Hard = *h.MemlockHardBytes
	}
	return m
}

// Pinnable reports whether need bytes may be pinned: CAP_IPC_LOCK lifts
// the limit; else the soft limit allows it, or can be raised far enough
// (to the hard limit, or beyond it with CAP_SYS_RESOURCE).
func (m Memlock) Pinnable(need int64) bool {
	fits := func(l int64) bool { return l < 0 || l >= need }
	return m.CapIPCLock || m.CapSysResource || fits(m.Soft) || fits(m.Hard)
}

// MemlockHint says how to let a process pin need bytes.
func MemlockHint(need int64) string {
	return fmt.Sprintf("give the process CAP_IPC_LOCK, or raise RLIMIT_MEMLOCK to at least %d KiB: ulimit -l unlimited (/etc/security/limits.conf, LimitMEMLOCK= for a systemd unit); in a container, --cap-add IPC_LOCK or --ulimit memlock=-1 (root there lacks the capability by default)", (need+1023)/1024)
}

// Version is what `node version --json` prints.
type Version struct {
	Version    string   `json:"version"`
	Go         string   `json:"go"`
	Transports []string `json:"transports"`
	Arch       string   `json:"arch"`
}

// ChooseGID is node's rule for the GID of a RoCE port when the plan gives
// no gid_index, kept here so that `runner check` predicts what node will
// do. With an address it takes the GID equal to it (an IPv4 address
// appears as ::ffff:a.b.c.d), preferring RoCE v2; none equal is an error.
// Without one (nil or unspecified) it prefers, as perftest does, an
// IPv4-mapped GID, then any that is not link-local, then any at all, RoCE
// v2 first within each. It returns the position in gids.
func ChooseGID(gids []GID, addr net.IP) (int, error) {
	if len(gids) == 0 {
		return -1, errors.New("the port has no populated GID")
	}
	best := -1
	if addr != nil && !addr.IsUnspecified() {
		for i, g := range gids {
			if g.IP().Equal(addr) && (best < 0 || typeRank(g.Type) < typeRank(gids[best].Type)) {
				best = i
			}
		}
		if best < 0 {
			return -1, fmt.Errorf("no GID of the port matches address %s (the GIDs are %s)", addr, ListGIDs(gids))
		}
		return best, nil
	}
	rank := func(g GID) int {
		r := typeRank(g.Type)
		switch ip := g.IP(); {
		case ip != nil && ip.To4() != nil:
		case ip != nil && !ip.IsLinkLocalUnicast():
			r += 10
		default:
			r += 20
		}
		return r
	}
	for i, g := range gids {
		if best < 0 || rank(g) < rank(gids[best]) {
			best = i
		}
	}
	return best, nil
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

// ListGIDs writes gids for an error message: "index gid (type)", ...
func ListGIDs(gids []GID) string {
	var b strings.Builder
	for i, g := range gids {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %s (%s)", g.Index, g.GID, g.Type)
	}
	return b.String()
}
