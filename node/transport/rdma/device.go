//go:build rdma

package rdma

// #cgo CFLAGS: -O2 -Wall -DRDMA_STATIC_PROVIDERS=all
// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"fmt"
	"net"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func verbErr(st C.rs_status, hint string) error {
	if st.verb == nil {
		return nil
	}
	return &VerbError{Verb: C.GoString(st.verb), Errno: syscall.Errno(st.err), Hint: hint}
}

// cErr makes a VerbError of the errno cgo returned with a failed call.
func cErr(verb string, err error, hint string) error {
	errno, _ := err.(syscall.Errno)
	if errno == 0 {
		errno = syscall.EIO
	}
	return &VerbError{Verb: verb, Errno: errno, Hint: hint}
}

// device is an opened device with one port chosen.
type device struct {
	ctx   *C.struct_ibv_context
	pd    *C.struct_ibv_pd
	name  string
	port  int
	attr  C.struct_ibv_device_attr_ex
	pattr C.struct_ibv_port_attr
}

func portStateName(s C.enum_ibv_port_state) string {
	switch s {
	case C.IBV_PORT_DOWN:
		return "DOWN"
	case C.IBV_PORT_INIT:
		return "INIT"
	case C.IBV_PORT_ARMED:
		return "ARMED"
	case C.IBV_PORT_ACTIVE:
		return "ACTIVE"
	case C.IBV_PORT_ACTIVE_DEFER:
		return "ACTIVE_DEFER"
	}
	return strings.ToUpper(C.GoString(C.ibv_port_state_str(s)))
}

func linkLayerName(l C.uint8_t) string {
	switch l {
	case C.IBV_LINK_LAYER_INFINIBAND, C.IBV_LINK_LAYER_UNSPECIFIED:
		return "InfiniBand"
	case C.IBV_LINK_LAYER_ETHERNET:
		return "Ethernet"
	}
	return fmt.Sprintf("link layer %d", int(l))
}

func (d *device) ethernet() bool { return d.pattr.link_layer == C.IBV_LINK_LAYER_ETHERNET }

// mtuBytes converts enum ibv_mtu to bytes.
func mtuBytes(m int) int {
	if m < 1 || m > 5 {
		return 0
	}
	return 128 << m
}

// listDevices returns the device list; free it with C.ibv_free_device_list.
func listDevices() ([]*C.struct_ibv_device, **C.struct_ibv_device, error) {
	var n C.int
	list, err := C.rs_device_list(&n)
	if list == nil {
		errno, _ := err.(syscall.Errno)
		if errno == 0 {
			errno = unix.ENODEV
		}
		return nil, nil, &VerbError{Verb: "ibv_get_device_list", Errno: errno,
			Hint: "this kernel offers no RDMA devices (is the ib_uverbs module loaded? for soft-RoCE: modprobe rdma_rxe && rdma link add rxe0 type rxe netdev IFACE)"}
	}
	return unsafe.Slice(list, int(n)), list, nil
}

// openDevice opens the named device ("" picks the first whose port is
// ACTIVE) and allocates a protection domain on it.
func openDevice(name string, port int) (*device, error) {
	if port <= 0 {
		port = 1
	}
	devs, list, err := listDevices()
	if err != nil {
		return nil, err
	}
	defer C.ibv_free_device_list(list)
	if len(devs) == 0 {
		return nil, fmt.Errorf("no RDMA devices found; hint: load the NIC's driver, or for soft-RoCE `modprobe rdma_rxe && rdma link add rxe0 type rxe netdev IFACE`")
	}
	var seen []string
	for _, dev := range devs {
		dn := C.GoString(C.ibv_get_device_name(dev))
		if name != "" && dn != name {
			seen = append(seen, dn)
			continue
		}
		d, state, err := openOne(dev, dn, port)
		if err != nil {
			if name != "" {
				return nil, err
			}
			seen = append(seen, fmt.Sprintf("%s (%s)", dn, state))
			continue
		}
		return d, nil
	}
	if name != "" {
		return nil, fmt.Errorf("no RDMA device named %q (found: %s); hint: `node devices` lists them", name, strings.Join(seen, ", "))
	}
	return nil, fmt.Errorf("no RDMA device with port %d ACTIVE (found: %s); hint: check the link, or name the device", port, strings.Join(seen, ", "))
}

