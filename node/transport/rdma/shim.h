// The C side of node/transport/rdma: what cgo cannot reach (inline verbs,
// unions, nested attribute structs) and the client's hot loop.
//
// Rules of this shim:
//   - It never allocates anything Go must free except through rs_* calls,
//     and it never keeps a pointer to Go memory past the call it got it in.
//   - A failing call returns an rs_status naming the verb and its errno;
//     Go adds strerror and the hint. Nothing here prints.
//   - rs_bucket and rs_word mirror results.Bucket and node/pattern.Word
//     exactly; Go tests cross-check them on many values.
#ifndef RDMASWEEP_SHIM_H
#define RDMASWEEP_SHIM_H

#include <stdint.h>
#include <infiniband/verbs.h>

// Mirrors of results/histogram.go: SubBucketBits 7, NumBuckets (64-7+1)*128.
#define RS_SUB_BUCKET_BITS 7
#define RS_NUM_BUCKETS ((64 - RS_SUB_BUCKET_BITS + 1) << RS_SUB_BUCKET_BITS)

// RS_MAX_QD and RS_MAX_QP bound rs_run's per-slot and per-QP state.
#define RS_MAX_QD 4096
#define RS_MAX_QP 1024

typedef struct {
	const char *verb; // NULL when the call succeeded
	int err;          // errno, or a negative status of the verb
} rs_status;

// rs_device_list is ibv_get_device_list, compiled with the static providers.
struct ibv_device **rs_device_list(int *n);

rs_status rs_query_device(struct ibv_context *ctx, struct ibv_device_attr_ex *attr);
rs_status rs_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
// rs_query_gid_table fills up to max entries; *n is how many it filled.
rs_status rs_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries, int max, int *n);
rs_status rs_query_gid(struct ibv_context *ctx, uint8_t port, int index, struct ibv_gid_entry *entry);

rs_status rs_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access, struct ibv_mr **mr);
// rs_advise_prefetch prefetches len bytes of mr from off (at most 4 GiB - 1:
// one SGE; the Go side splits the region).
rs_status rs_advise_prefetch(struct ibv_pd *pd, struct ibv_mr *mr, uint64_t off, uint32_t len);
// rs_advise_prefetch_kernel is the same prefetch asked of the kernel's
// uverbs ioctl directly, for a provider that has no advise_mr although
// the kernel's driver does (rdma-core 44's rxe on kernel 7.x). driver_id
// is the device's uverbs driver id (enum rdma_driver_id).
rs_status rs_advise_prefetch_kernel(struct ibv_pd *pd, struct ibv_mr *mr, uint64_t off, uint32_t len,
				    uint32_t driver_id);
// rs_async_wait waits up to timeout_ms for one async event of ctx (its
// async fd made non-blocking): 1 with the event's type and, for a port
// event, its port (else 0); 0 for none; -1 with errno on failure. The
// event is acknowledged before it returns.
int rs_async_wait(struct ibv_context *ctx, int timeout_ms, int *type, int *port);

// rs_fabric is what a fabric may need set on a QP; perftest's values are
// the defaults (see transport.DefaultFabric).
typedef struct {
	int traffic_class, sl, pkey_index, timeout, retry_cnt, rnr_retry, min_rnr_timer;
} rs_fabric;

// rs_create_cq creates a CQ of depth entries.
rs_status rs_create_cq(struct ibv_context *ctx, int depth, struct ibv_cq **cq);

// rs_create_qps creates n RC QPs sharing cq, each with send_depth send
// WRs, and moves each QP to INIT on port with the given remote access
// flags and f's pkey_index. On failure the QPs made are destroyed (not cq).
rs_status rs_create_qps(struct ibv_pd *pd, uint8_t port, int n, int send_depth, int access,
			const rs_fabric *f, struct ibv_cq *cq, struct ibv_qp **qps);
void rs_destroy_qps(struct ibv_cq *cq, struct ibv_qp **qps, int n);
uint32_t rs_qp_num(struct ibv_qp *qp);

typedef struct {
	uint32_t qpn, psn;
	uint16_t lid;
	uint8_t gid[16];
	int is_global; // route by GID (RoCE, routed IB), not LID alone
	int sgid_index;
	int hop_limit;
	int mtu; // enum ibv_mtu: the path MTU, min of both sides
	int max_dest_rd_atomic;
} rs_remote;

// rs_connect moves qp INIT → RTR → RTS with f's attributes. *stage
// reports which step failed: 1 RTR, 2 RTS.
rs_status rs_connect(struct ibv_qp *qp, uint8_t port, const rs_remote *r, uint32_t my_psn,
		     int max_rd_atomic, const rs_fabric *f, int *stage);

// rs_qp_info is what ibv_query_qp says of a connected QP.
typedef struct {
	int max_rd_atomic, max_dest_rd_atomic, path_mtu, max_send_wr, is_global;
	int sgid_index; // the GID the QP sends from, when is_global
	rs_fabric f;
} rs_qp_info;
rs_status rs_query_qp(struct ibv_qp *qp, rs_qp_info *out);

