package rdma

// Decisions taken from a device's attributes, kept free of cgo so that
// their tests run over fake attributes on any machine. The cgo side
// (device.go, client.go, server.go) feeds them what the verbs say; its
// compile-time asserts tie the constants below to verbs.h.

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"rdmasweep/results/linerate"
)

// Access flags, as enum ibv_access_flags numbers them.
const (
	accessLocalWrite      = 1
	accessRemoteWrite     = 2
	accessRemoteRead      = 4
	accessRelaxedOrdering = 1 << 20 // IBV_ACCESS_OPTIONAL_FIRST
)

// clientAccess is the access the client's read buffer is registered
// with. RDMA READ responses land with local write. On iWARP they are
// placed like RDMA WRITEs into the buffer, so it needs REMOTE_WRITE too,
// as perftest and the kernel's rw.c give it; siw checks only LOCAL_WRITE,
// so soft-iWARP passes either way, but cxgb4 and irdma in iWARP mode fail
// the first READ with a local access error without it. Relaxed ordering
// is optional: a device without it ignores the flag. A device node cannot
// read through is refused.
func clientAccess(transport, driver string, relaxed bool) (int, error) {
	if why := unsupportedReason(transport, driver); why != "" {
		return 0, fmt.Errorf("%s", why)
	}
	a := accessLocalWrite
	if transport == "iWARP" {
		a |= accessRemoteWrite
	}
	if relaxed {
		a |= accessRelaxedOrdering
	}
	return a, nil
}

// address says how QPs on a port reach the peer: by LID alone on
// InfiniBand unless gid_index was given (a routed fabric, GRH on), which
// is perftest's default (is_global 0); by GID on RoCE, where index < 0
// chooses one by addr. An IB port without GRH uses no GID at all, so it
// needs no populated GID table and records none.
func address(ethernet bool, index int, gids []GID, addr net.IP) (g GID, grh bool, err error) {
	grh = needGRH(ethernet, index >= 0)
	if !grh {
		return GID{}, false, nil
	}
	if index >= 0 {
		for _, g := range gids {
			if g.Index == index {
				return g, true, nil
			}
		}
		return GID{}, true, fmt.Errorf("gid_index %d is not populated (populated: %s); hint: pick one from `node devices`", index, listGIDs(gids))
	}
	g, err = chooseGID(gids, addr)
	return g, true, err
}

// portLink is the width and lane speed of device's port under the sysfs
// at root. The port's rate file comes first: the kernel writes it from
// its own active_speed, which names XDR. The verbs' active_speed is 8
// bits, where the kernel gives an XDR port as NDR; active_speed_ex,
// which carries XDR, is in no rdma-core before 50 (Debian 12 has 44).
// The verbs' speed and width serve where the file cannot be read.
func portLink(root, device string, port, activeSpeed, activeWidth int) (linerate.Link, error) {
	l, err := linerate.PortLink(root, device, port)
	if err == nil {
		return l, nil
	}
	l, verr := linerate.LinkOf(activeSpeed, activeWidth)
	if verr != nil {
		return l, fmt.Errorf("%w; verbs: %w", err, verr)
	}
	return l, nil
}

// prefetchSegment is one range ibv_advise_mr prefetches.
type prefetchSegment struct{ off, len uint64 }

// maxPrefetch is the most one segment advises: an SGE's length is 32
// bits, and perftest and the kernel's ODP code split at 2 GiB.
const maxPrefetch = 2 << 30

// prefetchSegments splits a region of n bytes into segments of at most
// maxPrefetch, covering it whole.
func prefetchSegments(n uint64) []prefetchSegment {
	var out []prefetchSegment
	for off := uint64(0); off < n; off += maxPrefetch {
		out = append(out, prefetchSegment{off, min(maxPrefetch, n-off)})
	}
	return out
}

// mrSpans splits a region of size bytes into the memory regions it is
// registered as, results.MRCount of them: at most mrSize bytes each, in
// order, covering it whole. mrSize 0 (or at least size) is one region.
func mrSpans(size, mrSize uint64) []prefetchSegment {
	if mrSize == 0 || mrSize >= size {
		return []prefetchSegment{{0, size}}
	}
	var out []prefetchSegment
	for off := uint64(0); off < size; off += mrSize {
		out = append(out, prefetchSegment{off, min(mrSize, size-off)})
	}
	return out
}

