//go:build linux

// Package rdmanl asks the kernel's RDMA netlink (NETLINK_RDMA) what
// rdma-core asks it: a device's uverbs driver id, the id libibverbs picks
// its provider by, and so the device's family (mlx5, irdma, rxe, …),
// whatever PCI driver its function is bound to. It is pure Go, with the
// kernel's numbers written here (the rdma package's cgo test holds them to
// <rdma/rdma_netlink.h> and <rdma/ib_user_ioctl_verbs.h>), so node's
// counters read it in every build.
package rdmanl

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// The RDMA netlink numbers UverbsDriverID and PortNetdev use
// (rdma_netlink.h).
const (
	NLDev              = 5  // RDMA_NL_NLDEV
	CmdGet             = 1  // RDMA_NLDEV_CMD_GET
	CmdPortGet         = 5  // RDMA_NLDEV_CMD_PORT_GET
	CmdGetChardev      = 15 // RDMA_NLDEV_CMD_GET_CHARDEV
	AttrDevIndex       = 1  // RDMA_NLDEV_ATTR_DEV_INDEX
	AttrDevName        = 2  // RDMA_NLDEV_ATTR_DEV_NAME
	AttrPortIndex      = 3  // RDMA_NLDEV_ATTR_PORT_INDEX
	AttrNdevName       = 51 // RDMA_NLDEV_ATTR_NDEV_NAME
	AttrChardevType    = 69 // RDMA_NLDEV_ATTR_CHARDEV_TYPE
	AttrUverbsDriverID = 73 // RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID
)

// The uverbs driver ids of enum rdma_driver_id (ib_user_ioctl_verbs.h)
// that name a family node knows.
const (
	DriverMLX5   = 1
	DriverMLX4   = 2
	DriverCXGB4  = 4
	DriverBNXTRE = 6
	DriverIRDMA  = 9 // RDMA_DRIVER_I40IW's number, renamed
	DriverQEDR   = 11
	DriverHNS    = 12
	DriverUSNIC  = 13
	DriverRXE    = 14
	DriverEFA    = 17
	DriverSIW    = 18
	DriverERDMA  = 19
)

// families are the providers' names, as rdma-core names its providers.
var families = map[uint32]string{
	DriverMLX5: "mlx5", DriverMLX4: "mlx4", DriverCXGB4: "cxgb4", DriverBNXTRE: "bnxt_re",
	DriverIRDMA: "irdma", DriverQEDR: "qedr", DriverHNS: "hns", DriverUSNIC: "usnic",
	DriverRXE: "rxe", DriverEFA: "efa", DriverSIW: "siw", DriverERDMA: "erdma",
}

// Family is the device family of uverbs driver id, "" for one not known.
func Family(id uint32) string { return families[id] }

func nldevType(cmd int) uint16 { return uint16(NLDev<<10 + cmd) }

// UverbsDriverID asks the kernel, over RDMA netlink as libibverbs does
// when it matches a provider, for the uverbs driver id of device dev: the
// id an ioctl on its command fd must carry. The device list is dumped for
// dev's index, then the uverbs char device of that index is asked for.
func UverbsDriverID(dev string) (uint32, error) {
	fd, index, err := openDev(dev)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	attrs := nlAppendAttr(nil, AttrDevIndex, nlU32(uint32(index)))
	attrs = nlAppendAttr(attrs, AttrChardevType, []byte("uverbs\x00"))
	id, have := uint64(0), false
	err = nlAsk(fd, nlRequest(nldevType(CmdGetChardev), 0, 2, attrs), 2, func(a map[uint16][]byte) {
		id, have = nlUint(a[AttrUverbsDriverID])
	})
	if err != nil {
		return 0, fmt.Errorf("ask rdma netlink for %s's uverbs device: %w", dev, err)
	}
	if !have {
		return 0, fmt.Errorf("rdma netlink gives no uverbs driver id for %s (a kernel before 5.0?)", dev)
	}
	return uint32(id), nil
}

// PortNetdev asks the kernel, over RDMA netlink as `rdma link` does, for
// the network device under dev's port: the one rxe or siw was added
// over, or a RoCE NIC's own. siw's port has no GID with a netdev in
// sysfs, but the kernel knows it here. A port with none (InfiniBand) is
// an error.
func PortNetdev(dev string, port int) (string, error) {
	fd, index, err := openDev(dev)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	attrs := nlAppendAttr(nil, AttrDevIndex, nlU32(uint32(index)))
	attrs = nlAppendAttr(attrs, AttrPortIndex, nlU32(uint32(port)))
	name := ""
	err = nlAsk(fd, nlRequest(nldevType(CmdPortGet), 0, 2, attrs), 2, func(a map[uint16][]byte) {
		name = nlString(a[AttrNdevName])
	})
	if err != nil {
		return "", fmt.Errorf("ask rdma netlink for %s port %d: %w", dev, port, err)
	}
	if name == "" {
		return "", fmt.Errorf("rdma netlink names no network device under %s port %d", dev, port)
	}
	return name, nil
}

// openDev opens an RDMA netlink socket and finds dev's index on it, from
// a dump of the device list (sequence 1). The caller closes the socket.
func openDev(dev string) (fd int, index uint64, err error) {
	fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_RDMA)
	if err != nil {
		return -1, 0, fmt.Errorf("open an rdma netlink socket: %w", err)
	}
	defer func() {
		if err != nil {
			unix.Close(fd)
		}
	}()
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return -1, 0, fmt.Errorf("bind an rdma netlink socket: %w", err)
	}
	// The kernel always answers; the timeout is against a bug, not a wait.
	tv := unix.NsecToTimeval(int64(5 * time.Second))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return -1, 0, fmt.Errorf("set an rdma netlink socket's timeout: %w", err)
	}
	found := false
	err = nlAsk(fd, nlRequest(nldevType(CmdGet), unix.NLM_F_DUMP, 1, nil), 1, func(a map[uint16][]byte) {
		if nlString(a[AttrDevName]) == dev {
			index, found = nlUint(a[AttrDevIndex])
		}
	})
	if err != nil {
		return -1, 0, fmt.Errorf("list rdma devices over netlink: %w", err)
	}
	if !found {
		return -1, 0, fmt.Errorf("rdma netlink lists no device %s", dev)
	}
	return fd, index, nil
}

// nlAsk sends req on fd and hands each reply of sequence seq to fn, until
// the reply is whole.
func nlAsk(fd int, req []byte, seq uint32, fn func(map[uint16][]byte)) error {
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return err
		}
		switch err := nlReplies(buf[:n], seq, fn); {
		case errors.Is(err, errNLDone):
			return nil
		case err != nil:
			return err
		}
	}
}