// rs_alloc_buf maps len bytes of anonymous, page-aligned memory.
void *rs_alloc_buf(size_t len);
void rs_free_buf(void *p, size_t len);

uint64_t rs_word(uint64_t seed, uint64_t index);
int rs_bucket(uint64_t ns);
// rs_check mirrors pattern.Check: 1 if buf holds the pattern at off,
// else 0 with *bad the first differing absolute offset.
int rs_check(const uint8_t *buf, size_t len, uint64_t off, uint64_t seed, int64_t *bad);

// Outcome of rs_run.
enum {
	RS_OK = 0,
	RS_WC_ERROR = 1,   // a completion failed: wc_status, vendor_err
	RS_MISMATCH = 2,   // verify found bad_offset
	RS_CANCELLED = 3,  // *cancel was set
	RS_POST_ERROR = 4, // ibv_post_send / ibv_poll_cq failed: verb, errnum
	RS_STALLED = 5,    // nothing completed for stall_ns
};

// rs_gate is a pipelined server's announcements as the client's Go side
// receives them: each memory region's rkey and address (byte off of
// region i is at raddrs[i] + off: the mapping's address, or under io
// direct where its buffer places the file), and ready, the bytes from
// the region's start that are announced. Go writes a region's rkey and
// address before it stores ready past it (an atomic store); the loop
// loads ready with acquire before it reads them.
//
// With a window (the server deregisters each memory region once read),
// left holds each region's READs not yet completed, set by Go before the
// run, and the loop stores read, the regions from the first whose READs
// have all completed (release), for Go to release to the server. Fences
// then READ the region of their QP's last READ, which is not released
// before the fence completes, never region 0.
typedef struct {
	uint64_t ready;
	uint64_t *raddrs;
	uint32_t *rkeys;
	uint32_t *left; // NULL without a window
	int64_t nregions;
	int64_t read;
} rs_gate;

typedef struct {
	struct ibv_qp **qps;
	int nqp; // slot i uses qps[i % nqp]; each QP's send queue holds its slots + 1
	struct ibv_cq *cq;
	uint8_t *buf; // qd slots of bs bytes, registered with lkey
	uint32_t lkey;
	uint64_t raddr;
	const uint32_t *rkeys; // rkey i covers [i × mr_size, (i+1) × mr_size) from raddr
	uint64_t mr_size;      // no READ spans two: bs divides it
	uint32_t bs;
	int qd;     // total reads in flight
	int per_qp; // slots per QP, as results.DepthPerQP resolved it for qd and nqp
	int cq_mod; // signal every cq_mod-th READ per QP, as results.CQModeration resolved it
	            // (a QP with fewer slots than that signals once per its slots)
	int64_t nblocks;
	const int64_t *perm; // block order, NULL for sequential
	int64_t start;       // read index to begin at; later passes wrap
	uint64_t warmup_ns;  // read for this long first, unmeasured
	int64_t count;       // reads to measure, or 0 to measure for duration_ns
	uint64_t duration_ns;
	int verify; // also during warmup
	uint64_t seed;
	uint64_t *hist; // RS_NUM_BUCKETS counts, added to
	volatile int *cancel;
	uint64_t stall_ns;
	uint64_t interval_ns;    // count the measured reads per interval (0: don't)
	int64_t intervals_hint;  // how many intervals to make room for up front
	// An open loop (open != 0) replaces count, duration_ns and warmup_ns:
	// warm_reads then reads, each phase on its own rs_sched of per_read_ns,
	// poisson and arrival_seed (node/workload.Schedule's). Every READ is
	// signalled, and resp_hist (RS_NUM_BUCKETS counts) gets each measured
	// read's response latency, from its due time to its completion.
	int open;
	double per_read_ns;
	int poisson;
	uint64_t arrival_seed;
	int64_t warm_reads, reads;
	uint64_t *resp_hist;
	// gate, when set, holds each READ back until its block is announced
	// (a pipelined server), and replaces raddr and rkeys.
	rs_gate *gate;
} rs_run_args;

typedef struct {
	int status;
	int64_t reads, bytes; // measured phase only
	uint64_t seconds_ns;  // first measured read issued to last completed
	uint64_t lat_sum, lat_max;
	int64_t lat_n; // reads timed: the signalled ones
	int64_t next; // read index after the last one issued
	int wc_status, vendor_err, wc_qp;
	const char *verb;
	int errnum;
	int64_t bad_offset;
	uint64_t start_unix_ns; // CLOCK_REALTIME when the measured phase began
	// With interval_ns: the reads completed in each interval of the
	// measured phase (see rs_series), nintervals of them, up to the last
	// completion's. Allocated by rs_run; rs_run_free releases them.
	int64_t *intervals;
	int64_t nintervals;
	int intervals_failed; // the series outgrew memory: counting stopped
	// An open loop's measured phase: the reads due, those held back (due
	// while qd reads were in flight), and the response latencies' sum,
	// count and maximum beside resp_hist's counts.
	int64_t due, held_back;
	uint64_t resp_sum, resp_max;
	int64_t resp_n;
	// The first and the last completion of the run, warmup included
	// (CLOCK_MONOTONIC ns, when polled).
	uint64_t first_done_ns, last_done_ns;
	// idle_ns is the measured phase's time the loop had nothing to do:
	// from the first empty poll after a completion (or a wait for a
	// pipelined server's next region) to the next completion. The rest
	// of seconds_ns is work: verifying, posting, reaping.
	uint64_t idle_ns;
} rs_run_out;