// checkMRSize refuses a registration larger than the device's
// max_mr_size before trying it: the verb would fail with a bare EINVAL or
// ENOMEM, which reads like a memlock problem.
func checkMRSize(size, maxMR uint64, dev, what, hint string) error {
	if maxMR == 0 || size <= maxMR {
		return nil
	}
	return fmt.Errorf("%s is %d bytes, over %s's max_mr_size %d: the device cannot register it as one region; hint: %s", what, size, dev, maxMR, hint)
}

// configfsRDMACM is where configfs holds rdma_cm's per-port defaults.
const configfsRDMACM = "/sys/kernel/config/rdma_cm"

// defaultRoCETOS reads the default_roce_tos an administrator set for the
// device's port under root (configfsRDMACM), nil where it cannot be read:
// no configfs, or no directory made for the device, in which case the
// kernel uses 0.
func defaultRoCETOS(root, dev string, port int) *int {
	b, err := os.ReadFile(filepath.Join(root, dev, "ports", strconv.Itoa(port), "default_roce_tos"))
	if err != nil {
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return nil
	}
	return &n
}

// trafficClass is the traffic class a side's QPs carry: the plan's, or
// unset (set < 0), what the kernel uses: with connect cm the port's
// default_roce_tos, else 0.
func trafficClass(set int, cm bool, defaultTOS *int) int {
	switch {
	case set >= 0:
		return set
	case cm && defaultTOS != nil:
		return *defaultTOS
	}
	return 0
}

// Async event types, as enum ibv_event_type numbers them.
const (
	eventDeviceFatal = 8
	eventPortErr     = 10
	eventLIDChange   = 11
	eventPKeyChange  = 12
	eventGIDChange   = 18
)

// breakingEvent names an async event that breaks the path through port
// and the GID in use (a link flap, the address gone), "" for any other:
// without it the point would end in a bare retry-exceeded error on the
// client. A GID change breaks the path only when gidGone says the GID in
// use is gone from its index: the kernel raises the event for any entry
// of the port's table that changes, a new IPv6 temporary address on the
// interface among them. gidGone nil (no GID in use: InfiniBand by LID)
// makes a GID change harmless.
func breakingEvent(typ, eventPort, port int, gid GID, gidGone func() bool) string {
	if typ == eventDeviceFatal {
		return "a fatal device error (IBV_EVENT_DEVICE_FATAL)"
	}
	if eventPort != port {
		return ""
	}
	switch typ {
	case eventPortErr:
		return fmt.Sprintf("port %d went down (IBV_EVENT_PORT_ERR): the link flapped or the cable or switch port failed", port)
	case eventGIDChange:
		if gidGone == nil || !gidGone() {
			return ""
		}
		return fmt.Sprintf("port %d's GID table changed (IBV_EVENT_GID_CHANGE) and the GID in use, %s at index %d, is gone: its address was removed from the interface or changed", port, gid.GID, gid.Index)
	case eventLIDChange:
		return fmt.Sprintf("port %d's LID changed (IBV_EVENT_LID_CHANGE): the subnet manager reassigned it", port)
	case eventPKeyChange:
		return fmt.Sprintf("port %d's P_Key table changed (IBV_EVENT_PKEY_CHANGE)", port)
	}
	return ""
}

// relaxedOrderingGranted says whether a device's MR holds the relaxed
// ordering it was asked for, where that can be known, and nil where it
// cannot. Not asked for, it is not held; a software device (no PCI
// function: config nil) never holds it. A hardware device decides by its
// own rule, which its PCIe Device Control register does not show: mlx5
// grants the write direction a READ's sink uses from its device
// capability (so a VF whose DevCtl bit is clear may hold it), and a
// driver that ignores the optional flag accepts it without holding it.
// So for hardware the answer is nil, unknown; the request is recorded as
// relaxed_ordering either way.
func relaxedOrderingGranted(requested bool, config []byte) *bool {
	if !requested || config == nil {
		no := false
		return &no
	}
	return nil
}
