//go:build rdma

// See shim.h for the rules of this file. The hot loop (rs_run) is written
// for the CPU cost per READ: one clock read per poll batch, one post per QP
// per batch (a chain of WRs), no allocation, no call back into Go.

#include "shim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static rs_status ok(void) { return (rs_status){NULL, 0}; }
static rs_status fail(const char *verb, int err) { return (rs_status){verb, err ? err : EIO}; }

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

rs_status rs_advise_prefetch(struct ibv_pd *pd, struct ibv_mr *mr) {
	struct ibv_sge sge = {.addr = (uintptr_t)mr->addr, .length = (uint32_t)mr->length, .lkey = mr->lkey};
	// A region over 4 GiB is prefetched as far as one SGE reaches; the rest
	// faults on demand, which is what odp measures anyway.
	if (mr->length > UINT32_MAX)
		sge.length = UINT32_MAX;
	int rc = ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1);
	return rc ? fail("ibv_advise_mr", rc) : ok();
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

rs_status rs_create_qps(struct ibv_context *ctx, struct ibv_pd *pd, uint8_t port, int n,
			int send_depth, int cq_depth, int access, struct ibv_cq **cq,
			struct ibv_qp **qps) {
	memset(qps, 0, sizeof(*qps) * n);
	errno = 0;
	*cq = ibv_create_cq(ctx, cq_depth, NULL, NULL, 0);
	if (!*cq)
		return fail("ibv_create_cq", errno);
	for (int i = 0; i < n; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = *cq,
			.recv_cq = *cq,
			.qp_type = IBV_QPT_RC,
			.sq_sig_all = 0,
			.cap = {.max_send_wr = send_depth, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
		};
		errno = 0;
		qps[i] = ibv_create_qp(pd, &ia);
		if (!qps[i]) {
			int e = errno;
			rs_destroy_qps(*cq, qps, n);
			*cq = NULL;
			return fail("ibv_create_qp", e);
		}
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_INIT,
			.pkey_index = 0,
			.port_num = port,
			.qp_access_flags = access,
		};
		int rc = ibv_modify_qp(qps[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
		if (rc) {
			rs_destroy_qps(*cq, qps, n);
			*cq = NULL;
			return fail("ibv_modify_qp(INIT)", rc);
		}
	}
	return ok();
}

uint32_t rs_qp_num(struct ibv_qp *qp) { return qp->qp_num; }

rs_status rs_connect(struct ibv_qp *qp, uint8_t port, const rs_remote *r, uint32_t my_psn,
		     int max_rd_atomic, int *stage) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = (enum ibv_mtu)r->mtu;
	a.dest_qp_num = r->qpn;
	a.rq_psn = r->psn;
	a.max_dest_rd_atomic = r->max_dest_rd_atomic;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = r->lid;
	a.ah_attr.sl = 0;
	a.ah_attr.src_path_bits = 0;
	a.ah_attr.port_num = port;
	if (r->is_global) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, r->gid, 16);
		a.ah_attr.grh.sgid_index = r->sgid_index;
		a.ah_attr.grh.hop_limit = r->hop_limit;
		a.ah_attr.grh.flow_label = 0;
		a.ah_attr.grh.traffic_class = 0;
	}
	*stage = 1;
	int rc = ibv_modify_qp(qp, &a,
			       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		return fail("ibv_modify_qp(RTR)", rc);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
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

void *rs_alloc_buf(size_t len) {
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void rs_free_buf(void *p, size_t len) {
	if (p)
		munmap(p, len);
}

uint64_t rs_word(uint64_t seed, uint64_t index) {
	uint64_t z = seed + (index + 1) * 0x9E3779B97F4A7C15ULL;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

int rs_bucket(uint64_t ns) {
	const uint64_t sub = 1u << RS_SUB_BUCKET_BITS;
	if (ns < sub)
		return (int)ns;
	int e = 63 - __builtin_clzll(ns);
	int shift = e - RS_SUB_BUCKET_BITS;
	return (e - RS_SUB_BUCKET_BITS + 1) * (int)sub + (int)(ns >> shift) - (int)sub;
}

static inline uint8_t pattern_byte(uint64_t seed, uint64_t o) {
	return (uint8_t)(rs_word(seed, o / 8) >> (8 * (o % 8)));
}

int rs_check(const uint8_t *buf, size_t len, uint64_t off, uint64_t seed, int64_t *bad) {
	size_t i = 0;
	for (; i < len && (off + i) % 8 != 0; i++)
		if (buf[i] != pattern_byte(seed, off + i))
			goto mismatch;
	for (uint64_t idx = (off + i) / 8; i + 8 <= len; i += 8, idx++) {
		uint64_t w;
		memcpy(&w, buf + i, 8); // little-endian host, as pattern defines the bytes
		if (w != rs_word(seed, idx))
			break;
	}
	for (; i < len; i++)
		if (buf[i] != pattern_byte(seed, off + i))
			goto mismatch;
	return 1;
mismatch:
	*bad = (int64_t)(off + i);
	return 0;
}

static inline uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define RS_POLL_BATCH 32

typedef struct {
	const rs_run_args *a;
	rs_run_out *o;
	uint64_t issued_at[RS_MAX_QD];
	struct ibv_send_wr wr[RS_MAX_QD];
	struct ibv_sge sge[RS_MAX_QD];
	// WRs queued since the last post, chained per QP, so one batch of
	// completions costs one ibv_post_send per QP rather than one per READ.
	struct ibv_send_wr *head[RS_MAX_QP], *tail[RS_MAX_QP];
	int touched[RS_MAX_QP], ntouched;
	int64_t next; // next read index to issue
	int inflight;
} loop;

// queue_read prepares slot's WR for read index k and chains it onto its QP.
static void queue_read(loop *l, int slot, int64_t k) {
	const rs_run_args *a = l->a;
	int64_t p = k % a->nblocks;
	int64_t block = a->perm ? a->perm[p] : p;
	struct ibv_send_wr *w = &l->wr[slot];
	l->sge[slot].addr = (uintptr_t)(a->buf + (size_t)slot * a->bs);
	l->sge[slot].length = a->bs;
	l->sge[slot].lkey = a->lkey;
	w->wr_id = ((uint64_t)k << 16) | (uint64_t)slot;
	w->next = NULL;
	w->sg_list = &l->sge[slot];
	w->num_sge = 1;
	w->opcode = IBV_WR_RDMA_READ;
	w->send_flags = IBV_SEND_SIGNALED;
	w->wr.rdma.remote_addr = a->raddr + (uint64_t)block * a->bs;
	w->wr.rdma.rkey = a->rkey;
	int q = slot % a->nqp;
	if (l->tail[q]) {
		l->tail[q]->next = w;
	} else {
		l->head[q] = w;
		l->touched[l->ntouched++] = q;
	}
	l->tail[q] = w;
}

// post_chains posts every queued chain, stamping each WR's slot with t.
static int post_chains(loop *l, uint64_t t) {
	for (int i = 0; i < l->ntouched; i++) {
		int q = l->touched[i];
		struct ibv_send_wr *w = l->head[q];
		l->head[q] = l->tail[q] = NULL;
		for (struct ibv_send_wr *x = w; x; x = x->next)
			l->issued_at[x->wr_id & 0xffff] = t;
		struct ibv_send_wr *bad = NULL;
		int rc = ibv_post_send(l->a->qps[q], w, &bad);
		if (rc) {
			l->ntouched = 0;
			l->o->status = RS_POST_ERROR;
			l->o->verb = "ibv_post_send";
			l->o->errnum = rc;
			return -1;
		}
	}
	l->ntouched = 0;
	return 0;
}

// phase keeps qd reads in flight until it has issued count reads (count > 0)
// or until_ns has passed, then drains. With measure set it times reads into
// the output; verify checks each completed block.
static int phase(loop *l, int64_t count, uint64_t until_ns, int measure) {
	const rs_run_args *a = l->a;
	rs_run_out *o = l->o;
	int64_t first = l->next;
	int64_t stop = count > 0 ? first + count : INT64_MAX;
	struct ibv_wc wc[RS_POLL_BATCH];

	uint64_t t = now_ns();
	uint64_t start = t, last_done = t;
	int issuing = 1;
	unsigned idle = 0;
	for (int s = 0; s < a->qd && l->next < stop; s++)
		queue_read(l, s, l->next++), l->inflight++;
	if (post_chains(l, t))
		return -1;
	if (count <= 0 && t >= until_ns)
		issuing = 0;

	while (l->inflight > 0) {
		int n = ibv_poll_cq(a->cq, RS_POLL_BATCH, wc);
		if (n < 0) {
			o->status = RS_POST_ERROR;
			o->verb = "ibv_poll_cq";
			o->errnum = -n;
			return -1;
		}
		// rxe may complete a READ inside ibv_post_send, so a poll can find
		// work every time: look at the cancel flag on every pass, not only
		// when idle. It is one load.
		if (*a->cancel && o->status == RS_OK) {
			o->status = RS_CANCELLED;
			issuing = 0;
		}
		if (n == 0) {
			// The clock only now and then: an empty poll is the most
			// frequent path.
			if (++idle % 1024 == 0 && now_ns() - last_done > a->stall_ns) {
				o->status = RS_STALLED;
				return -1;
			}
			continue;
		}
		t = now_ns();
		last_done = t;
		if (count <= 0 && t >= until_ns)
			issuing = 0;
		for (int i = 0; i < n; i++) {
			int slot = (int)(wc[i].wr_id & 0xffff);
			int64_t k = (int64_t)(wc[i].wr_id >> 16);
			l->inflight--;
			if (wc[i].status != IBV_WC_SUCCESS) {
				o->status = RS_WC_ERROR;
				o->wc_status = wc[i].status;
				o->vendor_err = wc[i].vendor_err;
				o->wc_qp = (int)wc[i].qp_num;
				// The QP is in error now; its other WRs flush, so stop here.
				return -1;
			}
			if (a->verify) {
				int64_t p = k % a->nblocks;
				int64_t block = a->perm ? a->perm[p] : p;
				int64_t bad;
				if (!rs_check(a->buf + (size_t)slot * a->bs, a->bs, (uint64_t)block * a->bs, a->seed, &bad)) {
					o->status = RS_MISMATCH;
					o->bad_offset = bad;
					issuing = 0;
				}
			}
			if (measure) {
				uint64_t lat = t - l->issued_at[slot];
				a->hist[rs_bucket(lat)]++;
				o->lat_sum += lat;
				if (lat > o->lat_max)
					o->lat_max = lat;
				o->reads++;
				o->bytes += a->bs;
			}
			if (issuing && l->next < stop && o->status == RS_OK) {
				queue_read(l, slot, l->next++);
				l->inflight++;
			}
		}
		if (post_chains(l, t))
			return -1;
	}
	if (measure)
		o->seconds_ns = last_done - start;
	return o->status == RS_OK ? 0 : -1;
}

void rs_run(const rs_run_args *a, rs_run_out *o) {
	memset(o, 0, sizeof(*o));
	o->next = a->start;
	if (a->qd > RS_MAX_QD || a->qd < 1 || a->nqp < 1 || a->nqp > RS_MAX_QP || a->nblocks < 1) {
		o->status = RS_POST_ERROR;
		o->verb = "rs_run";
		o->errnum = EINVAL;
		return;
	}
	loop *l = calloc(1, sizeof(loop));
	if (!l) {
		o->status = RS_POST_ERROR;
		o->verb = "calloc";
		o->errnum = ENOMEM;
		return;
	}
	l->a = a;
	l->o = o;
	l->next = a->start;
	if (a->warmup_ns == 0 || phase(l, 0, now_ns() + a->warmup_ns, 0) == 0) {
		if (a->count > 0)
			phase(l, a->count, 0, 1);
		else
			phase(l, 0, now_ns() + a->duration_ns, 1);
	}
	o->next = l->next;
	free(l);
}