// rs_sched mirrors node/workload.Schedule: the due times, from a phase's
// start, of n reads per_read_ns apart (fixed) or of a Poisson process
// conditioned on its n arrivals and span (poisson, seeded by seed). Go
// tests cross-check it against Schedule.Next.
typedef struct {
	int64_t n, i;
	double per_read_ns, scale, sum;
	int poisson;
	uint64_t seed;
} rs_sched;
void rs_sched_init(rs_sched *s, int64_t n, double per_read_ns, int poisson, uint64_t seed);
// rs_sched_next is the next read's due time in ns from the start; 0 when
// every read has had its time (check s->i < s->n first).
uint64_t rs_sched_next(rs_sched *s);

// rs_run is the client's hot loop: the warmup phase, a drain, then the
// measured phase, all in one call. It keeps qd reads in flight, polls
// completions in batches, times each signalled read from just before its
// ibv_post_send to the poll that found it, and checks every read when
// verify is on, keeping the first mismatch. It returns with nothing in
// flight unless a QP failed. An open loop (a->open) posts each read at or
// after its due time, never early, while fewer than qd are in flight.
void rs_run(const rs_run_args *a, rs_run_out *o);
// rs_run_free releases what rs_run allocated in o.
void rs_run_free(rs_run_out *o);

// rs_series counts reads per interval of a phase: counts[i] holds those
// completed in [start + i*interval, start + (i+1)*interval), by the
// time their completion was polled. rs_run makes the completion time's
// interval current once per poll batch (rs_series_at, only when the batch
// crossed end), and each read completed adds one to *cur, so moderated
// reads count where the completion that covers them was polled. counts
// starts with room for the hint and doubles, zeroed, when a later
// interval needs it.
typedef struct {
	uint64_t start, interval, end; // end: where the current interval ends
	int64_t *counts, cap, len;     // len: intervals up to the current one
	int64_t *cur;                  // &counts[len-1]
} rs_series;
// rs_series_init starts a series at start with interval 0 current: 0, or
// -1 when out of memory.
int rs_series_init(rs_series *s, uint64_t start, uint64_t interval, int64_t hint);
// rs_series_at makes the interval holding t (>= start, and never earlier
// than a t before) current: 0, or -1 when out of memory.
int rs_series_at(rs_series *s, uint64_t t);
void rs_series_free(rs_series *s);

// rdma_cm (connect: cm). These wrap what the Go side cannot reach and
// keep its event handling in one place: rs_cm_wait polls the channel's fd
// for up to timeout_ms, so Go can look at its context between calls.
#include <rdma/rdma_cma.h>

typedef struct {
	int event; // enum rdma_cm_event_type, or -1 when nothing came in time
	int status;
	struct rdma_cm_id *id; // for a connect request: the new id
	uint8_t private_data[56];
	int private_data_len;
	int initiator_depth, responder_resources; // of a connect request
} rs_cm_event;

rs_status rs_cm_channel(struct rdma_event_channel **ch);
void rs_cm_destroy_channel(struct rdma_event_channel *ch);
rs_status rs_cm_create_id(struct rdma_event_channel *ch, struct rdma_cm_id **id);
// rs_cm_listen binds id to ip:port (port 0: any) and listens; *port is
// the port bound.
rs_status rs_cm_listen(struct rdma_cm_id *id, const char *ip, int port, int *bound);
rs_status rs_cm_resolve_addr(struct rdma_cm_id *id, const char *src, const char *dst, int port, int timeout_ms);
rs_status rs_cm_resolve_route(struct rdma_cm_id *id, int timeout_ms);
rs_status rs_cm_wait(struct rdma_event_channel *ch, int timeout_ms, rs_cm_event *ev);
// rs_cm_set_options sets the ToS (traffic class) and ACK timeout on id. A
// tos < 0 leaves the ToS unset, so rdma_cm uses the port's
// default_roce_tos (configfs) as the administrator set it.
rs_status rs_cm_set_options(struct rdma_cm_id *id, int tos, int timeout);
rs_status rs_cm_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_cq *cq, int send_depth, struct ibv_qp **qp);
rs_status rs_cm_connect(struct rdma_cm_id *id, const void *pdata, int plen, int initiator_depth,
			int responder_resources, int retry_cnt, int rnr_retry);
rs_status rs_cm_accept(struct rdma_cm_id *id, int responder_resources, int rnr_retry);
void rs_cm_reject(struct rdma_cm_id *id);
// rs_cm_destroy disconnects id, destroys its QP (if any), then id.
void rs_cm_destroy(struct rdma_cm_id *id);
struct ibv_context *rs_cm_verbs(struct rdma_cm_id *id);
uint8_t rs_cm_port(struct rdma_cm_id *id);

#endif