// openOne opens dev and checks its port is active. On failure it returns
// the port's state (or "unusable") for the caller's list.
func openOne(dev *C.struct_ibv_device, dn string, port int) (*device, string, error) {
	ctx, err := C.ibv_open_device(dev)
	if ctx == nil {
		return nil, "cannot open", fmt.Errorf("open device %s: %w", dn, cErr("ibv_open_device", err,
			"the device node /dev/infiniband/uverbs* may be missing or not readable by this user"))
	}
	d := &device{ctx: ctx, name: dn, port: port}
	if err := verbErr(C.rs_query_device(ctx, &d.attr), ""); err != nil {
		d.close()
		return nil, "unusable", fmt.Errorf("device %s: %w", dn, err)
	}
	if port > int(d.attr.orig_attr.phys_port_cnt) {
		d.close()
		return nil, "no such port", fmt.Errorf("device %s has %d port(s); ib_port %d does not exist", dn, int(d.attr.orig_attr.phys_port_cnt), port)
	}
	if err := verbErr(C.rs_query_port(ctx, C.uint8_t(port), &d.pattr), "check ib_port"); err != nil {
		d.close()
		return nil, "unusable", fmt.Errorf("device %s port %d: %w", dn, port, err)
	}
	if d.pattr.state != C.IBV_PORT_ACTIVE {
		st := portStateName(d.pattr.state)
		d.close()
		return nil, st, fmt.Errorf("device %s port %d is %s, not ACTIVE; hint: check the cable or link (`node devices`, `ibv_devinfo`)", dn, port, st)
	}
	pd, err := C.ibv_alloc_pd(ctx)
	if pd == nil {
		d.close()
		return nil, "unusable", fmt.Errorf("device %s: %w", dn, cErr("ibv_alloc_pd", err, "the device may be out of resources"))
	}
	d.pd = pd
	return d, "ACTIVE", nil
}

func (d *device) close() {
	if d.pd != nil {
		C.ibv_dealloc_pd(d.pd)
		d.pd = nil
	}
	if d.ctx != nil {
		C.ibv_close_device(d.ctx)
		d.ctx = nil
	}
}

// maxRdAtom and maxInitRdAtom are the device's responder and requester
// depths for RDMA READ, capped to the u8 the QP attributes hold.
func (d *device) maxRdAtom() int     { return min(int(d.attr.orig_attr.max_qp_rd_atom), 255) }
func (d *device) maxInitRdAtom() int { return min(int(d.attr.orig_attr.max_qp_init_rd_atom), 255) }

func (d *device) odpRCRead() bool {
	c := d.attr.odp_caps
	return c.general_caps&C.IBV_ODP_SUPPORT != 0 && c.per_transport_caps.rc_odp_caps&C.IBV_ODP_SUPPORT_READ != 0
}

// gids returns the populated GIDs of d's port.
func (d *device) gids() ([]GID, error) {
	all, err := gidTable(d.ctx, int(d.pattr.gid_tbl_len)*int(d.attr.orig_attr.phys_port_cnt))
	if err != nil {
		return nil, fmt.Errorf("device %s: %w", d.name, err)
	}
	var out []GID
	for _, g := range all {
		if g.port == d.port {
			out = append(out, g.GID)
		}
	}
	return out, nil
}

type portGID struct {
	GID
	port int
}

func gidTable(ctx *C.struct_ibv_context, max int) ([]portGID, error) {
	if max <= 0 {
		return nil, nil
	}
	entries := make([]C.struct_ibv_gid_entry, max)
	var n C.int
	if err := verbErr(C.rs_query_gid_table(ctx, &entries[0], C.int(max), &n), ""); err != nil {
		return nil, err
	}
	out := make([]portGID, 0, int(n))
	for _, e := range entries[:int(n)] {
		var raw [16]byte
		copy(raw[:], C.GoBytes(unsafe.Pointer(&e.gid), 16))
		out = append(out, portGID{GID: newGID(int(e.gid_index), raw, int(e.gid_type), int(e.ndev_ifindex)), port: int(e.port_num)})
	}
	return out, nil
}

