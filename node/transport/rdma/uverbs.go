//go:build rdma

package rdma

// #include <rdma/ib_user_ioctl_verbs.h>
// #include <rdma/rdma_netlink.h>
import "C"

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// nldevType is the netlink message type of the RDMA device interface's
// command cmd (RDMA_NL_GET_TYPE).
func nldevType(cmd int) uint16 { return uint16(C.RDMA_NL_NLDEV<<10 + cmd) }

// uverbsDriverID asks the kernel, over RDMA netlink as libibverbs does
// when it matches a provider, for the uverbs driver id of device dev: the
// id an ioctl on its command fd must carry. The device list is dumped for
// dev's index, then the uverbs char device of that index is asked for.
func uverbsDriverID(dev string) (uint32, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_RDMA)
	if err != nil {
		return 0, fmt.Errorf("open an rdma netlink socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("bind an rdma netlink socket: %w", err)
	}
	// The kernel always answers; the timeout is against a bug, not a wait.
	tv := unix.NsecToTimeval(int64(5 * time.Second))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return 0, fmt.Errorf("set an rdma netlink socket's timeout: %w", err)
	}
	index, found := uint64(0), false
	err = nlAsk(fd, nlRequest(nldevType(C.RDMA_NLDEV_CMD_GET), unix.NLM_F_DUMP, 1, nil), 1, func(a map[uint16][]byte) {
		if nlString(a[C.RDMA_NLDEV_ATTR_DEV_NAME]) == dev {
			index, found = nlUint(a[C.RDMA_NLDEV_ATTR_DEV_INDEX])
		}
	})
	if err != nil {
		return 0, fmt.Errorf("list rdma devices over netlink: %w", err)
	}
	if !found {
		return 0, fmt.Errorf("rdma netlink lists no device %s", dev)
	}
	attrs := nlAppendAttr(nil, C.RDMA_NLDEV_ATTR_DEV_INDEX, nlU32(uint32(index)))
	attrs = nlAppendAttr(attrs, C.RDMA_NLDEV_ATTR_CHARDEV_TYPE, []byte("uverbs\x00"))
	id, have := uint64(0), false
	err = nlAsk(fd, nlRequest(nldevType(C.RDMA_NLDEV_CMD_GET_CHARDEV), 0, 2, attrs), 2, func(a map[uint16][]byte) {
		id, have = nlUint(a[C.RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID])
	})
	if err != nil {
		return 0, fmt.Errorf("ask rdma netlink for %s's uverbs device: %w", dev, err)
	}
	if !have {
		return 0, fmt.Errorf("rdma netlink gives no uverbs driver id for %s (a kernel before 5.0?)", dev)
	}
	return uint32(id), nil
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

// prefetchNeedsLocalWrite reports whether d's kernel driver prefetches
// only an MR with local write access: rxe's advise_mr (rxe_odp.c) looks
// the MR up for IB_ACCESS_LOCAL_WRITE and answers EINVAL for one without,
// whichever advice it is given. mlx5's asks write access only of
// PREFETCH_WRITE.
func (d *device) prefetchNeedsLocalWrite() bool {
	id, err := uverbsDriverID(d.name)
	return err == nil && id == C.RDMA_DRIVER_RXE
}
