//go:build rdma

package rdma

// #cgo CFLAGS: -O2 -Wall -DRDMA_STATIC_PROVIDERS=all
// #cgo LDFLAGS: -lm
// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"rdmasweep/results"
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
	// transport is the verbs transport, as transportName names it.
	transport string
	// sysDevice is where /sys/class/infiniband/<name>/device leads (the
	// PCI function), "" for software devices; driver the kernel driver's
	// name.
	sysDevice, driver string
	// borrowed: ctx belongs to rdma_cm, which closes it.
	borrowed bool
}

// The access flags attrs.go decides with are verbs'.
var (
	_ [accessLocalWrite - C.IBV_ACCESS_LOCAL_WRITE]struct{}
	_ [C.IBV_ACCESS_LOCAL_WRITE - accessLocalWrite]struct{}
	_ [accessRemoteWrite - C.IBV_ACCESS_REMOTE_WRITE]struct{}
	_ [C.IBV_ACCESS_REMOTE_WRITE - accessRemoteWrite]struct{}
	_ [accessRemoteRead - C.IBV_ACCESS_REMOTE_READ]struct{}
	_ [C.IBV_ACCESS_REMOTE_READ - accessRemoteRead]struct{}
	_ [accessRelaxedOrdering - C.IBV_ACCESS_RELAXED_ORDERING]struct{}
	_ [C.IBV_ACCESS_RELAXED_ORDERING - accessRelaxedOrdering]struct{}
	// and so are the async event types breakingEvent names.
	_ [eventDeviceFatal - C.IBV_EVENT_DEVICE_FATAL]struct{}
	_ [C.IBV_EVENT_DEVICE_FATAL - eventDeviceFatal]struct{}
	_ [eventPortErr - C.IBV_EVENT_PORT_ERR]struct{}
	_ [C.IBV_EVENT_PORT_ERR - eventPortErr]struct{}
	_ [eventLIDChange - C.IBV_EVENT_LID_CHANGE]struct{}
	_ [C.IBV_EVENT_LID_CHANGE - eventLIDChange]struct{}
	_ [eventPKeyChange - C.IBV_EVENT_PKEY_CHANGE]struct{}
	_ [C.IBV_EVENT_PKEY_CHANGE - eventPKeyChange]struct{}
	_ [eventGIDChange - C.IBV_EVENT_GID_CHANGE]struct{}
	_ [C.IBV_EVENT_GID_CHANGE - eventGIDChange]struct{}
)

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

// sysfsDevice is where /sys/class/infiniband/<name>/device (or the net
// class's) leads, "" when there is none; and the kernel driver's name.
func sysfsDevice(class, name string) (string, string) {
	p, err := filepath.EvalSymlinks(filepath.Join("/sys/class", class, name, "device"))
	if err != nil {
		return "", ""
	}
	drv, _ := filepath.EvalSymlinks(filepath.Join(p, "driver"))
	if drv != "" {
		drv = filepath.Base(drv)
	}
	return p, drv
}

// numaNode is the NUMA node of a sysfs device, nil when unknown.
func numaNode(sysDevice string) *int {
	if sysDevice == "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(sysDevice, "numa_node"))
	if err != nil {
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 {
		return nil
	}
	return &n
}

// scan opens every device in turn and describes it. A device that cannot
// be opened or queried is listed with its error; it does not stop the rest.
func scan() ([]devCandidate, error) {
	devs, list, err := listDevices()
	if err != nil {
		return nil, err
	}
	defer C.ibv_free_device_list(list)
	out := []devCandidate{}
	for _, dev := range devs {
		dn := C.GoString(C.ibv_get_device_name(dev))
		c := devCandidate{Device: Device{Name: dn, Ports: []Port{}, Transport: transportName(int(dev.transport_type))}}
		var drv string
		c.sysDevice, drv = sysfsDevice("infiniband", dn)
		c.Driver, c.NUMANode = drv, numaNode(c.sysDevice)
		c.Unsupported = unsupportedReason(c.Transport, drv)
		ctx, err := C.ibv_open_device(dev)
		if ctx == nil {
			c.Error = fmt.Sprintf("cannot open: %v", cErr("ibv_open_device", err,
				"the device node /dev/infiniband/uverbs* may be missing or not readable by this user"))
			out = append(out, c)
			continue
		}
		if err := describe(ctx, &c.Device); err != nil {
			c.Error = err.Error()
		}
		C.ibv_close_device(ctx)
		out = append(out, c)
	}
	return out, nil
}

// ownerOf finds the network interface holding ip, or nil.
func ownerOf(ip net.IP) *netOwner {
	if ip == nil || ip.IsUnspecified() {
		return nil
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				o := &netOwner{ifname: ifc.Name, mac: ifc.HardwareAddr}
				o.sysDevice, _ = sysfsDevice("net", ifc.Name)
				if b, err := os.ReadFile(filepath.Join("/sys/class/net", ifc.Name, "dev_port")); err == nil {
					o.devPort, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				}
				return o
			}
		}
	}
	return nil
}