// pickGID returns the GID index to use: the configured one, checked, or
// when index < 0 the one chosen by chooseGID for addr. On InfiniBand it
// still returns a GID, but QPs route by LID.
func (d *device) pickGID(index int, addr net.IP) (GID, error) {
	gids, err := d.gids()
	if err != nil {
		return GID{}, err
	}
	if index >= 0 {
		n := int(d.pattr.gid_tbl_len)
		if index >= n {
			return GID{}, fmt.Errorf("gid_index %d is out of range: %s port %d has GID indexes 0..%d, populated: %s; hint: pick one from `node devices`, or leave gid_index out to choose by address", index, d.name, d.port, n-1, listGIDs(gids))
		}
		for _, g := range gids {
			if g.Index == index {
				return g, nil
			}
		}
		return GID{}, fmt.Errorf("gid_index %d of %s port %d is not populated (populated: %s); hint: pick one from `node devices`", index, d.name, d.port, listGIDs(gids))
	}
	if !d.ethernet() {
		// IB routes by LID; GID 0 (subnet prefix + port GUID) is what
		// ibv_devinfo shows and what a GRH would carry.
		for _, g := range gids {
			if g.Index == 0 {
				return g, nil
			}
		}
	}
	g, err := chooseGID(gids, addr)
	if err != nil {
		return GID{}, fmt.Errorf("%s port %d: %w", d.name, d.port, err)
	}
	return g, nil
}

// Devices lists every RDMA device with its ports and GIDs.
func Devices() ([]Device, error) {
	devs, list, err := listDevices()
	if err != nil {
		return nil, err
	}
	defer C.ibv_free_device_list(list)
	out := []Device{}
	for _, dev := range devs {
		dn := C.GoString(C.ibv_get_device_name(dev))
		ctx, err := C.ibv_open_device(dev)
		if ctx == nil {
			return nil, fmt.Errorf("open device %s: %w", dn, cErr("ibv_open_device", err,
				"the device node /dev/infiniband/uverbs* may be missing or not readable by this user"))
		}
		info, err := describe(ctx, dn)
		C.ibv_close_device(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

func describe(ctx *C.struct_ibv_context, dn string) (Device, error) {
	d := &device{ctx: ctx, name: dn}
	if err := verbErr(C.rs_query_device(ctx, &d.attr), ""); err != nil {
		return Device{}, fmt.Errorf("device %s: %w", dn, err)
	}
	info := Device{Name: dn, MaxQPRdAtom: int(d.attr.orig_attr.max_qp_rd_atom),
		MaxQPInitRdAtom: int(d.attr.orig_attr.max_qp_init_rd_atom), ODP: d.odpRCRead()}
	nports := int(d.attr.orig_attr.phys_port_cnt)
	var total int
	for p := 1; p <= nports; p++ {
		var pa C.struct_ibv_port_attr
		if err := verbErr(C.rs_query_port(ctx, C.uint8_t(p), &pa), ""); err != nil {
			return Device{}, fmt.Errorf("device %s port %d: %w", dn, p, err)
		}
		total += int(pa.gid_tbl_len)
		width, lanes := portWidth(int(pa.active_width))
		info.Ports = append(info.Ports, Port{
			Port: p, State: portStateName(pa.state), LinkLayer: linkLayerName(pa.link_layer),
			ActiveMTU: mtuBytes(int(pa.active_mtu)), RateGbps: float64(lanes) * laneGbps(int(pa.active_speed)),
			Width: width, LID: int(pa.lid), GIDs: []GID{},
		})
	}
	gids, err := gidTable(ctx, total)
	if err != nil {
		return Device{}, fmt.Errorf("device %s: %w", dn, err)
	}
	for _, g := range gids {
		if g.port >= 1 && g.port <= len(info.Ports) {
			info.Ports[g.port-1].GIDs = append(info.Ports[g.port-1].GIDs, g.GID)
		}
	}
	return info, nil
}

// portWidth decodes ibv_port_attr.active_width.
func portWidth(w int) (string, int) {
	switch w {
	case 1:
		return "1x", 1
	case 2:
		return "4x", 4
	case 4:
		return "8x", 8
	case 8:
		return "12x", 12
	case 16:
		return "2x", 2
	}
	return fmt.Sprintf("width %d", w), 0
}

// laneGbps decodes ibv_port_attr.active_speed to the lane's signalling rate.
func laneGbps(s int) float64 {
	switch s {
	case 1:
		return 2.5
	case 2:
		return 5
	case 4:
		return 10
	case 8:
		return 10.3125
	case 16:
		return 14.0625
	case 32:
		return 25.78125
	case 64:
		return 53.125
	case 128:
		return 106.25
	}
	return 0
}
