// shim_impl.h is what the shim's C files share and Go does not see: the
// system headers they use, how a verb's result becomes an rs_status, and
// the one RC queue pair both connect modes create. See shim.h for the
// rules of the shim.

#ifndef RDMASWEEP_SHIM_IMPL_H
#define RDMASWEEP_SHIM_IMPL_H

#include "shim.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>

#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/rdma_user_ioctl_cmds.h>

static inline rs_status ok(void) { return (rs_status){NULL, 0}; }
static inline rs_status fail(const char *verb, int err) { return (rs_status){verb, err ? err : EIO}; }

// rc_init_attr is the RC queue pair node reads with, whether verbs
// (rs_create_qps) or rdma_cm (rs_cm_create_qp) creates it: send_depth
// READs in flight, one SGE, unsignalled unless a WR asks, and a receive
// queue of one, which nothing posts to.
static inline struct ibv_qp_init_attr rc_init_attr(struct ibv_cq *cq, int send_depth) {
	return (struct ibv_qp_init_attr){
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
		.cap = {.max_send_wr = send_depth, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
	};
}

#endif
