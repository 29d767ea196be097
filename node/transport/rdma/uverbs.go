//go:build rdma

package rdma

// #include <rdma/ib_user_ioctl_verbs.h>
// #include <rdma/rdma_netlink.h>
import "C"

import "rdmasweep/node/rdmanl"

// rdmanl writes the kernel's netlink and driver numbers by hand, so that
// node's counters read them without cgo; each indexes a one-element
// array here at its difference from the header's, so a number that
// drifts from the installed headers fails the rdma build.
var (
	_ = [1]struct{}{}[rdmanl.NLDev-C.RDMA_NL_NLDEV]
	_ = [1]struct{}{}[rdmanl.CmdGet-C.RDMA_NLDEV_CMD_GET]
	_ = [1]struct{}{}[rdmanl.CmdPortGet-C.RDMA_NLDEV_CMD_PORT_GET]
	_ = [1]struct{}{}[rdmanl.CmdGetChardev-C.RDMA_NLDEV_CMD_GET_CHARDEV]
	_ = [1]struct{}{}[rdmanl.AttrDevIndex-C.RDMA_NLDEV_ATTR_DEV_INDEX]
	_ = [1]struct{}{}[rdmanl.AttrDevName-C.RDMA_NLDEV_ATTR_DEV_NAME]
	_ = [1]struct{}{}[rdmanl.AttrPortIndex-C.RDMA_NLDEV_ATTR_PORT_INDEX]
	_ = [1]struct{}{}[rdmanl.AttrNdevName-C.RDMA_NLDEV_ATTR_NDEV_NAME]
	_ = [1]struct{}{}[rdmanl.AttrChardevType-C.RDMA_NLDEV_ATTR_CHARDEV_TYPE]
	_ = [1]struct{}{}[rdmanl.AttrUverbsDriverID-C.RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID]
	_ = [1]struct{}{}[rdmanl.DriverMLX5-C.RDMA_DRIVER_MLX5]
	_ = [1]struct{}{}[rdmanl.DriverMLX4-C.RDMA_DRIVER_MLX4]
	_ = [1]struct{}{}[rdmanl.DriverCXGB4-C.RDMA_DRIVER_CXGB4]
	_ = [1]struct{}{}[rdmanl.DriverBNXTRE-C.RDMA_DRIVER_BNXT_RE]
	_ = [1]struct{}{}[rdmanl.DriverIRDMA-C.RDMA_DRIVER_IRDMA]
	_ = [1]struct{}{}[rdmanl.DriverQEDR-C.RDMA_DRIVER_QEDR]
	_ = [1]struct{}{}[rdmanl.DriverHNS-C.RDMA_DRIVER_HNS]
	_ = [1]struct{}{}[rdmanl.DriverUSNIC-C.RDMA_DRIVER_USNIC]
	_ = [1]struct{}{}[rdmanl.DriverRXE-C.RDMA_DRIVER_RXE]
	_ = [1]struct{}{}[rdmanl.DriverEFA-C.RDMA_DRIVER_EFA]
	_ = [1]struct{}{}[rdmanl.DriverSIW-C.RDMA_DRIVER_SIW]
	_ = [1]struct{}{}[rdmanl.DriverERDMA-C.RDMA_DRIVER_ERDMA]
)

// prefetchNeedsLocalWrite reports whether d's kernel driver prefetches
// only an MR with local write access: rxe's advise_mr (rxe_odp.c) looks
// the MR up for IB_ACCESS_LOCAL_WRITE and answers EINVAL for one without,
// whichever advice it is given. mlx5's asks write access only of
// PREFETCH_WRITE.
func (d *device) prefetchNeedsLocalWrite() bool {
	id, err := rdmanl.UverbsDriverID(d.name)
	return err == nil && id == rdmanl.DriverRXE
}
