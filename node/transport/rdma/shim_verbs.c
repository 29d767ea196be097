//go:build rdma

// The verbs wrappers: devices, ports and GIDs, memory regions and their
// prefetch, async events, and the RC queue pairs connected over TCP, from
// INIT to RTS. See shim.h for the rules of the shim.

#include "shim_impl.h"

// ibv_get_device_list is a macro that, with RDMA_STATIC_PROVIDERS defined
// (see rdma.go's cgo CFLAGS), references every provider so a static link
// pulls them in. Without it a static node finds no devices at all.
struct ibv_device **rs_device_list(int *n) { return ibv_get_device_list(n); }

rs_status rs_query_device(struct ibv_context *ctx, struct ibv_device_attr_ex *attr) {
	memset(attr, 0, sizeof(*attr));
	int rc = ibv_query_device_ex(ctx, NULL, attr);
	return rc ? fail("ibv_query_device_ex", rc) : ok();
}

rs_status rs_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr) {
	memset(attr, 0, sizeof(*attr));
	int rc = ibv_query_port(ctx, port, attr);
	return rc ? fail("ibv_query_port", rc) : ok();
}

rs_status rs_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries, int max, int *n) {
	ssize_t rc = ibv_query_gid_table(ctx, entries, max, 0);
	if (rc < 0) {
		*n = 0;
		return fail("ibv_query_gid_table", (int)-rc);
	}
	*n = (int)rc;
	return ok();
}

rs_status rs_query_gid(struct ibv_context *ctx, uint8_t port, int index, struct ibv_gid_entry *entry) {
	memset(entry, 0, sizeof(*entry));
	int rc = ibv_query_gid_ex(ctx, port, index, entry, 0);
	return rc ? fail("ibv_query_gid_ex", rc) : ok();
}

rs_status rs_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access, struct ibv_mr **mr) {
	errno = 0;
	*mr = ibv_reg_mr(pd, addr, len, access);
	return *mr ? ok() : fail("ibv_reg_mr", errno);
}

rs_status rs_advise_prefetch(struct ibv_pd *pd, struct ibv_mr *mr, uint64_t off, uint32_t len) {
	struct ibv_sge sge = {.addr = (uintptr_t)mr->addr + off, .length = len, .lkey = mr->lkey};
	int rc = ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1);
	return rc ? fail("ibv_advise_mr", rc) : ok();
}

// rs_advise_prefetch_kernel is what rdma-core's ibv_cmd_advise_mr does
// (mlx5's advise_mr), built from the kernel's uAPI headers alone: the
// method ADVISE_MR of the MR object, with its four attributes, on the
// context's command fd. Every attribute is mandatory; the SGE list, over
// 8 bytes, goes by pointer; driver_id must be the device's, or the kernel
// answers EINVAL before looking at the method.
rs_status rs_advise_prefetch_kernel(struct ibv_pd *pd, struct ibv_mr *mr, uint64_t off, uint32_t len,
				    uint32_t driver_id) {
	struct ib_uverbs_sge sge = {.addr = (uintptr_t)mr->addr + off, .length = len, .lkey = mr->lkey};
	enum { nattrs = 4 };
	uint64_t buf[(sizeof(struct ib_uverbs_ioctl_hdr) + nattrs * sizeof(struct ib_uverbs_attr)) / sizeof(uint64_t)];
	memset(buf, 0, sizeof(buf));
	struct ib_uverbs_ioctl_hdr *hdr = (struct ib_uverbs_ioctl_hdr *)buf;
	hdr->length = sizeof(buf);
	hdr->object_id = UVERBS_OBJECT_MR;
	hdr->method_id = UVERBS_METHOD_ADVISE_MR;
	hdr->num_attrs = nattrs;
	hdr->driver_id = driver_id;
	struct ib_uverbs_attr *a = hdr->attrs;
	uint32_t flags = IB_UVERBS_ADVISE_MR_FLAG_FLUSH; // synchronous, so the time is the prefetch's
	a[0] = (struct ib_uverbs_attr){.attr_id = UVERBS_ATTR_ADVISE_MR_PD_HANDLE, .flags = UVERBS_ATTR_F_MANDATORY,
				       .data = pd->handle};
	a[1] = (struct ib_uverbs_attr){.attr_id = UVERBS_ATTR_ADVISE_MR_ADVICE, .len = sizeof(uint64_t),
				       .flags = UVERBS_ATTR_F_MANDATORY, .data = IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH};
	a[2] = (struct ib_uverbs_attr){.attr_id = UVERBS_ATTR_ADVISE_MR_FLAGS, .len = sizeof(flags),
				       .flags = UVERBS_ATTR_F_MANDATORY};
	memcpy(&a[2].data, &flags, sizeof(flags));
	a[3] = (struct ib_uverbs_attr){.attr_id = UVERBS_ATTR_ADVISE_MR_SGE_LIST, .len = sizeof(sge),
				       .flags = UVERBS_ATTR_F_MANDATORY, .data = (uintptr_t)&sge};
	if (ioctl(pd->context->cmd_fd, RDMA_VERBS_IOCTL, hdr))
		return fail("ibv_advise_mr (the kernel's uverbs ioctl)", errno);
	return ok();
}