// openDevice opens the device for a connection over addr (see
// chooseDevice) and allocates a protection domain on it.
func openDevice(name string, port int, addr net.IP) (*device, error) {
	cands, err := scan()
	if err != nil {
		return nil, err
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("no RDMA devices found; hint: load the NIC's driver, or for soft-RoCE `modprobe rdma_rxe && rdma link add rxe0 type rxe netdev IFACE`")
	}
	i, port, err := chooseDevice(cands, name, port, addr, ownerOf(addr))
	if err != nil {
		return nil, err
	}
	devs, list, err := listDevices()
	if err != nil {
		return nil, err
	}
	defer C.ibv_free_device_list(list)
	for _, dev := range devs {
		if C.GoString(C.ibv_get_device_name(dev)) == cands[i].Name {
			return openOne(dev, cands[i].Name, port)
		}
	}
	return nil, fmt.Errorf("RDMA device %s went away while opening it", cands[i].Name)
}

// openOne opens dev and checks its port is active.
func openOne(dev *C.struct_ibv_device, dn string, port int) (*device, error) {
	ctx, err := C.ibv_open_device(dev)
	if ctx == nil {
		return nil, fmt.Errorf("open device %s: %w", dn, cErr("ibv_open_device", err,
			"the device node /dev/infiniband/uverbs* may be missing or not readable by this user"))
	}
	d, err := useContext(ctx, dn, port, transportName(int(dev.transport_type)))
	if err != nil {
		C.ibv_close_device(ctx)
		return nil, err
	}
	return d, nil
}

// useContext queries an opened device, checks its port is active and
// allocates a PD. On failure the caller still owns ctx.
func useContext(ctx *C.struct_ibv_context, dn string, port int, transport string) (*device, error) {
	d := &device{ctx: ctx, name: dn, port: port, transport: transport}
	d.sysDevice, d.driver = sysfsDevice("infiniband", dn)
	fail := func(err error) (*device, error) {
		d.ctx = nil
		d.close()
		return nil, err
	}
	if err := verbErr(C.rs_query_device(ctx, &d.attr), ""); err != nil {
		return fail(fmt.Errorf("device %s: %w", dn, err))
	}
	if port < 1 || port > int(d.attr.orig_attr.phys_port_cnt) {
		return fail(fmt.Errorf("device %s has %d port(s); ib_port %d does not exist", dn, int(d.attr.orig_attr.phys_port_cnt), port))
	}
	if err := verbErr(C.rs_query_port(ctx, C.uint8_t(port), &d.pattr), "check ib_port"); err != nil {
		return fail(fmt.Errorf("device %s port %d: %w", dn, port, err))
	}
	if d.pattr.state != C.IBV_PORT_ACTIVE {
		return fail(fmt.Errorf("device %s port %d is %s, not ACTIVE; hint: check the cable or link (`node devices`, `ibv_devinfo`)", dn, port, portStateName(d.pattr.state)))
	}
	pd, err := C.ibv_alloc_pd(ctx)
	if pd == nil {
		return fail(fmt.Errorf("device %s: %w", dn, cErr("ibv_alloc_pd", err, "the device may be out of resources")))
	}
	d.pd = pd
	return d, nil
}

func (d *device) close() {
	if d.pd != nil {
		C.ibv_dealloc_pd(d.pd)
		d.pd = nil
	}
	if d.ctx != nil && !d.borrowed {
		C.ibv_close_device(d.ctx)
	}
	d.ctx = nil
}

// maxRdAtom and maxInitRdAtom are the device's responder and requester
// depths for RDMA READ, by results.RdAtomicLimit.
func (d *device) maxRdAtom() int { return results.RdAtomicLimit(int(d.attr.orig_attr.max_qp_rd_atom)) }
func (d *device) maxInitRdAtom() int {
	return results.RdAtomicLimit(int(d.attr.orig_attr.max_qp_init_rd_atom))
}

// maxMRSize is the largest region the device registers, 0 unknown.
func (d *device) maxMRSize() uint64 { return uint64(d.attr.orig_attr.max_mr_size) }

// maxQPWR is the deepest send queue a QP may have.
func (d *device) maxQPWR() int { return int(d.attr.orig_attr.max_qp_wr) }

func (d *device) odpRCRead() bool {
	c := d.attr.odp_caps
	return c.general_caps&C.IBV_ODP_SUPPORT != 0 && c.per_transport_caps.rc_odp_caps&C.IBV_ODP_SUPPORT_READ != 0
}

