//go:build rdma

package rdma

// The queue pairs both roles make and connect: a CQ and its RC QPs
// (qpSet), their endpoint for the exchange, and the walk from INIT to RTS
// against the peer's endpoint, with the fabric's attributes.

// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"rdmasweep/node/transport"
	"rdmasweep/results"
)

// fabricOf is r's fabric attributes, or the defaults.
func fabricOf(r transport.RDMA) transport.Fabric {
	if r.Fabric != nil {
		return *r.Fabric
	}
	return transport.DefaultFabric()
}

func cFabric(f transport.Fabric) C.rs_fabric {
	return C.rs_fabric{traffic_class: C.int(f.TrafficClass), sl: C.int(f.ServiceLevel), pkey_index: C.int(f.PKeyIndex),
		timeout: C.int(f.Timeout), retry_cnt: C.int(f.RetryCnt), rnr_retry: C.int(f.RNRRetry), min_rnr_timer: C.int(f.MinRNRTimer)}
}

// connectMode returns whether r asks for connect cm.
func connectMode(r transport.RDMA) (bool, error) {
	switch r.Connect {
	case "", results.ConnectTCP:
		return false, nil
	case "cm":
		return true, nil
	}
	return false, fmt.Errorf("rdma connect %q (want tcp or cm)", r.Connect)
}

// qpSet is a CQ and the RC QPs that share it.
type qpSet struct {
	cq  *C.struct_ibv_cq
	qps []*C.struct_ibv_qp // C memory, so C may keep the array
	arr **C.struct_ibv_qp
	// ids are the rdma_cm ids of connect cm QPs (nil for tcp): each owns
	// its QP, which rs_cm_destroy destroys with it.
	ids []*C.struct_rdma_cm_id
}

// newQPSet makes an empty set of n QPs around cq, for rdma_cm to fill.
func newQPSet(n int, cq *C.struct_ibv_cq) *qpSet {
	arr := (**C.struct_ibv_qp)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0)))))
	return &qpSet{arr: arr, qps: unsafe.Slice(arr, n), cq: cq, ids: make([]*C.struct_rdma_cm_id, n)}
}

func createQPs(d *device, n, sendDepth, cqDepth int, access C.int, f transport.Fabric) (*qpSet, error) {
	arr := (**C.struct_ibv_qp)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0)))))
	q := &qpSet{arr: arr, qps: unsafe.Slice(arr, n)}
	hint := "the device may allow fewer QPs or a shallower queue: lower qps or queue_depth"
	if err := verbErr(C.rs_create_cq(d.ctx, C.int(cqDepth), &q.cq), hint); err != nil {
		C.free(unsafe.Pointer(arr))
		return nil, err
	}
	cf := cFabric(f)
	if err := verbErr(C.rs_create_qps(d.pd, C.uint8_t(d.port), C.int(n), C.int(sendDepth), access, &cf, q.cq, arr), hint); err != nil {
		C.rs_destroy_qps(q.cq, arr, 0)
		C.free(unsafe.Pointer(arr))
		return nil, err
	}
	return q, nil
}

func (q *qpSet) destroy() {
	if q == nil || q.arr == nil {
		return
	}
	if q.ids != nil {
		for i, id := range q.ids {
			C.rs_cm_destroy(id) // disconnects, destroys its QP
			q.ids[i], q.qps[i] = nil, nil
		}
	}
	C.rs_destroy_qps(q.cq, q.arr, C.int(len(q.qps)))
	C.free(unsafe.Pointer(q.arr))
	q.arr, q.qps, q.cq = nil, nil, nil
}

func randomPSN() uint32 {
	var b [4]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:]) & 0xffffff
}

// localEndpoint returns d's endpoint for qps, with fresh PSNs.
func localEndpoint(d *device, gid GID, q *qpSet) endpoint {
	e := endpoint{LID: uint16(d.pattr.lid), GID: gidRaw(gid), MTU: uint8(d.pattr.active_mtu), MaxDestRdAtomic: uint8(d.maxRdAtom())}
	for _, qp := range q.qps {
		e.QPs = append(e.QPs, qpAddr{QPN: uint32(C.rs_qp_num(qp)), PSN: randomPSN()})
	}
	return e
}

// connect moves every QP of q to RTS against the peer's endpoint.
func connect(d *device, gid GID, grh bool, q *qpSet, ours, theirs endpoint, maxRdAtomic int, f transport.Fabric) error {
	mtu := min(ours.MTU, theirs.MTU)
	cf := cFabric(f)
	for i, qp := range q.qps {
		r := C.rs_remote{
			qpn: C.uint32_t(theirs.QPs[i].QPN), psn: C.uint32_t(theirs.QPs[i].PSN), lid: C.uint16_t(theirs.LID),
			sgid_index: C.int(gid.Index), hop_limit: 64, mtu: C.int(mtu),
			max_dest_rd_atomic: C.int(d.maxRdAtom()),
		}
		if grh {
			r.is_global = 1
		}
		for j, b := range theirs.GID {
			r.gid[j] = C.uint8_t(b)
		}
		if grh && theirs.GID == ([16]byte{}) {
			return errors.New("the peer sent an empty GID, and its QPs must be reached by GID (RoCE, or gid_index given on InfiniBand); hint: set gid_index on the peer")
		}
		var stage C.int
		st := C.rs_connect(qp, C.uint8_t(d.port), &r, C.uint32_t(ours.QPs[i].PSN), C.int(maxRdAtomic), &cf, &stage)
		if st.verb != nil {
			hint := ""
			if stage == 1 {
				hint = fmt.Sprintf("RTR failing usually means a wrong address handle: check gid_index (%d used on %s port %d; `node devices` lists them), the MTU (path MTU %d bytes, the smaller of ours %d and the peer's %d), service_level %d and traffic_class %d",
					gid.Index, d.name, d.port, mtuBytes(int(mtu)), mtuBytes(int(ours.MTU)), mtuBytes(int(theirs.MTU)), f.ServiceLevel, f.TrafficClass)
			} else {
				hint = fmt.Sprintf("RTS with max_rd_atomic %d, timeout %d, retry_cnt %d, rnr_retry %d: the device allows max_rd_atomic up to %d", maxRdAtomic, f.Timeout, f.RetryCnt, f.RNRRetry, d.maxInitRdAtom())
			}
			return fmt.Errorf("connect %s: %w", qpName(i, len(q.qps), uint32(C.rs_qp_num(qp))), verbErr(st, hint))
		}
	}
	return nil
}