int rs_async_wait(struct ibv_context *ctx, int timeout_ms, int *type, int *port) {
	int fl = fcntl(ctx->async_fd, F_GETFL);
	if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) < 0))
		return -1;
	struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};
	int rc = poll(&p, 1, timeout_ms);
	if (rc < 0)
		return errno == EINTR ? 0 : -1;
	if (rc == 0)
		return 0;
	struct ibv_async_event ev;
	if (ibv_get_async_event(ctx, &ev))
		return errno == EAGAIN ? 0 : -1;
	*type = ev.event_type;
	*port = 0;
	switch (ev.event_type) {
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		*port = ev.element.port_num;
		break;
	default:
		break;
	}
	ibv_ack_async_event(&ev);
	return 1;
}

void rs_destroy_qps(struct ibv_cq *cq, struct ibv_qp **qps, int n) {
	for (int i = 0; i < n; i++)
		if (qps[i]) {
			ibv_destroy_qp(qps[i]);
			qps[i] = NULL;
		}
	if (cq)
		ibv_destroy_cq(cq);
}

rs_status rs_create_cq(struct ibv_context *ctx, int depth, struct ibv_cq **cq) {
	errno = 0;
	*cq = ibv_create_cq(ctx, depth, NULL, NULL, 0);
	return *cq ? ok() : fail("ibv_create_cq", errno);
}

rs_status rs_create_qps(struct ibv_pd *pd, uint8_t port, int n, int send_depth, int access,
			const rs_fabric *f, struct ibv_cq *cq, struct ibv_qp **qps) {
	memset(qps, 0, sizeof(*qps) * n);
	for (int i = 0; i < n; i++) {
		struct ibv_qp_init_attr ia = rc_init_attr(cq, send_depth);
		errno = 0;
		qps[i] = ibv_create_qp(pd, &ia);
		if (!qps[i]) {
			int e = errno;
			rs_destroy_qps(NULL, qps, n);
			return fail("ibv_create_qp", e);
		}
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_INIT,
			.pkey_index = f->pkey_index,
			.port_num = port,
			.qp_access_flags = access,
		};
		int rc = ibv_modify_qp(qps[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
		if (rc) {
			rs_destroy_qps(NULL, qps, n);
			return fail("ibv_modify_qp(INIT)", rc);
		}
	}
	return ok();
}

uint32_t rs_qp_num(struct ibv_qp *qp) { return qp->qp_num; }

rs_status rs_connect(struct ibv_qp *qp, uint8_t port, const rs_remote *r, uint32_t my_psn,
		     int max_rd_atomic, const rs_fabric *f, int *stage) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = (enum ibv_mtu)r->mtu;
	a.dest_qp_num = r->qpn;
	a.rq_psn = r->psn;
	a.max_dest_rd_atomic = r->max_dest_rd_atomic;
	a.min_rnr_timer = f->min_rnr_timer;
	a.ah_attr.dlid = r->lid;
	a.ah_attr.sl = f->sl;
	a.ah_attr.src_path_bits = 0;
	a.ah_attr.port_num = port;
	if (r->is_global) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, r->gid, 16);
		a.ah_attr.grh.sgid_index = r->sgid_index;
		a.ah_attr.grh.hop_limit = r->hop_limit;
		a.ah_attr.grh.flow_label = 0;
		a.ah_attr.grh.traffic_class = f->traffic_class < 0 ? 0 : f->traffic_class; // unset: the default, 0
	}
	*stage = 1;
	int rc = ibv_modify_qp(qp, &a,
			       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		return fail("ibv_modify_qp(RTR)", rc);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = f->timeout;
	a.retry_cnt = f->retry_cnt;
	a.rnr_retry = f->rnr_retry;
	a.sq_psn = my_psn;
	a.max_rd_atomic = max_rd_atomic;
	*stage = 2;
	rc = ibv_modify_qp(qp, &a,
			   IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				   IBV_QP_MAX_QP_RD_ATOMIC);
	if (rc)
		return fail("ibv_modify_qp(RTS)", rc);
	*stage = 0;
	return ok();
}

rs_status rs_query_qp(struct ibv_qp *qp, rs_qp_info *out) {
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	memset(&a, 0, sizeof(a));
	memset(out, 0, sizeof(*out));
	int rc = ibv_query_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				      IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_PKEY_INDEX | IBV_QP_CAP,
			      &ia);
	if (rc)
		return fail("ibv_query_qp", rc);
	out->max_rd_atomic = a.max_rd_atomic;
	out->max_dest_rd_atomic = a.max_dest_rd_atomic;
	out->path_mtu = a.path_mtu;
	out->max_send_wr = (int)a.cap.max_send_wr;
	out->is_global = a.ah_attr.is_global;
	out->sgid_index = a.ah_attr.grh.sgid_index;
	out->f.traffic_class = a.ah_attr.grh.traffic_class;
	out->f.sl = a.ah_attr.sl;
	out->f.pkey_index = a.pkey_index;
	out->f.timeout = a.timeout;
	out->f.retry_cnt = a.retry_cnt;
	out->f.rnr_retry = a.rnr_retry;
	out->f.min_rnr_timer = a.min_rnr_timer;
	return ok();
}

void *rs_alloc_buf(size_t len) {
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void rs_free_buf(void *p, size_t len) {
	if (p)
		munmap(p, len);
}