// gids returns the populated GIDs of d's port.
func (d *device) gids() ([]GID, error) {
	all, err := gidTable(d.ctx, int(d.attr.orig_attr.phys_port_cnt))
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

// gidTable returns the populated GIDs of every port of ctx. The table
// ibv_query_gid_table fills holds every port's entries, so it is sized by
// the sum of the ports' GID table lengths: multi-port HCAs need not have
// the same length on each.
func gidTable(ctx *C.struct_ibv_context, nports int) ([]portGID, error) {
	lens := make([]int, nports)
	for p := 1; p <= nports; p++ {
		var pa C.struct_ibv_port_attr
		if err := verbErr(C.rs_query_port(ctx, C.uint8_t(p), &pa), ""); err != nil {
			return nil, fmt.Errorf("port %d: %w", p, err)
		}
		lens[p-1] = int(pa.gid_tbl_len)
	}
	max := gidTableSize(lens)
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

// pickGID returns the GID to use and whether the QPs route by it (see
// address): the configured index, checked, or on RoCE when index < 0 the
// one chosen by chooseGID for addr. On InfiniBand without gid_index it is
// the empty GID: QPs route by LID.
func (d *device) pickGID(index int, addr net.IP) (GID, bool, error) {
	if !needGRH(d.ethernet(), index >= 0) {
		return GID{}, false, nil
	}
	gids, err := d.gids()
	if err != nil {
		return GID{}, true, err
	}
	if n := int(d.pattr.gid_tbl_len); index >= n {
		return GID{}, true, fmt.Errorf("gid_index %d is out of range: %s port %d has GID indexes 0..%d, populated: %s; hint: pick one from `node devices`, or leave gid_index out to choose by address", index, d.name, d.port, n-1, listGIDs(gids))
	}
	g, grh, err := address(d.ethernet(), index, gids, addr)
	if err != nil {
		return GID{}, grh, fmt.Errorf("%s port %d: %w", d.name, d.port, err)
	}
	return g, grh, nil
}

// Devices lists every RDMA device with its ports and GIDs. A device that
// cannot be opened is listed with its error.
func Devices() ([]Device, error) {
	cands, err := scan()
	if err != nil {
		return nil, err
	}
	out := []Device{}
	for _, c := range cands {
		out = append(out, c.Device)
	}
	return out, nil
}

// Choose says which device, port and GID node would use for a connection
// over addr with these settings (name "", port 0 and gidIndex -1 choose),
// as Listen and Dial do, without opening anything for long.
func Choose(name string, port, gidIndex int, addr net.IP) (results.DeviceChoice, error) {
	cands, err := scan()
	if err != nil {
		return results.DeviceChoice{}, err
	}
	i, p, err := chooseDevice(cands, name, port, addr, ownerOf(addr))
	if err != nil {
		return results.DeviceChoice{}, err
	}
	c := results.DeviceChoice{Device: cands[i].Name, IBPort: p, GIDIndex: -1}
	for _, pt := range cands[i].Ports {
		if pt.Port != p {
			continue
		}
		if gidIndex >= 0 {
			for _, g := range pt.GIDs {
				if g.Index == gidIndex {
					c.GIDIndex, c.GID, c.GIDType = g.Index, g.GID, g.Type
				}
			}
			if c.GIDIndex < 0 {
				return c, fmt.Errorf("gid_index %d of %s port %d is not populated (populated: %s)", gidIndex, c.Device, p, listGIDs(pt.GIDs))
			}
			break
		}
		if pt.LinkLayer != "Ethernet" || needsCM(cands[i].Transport) {
			break // routed by LID, or rdma_cm chooses
		}
		g, err := chooseGID(pt.GIDs, addr)
		if err != nil {
			return c, fmt.Errorf("%s port %d: %w", c.Device, p, err)
		}
		c.GIDIndex, c.GID, c.GIDType = g.Index, g.GID, g.Type
	}
	return c, nil
}

// describe fills info from an opened device.
func describe(ctx *C.struct_ibv_context, info *Device) error {
	d := &device{ctx: ctx, name: info.Name}
	if err := verbErr(C.rs_query_device(ctx, &d.attr), ""); err != nil {
		return err
	}
	info.MaxQPRdAtom = int(d.attr.orig_attr.max_qp_rd_atom)
	info.MaxQPInitRdAtom = int(d.attr.orig_attr.max_qp_init_rd_atom)
	info.MaxQPWR = d.maxQPWR()
	info.ODP = d.odpRCRead()
	nports := int(d.attr.orig_attr.phys_port_cnt)
	for p := 1; p <= nports; p++ {
		var pa C.struct_ibv_port_attr
		if err := verbErr(C.rs_query_port(ctx, C.uint8_t(p), &pa), ""); err != nil {
			return fmt.Errorf("port %d: %w", p, err)
		}
		port := Port{
			Port: p, State: portStateName(pa.state), LinkLayer: linkLayerName(pa.link_layer),
			ActiveMTU: mtuBytes(int(pa.active_mtu)), Width: fmt.Sprintf("width %d", pa.active_width),
			LID: int(pa.lid), GIDs: []GID{}, MaxMsgSz: int64(pa.max_msg_sz), PKeyTblLen: int(pa.pkey_tbl_len),
		}
		if l, err := portLink("/", info.Name, p, int(pa.active_speed), int(pa.active_width)); err == nil {
			port.Width, port.Speed, port.RateGbps = l.Width(), l.Speed.Name, l.SignalGbps()
		}
		info.Ports = append(info.Ports, port)
	}
	gids, err := gidTable(ctx, nports)
	if err != nil {
		return err
	}
	for _, g := range gids {
		if g.port >= 1 && g.port <= len(info.Ports) {
			info.Ports[g.port-1].GIDs = append(info.Ports[g.port-1].GIDs, g.GID)
		}
	}
	return nil
}
