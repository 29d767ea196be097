//go:build rdma

// The read loop (rs_run) and what it keeps: the open loop's schedule of
// due times and the interval series. It is written for the CPU cost per
// READ: one clock read per poll batch and one per post, one post per QP
// per batch (a chain of WRs), optional completion moderation, no call back
// into Go, and no allocation but the interval series' doubling when a run
// outlasts the room made for it up front. See shim.h for the rules.

#include "shim_impl.h"

static inline uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t realtime_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// sched_gap is workload.Schedule's i-th exponential gap, of mean 1.
static double sched_gap(uint64_t seed, int64_t i) {
	double u = ((double)(rs_word(seed, (uint64_t)i) >> 11) + 0.5) / 9007199254740992.0; // 2^53
	return -log(u);
}

void rs_sched_init(rs_sched *s, int64_t n, double per_read_ns, int poisson, uint64_t seed) {
	memset(s, 0, sizeof(*s));
	s->n = n;
	s->per_read_ns = per_read_ns;
	s->poisson = poisson;
	s->seed = seed;
	if (!poisson)
		return;
	double total = 0;
	for (int64_t i = 0; i < n - 1; i++)
		total += sched_gap(seed, i);
	if (total > 0)
		s->scale = (double)(n - 1) * per_read_ns / total;
}

uint64_t rs_sched_next(rs_sched *s) {
	if (s->i >= s->n)
		return 0;
	int64_t i = s->i++;
	if (!s->poisson)
		return (uint64_t)(int64_t)((double)i * s->per_read_ns);
	if (i > 0)
		s->sum += sched_gap(s->seed, i - 1);
	return (uint64_t)(int64_t)(s->sum * s->scale);
}

int rs_series_init(rs_series *s, uint64_t start, uint64_t interval, int64_t hint) {
	memset(s, 0, sizeof(*s));
	if (hint < 1)
		hint = 1;
	s->counts = calloc((size_t)hint, sizeof(int64_t));
	if (!s->counts)
		return -1;
	s->cap = hint;
	s->start = start;
	s->interval = interval;
	s->end = start + interval;
	s->len = 1;
	s->cur = s->counts;
	return 0;
}

int rs_series_at(rs_series *s, uint64_t t) {
	if (t < s->end)
		return 0;
	int64_t i = (int64_t)((t - s->start) / s->interval);
	if (i >= s->cap) {
		int64_t cap = s->cap * 2 > i ? s->cap * 2 : i + 1;
		int64_t *c = realloc(s->counts, (size_t)cap * sizeof(int64_t));
		if (!c)
			return -1;
		memset(c + s->cap, 0, (size_t)(cap - s->cap) * sizeof(int64_t));
		s->counts = c;
		s->cap = cap;
	}
	s->len = i + 1;
	s->cur = &s->counts[i];
	s->end = s->start + (uint64_t)(i + 1) * s->interval;
	return 0;
}

void rs_series_free(rs_series *s) {
	free(s->counts);
	memset(s, 0, sizeof(*s));
}

#define RS_POLL_BATCH 32
// A fence is a zero-length, signalled READ: it completes after every READ
// posted before it on its QP, so it covers unsignalled ones at the end.
#define RS_FENCE (1ull << 63)

// Per QP: its slots' READs in flight, in post order (a ring), and what
// signalling needs. A signalled completion means every earlier READ on the
// QP completed too (RC completes in order), so it frees the ring up to it.
typedef struct {
	int base, cap;   // ring[base .. base+cap) holds this QP's slots
	int head, count; // in flight, oldest first
	int mod;         // signal every mod-th READ: cq_mod, or cap when fewer
	int since_sig;   // READs posted since the last signalled one
	int fence;       // a fence is in flight
	uint64_t last_off; // the file offset of its last READ queued
	struct ibv_send_wr *chain, *tail; // queued since the last post
} qpstate;

typedef struct {
	const rs_run_args *a;
	rs_run_out *o;
	uint64_t issued_at[RS_MAX_QD]; // per slot: the post stamp of its READ
	int64_t read_of[RS_MAX_QD];    // per slot: its read index
	struct ibv_send_wr wr[RS_MAX_QD];
	struct ibv_sge sge[RS_MAX_QD];
	int ring[RS_MAX_QD + RS_MAX_QP];
	qpstate q[RS_MAX_QP];
	int touched[RS_MAX_QP], ntouched;
	struct ibv_send_wr fence_wr[RS_MAX_QP];
	int64_t next; // next read index to issue
	int inflight; // READs and fences
	int stopped;  // no more READs will be issued in this phase
	rs_series series; // the measured phase's, with interval_ns
	// An open loop's: per slot, its READ's due time; the slots free.
	uint64_t due_at[RS_MAX_QD];
	int free_slots[RS_MAX_QD], nfree;
	// With a gate: the slots whose next READ waits for its region.
	int parked[RS_MAX_QD], nparked;
} loop;

static inline void touch(loop *l, int q) {
	if (!l->q[q].chain)
		l->touched[l->ntouched++] = q;
}

// queue_read prepares slot's WR for read index k and chains it onto its QP.
static void queue_read(loop *l, int slot, int64_t k) {
	const rs_run_args *a = l->a;
	int64_t p = k % a->nblocks;
	int64_t block = a->perm ? a->perm[p] : p;
	struct ibv_send_wr *w = &l->wr[slot];
	int qi = slot % a->nqp;
	qpstate *q = &l->q[qi];
	// Unverified, the bytes are never looked at: like perftest, every
	// READ lands in one block of the buffer, so the client touches bs
	// bytes rather than qd × bs (fewer cache and TLB misses per READ).
	l->sge[slot].addr = (uintptr_t)(a->buf + (a->verify ? (size_t)slot * a->bs : 0));
	l->sge[slot].length = a->bs;
	l->sge[slot].lkey = a->lkey;
	l->read_of[slot] = k;
	w->wr_id = (uint64_t)slot;
	w->next = NULL;
	w->sg_list = &l->sge[slot];
	w->num_sge = 1;
	w->opcode = IBV_WR_RDMA_READ;
	uint64_t off = (uint64_t)block * a->bs;
	q->last_off = off;
	if (a->gate) { // gated() loaded ready with acquire: these are set
		w->wr.rdma.remote_addr = a->gate->raddrs[off / a->mr_size] + off;
		w->wr.rdma.rkey = a->gate->rkeys[off / a->mr_size];
	} else {
		w->wr.rdma.remote_addr = a->raddr + off;
		w->wr.rdma.rkey = a->rkeys[off / a->mr_size];
	}
	touch(l, qi);
	if (q->tail)
		q->tail->next = w;
	else
		q->chain = w;
	q->tail = w;
	l->ring[q->base + (q->head + q->count) % q->cap] = slot;
	q->count++;
	l->inflight++;
}

// queue_fence chains a fence onto QP qi.
static void queue_fence(loop *l, int qi) {
	qpstate *q = &l->q[qi];
	struct ibv_send_wr *w = &l->fence_wr[qi];
	memset(w, 0, sizeof(*w));
	w->wr_id = RS_FENCE | (uint64_t)qi;
	w->opcode = IBV_WR_RDMA_READ;
	w->send_flags = IBV_SEND_SIGNALED;
	// Only READs that were issued need a fence: the first region is ready.
	// Gated, it reads its QP's last READ's region: under a window region 0
	// may be gone, and that one stays until the fence has completed.
	const rs_gate *g = l->a->gate;
	w->wr.rdma.remote_addr = g ? g->raddrs[q->last_off / l->a->mr_size] + q->last_off : l->a->raddr;
	w->wr.rdma.rkey = g ? g->rkeys[q->last_off / l->a->mr_size] : l->a->rkeys[0];
	touch(l, qi);
	if (q->tail)
		q->tail->next = w;
	else
		q->chain = w;
	q->tail = w;
	q->fence = 1;
	q->since_sig = 0;
	l->inflight++;
}

// post_chains posts every queued chain. Each READ is signalled when it is
// its QP's mod-th since the last signalled one, which leaves a signalled
// READ among any mod in a row, so a QP whose slots are all in flight
// always has one to wait for. Once the phase stops issuing, a QP whose
// last READs went unsignalled gets a fence. The stamp is taken just
// before each ibv_post_send: whatever the loop did before (verifying the
// reads that freed the slots) is not in the latency.
static int post_chains(loop *l) {
	for (int i = 0; i < l->ntouched; i++) {
		int qi = l->touched[i];
		qpstate *q = &l->q[qi];
		for (struct ibv_send_wr *x = q->chain; x; x = x->next) {
			if (x->wr_id & RS_FENCE)
				continue;
			if (++q->since_sig >= q->mod) {
				x->send_flags = IBV_SEND_SIGNALED;
				q->since_sig = 0;
			} else {
				x->send_flags = 0;
			}
		}
		if (l->stopped && q->since_sig > 0 && !q->fence)
			queue_fence(l, qi);
		struct ibv_send_wr *w = q->chain;
		q->chain = q->tail = NULL;
		uint64_t t = now_ns();
		for (struct ibv_send_wr *x = w; x; x = x->next)
			if (!(x->wr_id & RS_FENCE))
				l->issued_at[x->wr_id] = t;
		struct ibv_send_wr *bad = NULL;
		int rc = ibv_post_send(l->a->qps[qi], w, &bad);
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

// stop_issuing ends the phase's issuing and fences every QP whose last
// READs went unsignalled.
static void stop_issuing(loop *l) {
	if (l->stopped)
		return;
	l->stopped = 1;
	for (int qi = 0; qi < l->a->nqp; qi++) {
		qpstate *q = &l->q[qi];
		if (q->since_sig > 0 && !q->fence && !q->chain && q->count > 0)
			queue_fence(l, qi);
	}
}

// gated reports whether read k must wait: with a gate, its block lies
// beyond the bytes the server has announced.
static inline int gated(loop *l, int64_t k) {
	const rs_run_args *a = l->a;
	if (!a->gate)
		return 0;
	int64_t p = k % a->nblocks;
	int64_t block = a->perm ? a->perm[p] : p;
	return (uint64_t)block * a->bs + a->bs > __atomic_load_n(&a->gate->ready, __ATOMIC_ACQUIRE);
}

// issue queues the next read on slot, or parks the slot while that read
// waits for its region. Reads are issued in order: once one waits, the
// slots freed after it park too.
static void issue(loop *l, int slot, int64_t stop) {
	if (l->nparked > 0 || gated(l, l->next)) {
		l->parked[l->nparked++] = slot;
		return;
	}
	queue_read(l, slot, l->next++);
	if (l->next >= stop)
		stop_issuing(l);
}

// unpark issues the parked slots' reads, in order, while their regions
// are announced.
static void unpark(loop *l, int64_t stop) {
	while (l->nparked > 0 && !l->stopped && l->next < stop && !gated(l, l->next)) {
		queue_read(l, l->parked[--l->nparked], l->next++);
		if (l->next >= stop)
			stop_issuing(l);
	}
}

// record adds a latency of ns to a histogram and its sum, count and max.
static inline void record(uint64_t *hist, uint64_t ns, uint64_t *sum, int64_t *n, uint64_t *max) {
	hist[rs_bucket(ns)]++;
	*sum += ns;
	(*n)++;
	if (ns > *max)
		*max = ns;
}

// complete retires slot's READ: verify it, count it, and issue the next.
// t is when its completion was polled; it is timed only if signalled.
static void complete(loop *l, int slot, int signalled, uint64_t t, int measure, int64_t stop) {
	const rs_run_args *a = l->a;
	rs_run_out *o = l->o;
	l->inflight--;
	if (!o->first_done_ns)
		o->first_done_ns = t;
	o->last_done_ns = t;
	if (a->verify && o->status == RS_OK) {
		int64_t p = l->read_of[slot] % a->nblocks;
		int64_t block = a->perm ? a->perm[p] : p;
		int64_t bad;
		if (!rs_check(a->buf + (size_t)slot * a->bs, a->bs, (uint64_t)block * a->bs, a->seed, &bad)) {
			o->status = RS_MISMATCH;
			o->bad_offset = bad; // the first: later ones are not checked
			stop_issuing(l);
		}
	}
	if (a->gate && a->gate->left) {
		int64_t p = l->read_of[slot] % a->nblocks;
		int64_t block = a->perm ? a->perm[p] : p;
		rs_gate *g = a->gate;
		if (--g->left[(uint64_t)block * a->bs / a->mr_size] == 0) {
			int64_t r = g->read;
			while (r < g->nregions && g->left[r] == 0)
				r++;
			__atomic_store_n(&g->read, r, __ATOMIC_RELEASE);
		}
	}
	if (measure) {
		if (signalled)
			record(a->hist, t - l->issued_at[slot], &o->lat_sum, &o->lat_n, &o->lat_max);
		if (a->open)
			record(a->resp_hist, t - l->due_at[slot], &o->resp_sum, &o->resp_n, &o->resp_max);
		o->reads++;
		o->bytes += a->bs;
		if (l->series.cur)
			(*l->series.cur)++;
	}
	if (a->open) { // the next READ waits for its due time
		l->free_slots[l->nfree++] = slot;
		return;
	}
	if (!l->stopped && l->next < stop && o->status == RS_OK)
		issue(l, slot, stop);
}

// reap retires the n completions in wc, polled at t: -1 when one failed.
static int reap(loop *l, const struct ibv_wc *wc, int n, uint64_t t, int measure, int64_t stop) {
	const rs_run_args *a = l->a;
	rs_run_out *o = l->o;
	for (int i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS) {
			o->status = RS_WC_ERROR;
			o->wc_status = wc[i].status;
			o->vendor_err = wc[i].vendor_err;
			o->wc_qp = (int)wc[i].qp_num;
			// The QP is in error now; its other WRs flush, so stop here.
			return -1;
		}
		if (wc[i].wr_id & RS_FENCE) {
			int qi = (int)(wc[i].wr_id & 0xffff);
			qpstate *q = &l->q[qi];
			q->fence = 0;
			l->inflight--;
			for (int left = q->count; left > 0; left--) {
				int s = l->ring[q->base + q->head];
				q->head = (q->head + 1) % q->cap;
				q->count--;
				complete(l, s, 0, t, measure, stop);
			}
			continue;
		}
		int slot = (int)wc[i].wr_id;
		qpstate *q = &l->q[slot % a->nqp];
		// Everything before slot on its QP completed unsignalled.
		for (int left = q->count; left > 0; left--) {
			int s = l->ring[q->base + q->head];
			q->head = (q->head + 1) % q->cap;
			q->count--;
			complete(l, s, s == slot, t, measure, stop);
			if (s == slot)
				break;
		}
	}
	return 0;
}

// poll_cq polls up to RS_POLL_BATCH completions into wc: how many, or -1
// with the failure in the output.
static int poll_cq(loop *l, struct ibv_wc *wc) {
	int n = ibv_poll_cq(l->a->cq, RS_POLL_BATCH, wc);
	if (n < 0) {
		l->o->status = RS_POST_ERROR;
		l->o->verb = "ibv_poll_cq";
		l->o->errnum = -n;
		return -1;
	}
	return n;
}

// interval_at makes the interval of a completion polled at t current in
// the measured phase's series, if it counts one.
static void interval_at(loop *l, uint64_t t) {
	if (l->series.cur && t >= l->series.end && rs_series_at(&l->series, t)) {
		l->o->intervals_failed = 1; // the reads go on, uncounted
		rs_series_free(&l->series);
	}
}

// begin resets the QPs' rings for a phase and, for the measured one,
// stamps its start and starts its interval series: -1 when out of memory.
static int begin(loop *l, uint64_t start, int measure) {
	const rs_run_args *a = l->a;
	rs_run_out *o = l->o;
	for (int qi = 0; qi < a->nqp; qi++) {
		qpstate *q = &l->q[qi];
		q->head = q->count = q->since_sig = q->fence = 0;
	}
	l->stopped = 0;
	if (!measure)
		return 0;
	o->start_unix_ns = realtime_ns();
	// Nothing is in flight yet: the phase before drained.
	if (a->interval_ns && rs_series_init(&l->series, start, a->interval_ns, a->intervals_hint)) {
		o->status = RS_POST_ERROR;
		o->verb = "calloc";
		o->errnum = ENOMEM;
		return -1;
	}
	return 0;
}

// phase keeps qd reads in flight until it has issued count reads (count > 0)
// or until_ns has passed, then drains. With measure set it times reads into
// the output; verify checks each completed block.
static int phase(loop *l, int64_t count, uint64_t until_ns, int measure) {
	const rs_run_args *a = l->a;
	rs_run_out *o = l->o;
	int64_t stop = count > 0 ? l->next + count : INT64_MAX;
	struct ibv_wc wc[RS_POLL_BATCH];

	uint64_t t = now_ns();
	uint64_t start = t, last_done = t;
	uint64_t idle_from = 0; // when the loop last found nothing to do
	unsigned idle = 0;
	if (begin(l, start, measure))
		return -1;
	l->nparked = 0;
	for (int s = 0; s < a->qd && l->next < stop && !l->stopped; s++)
		issue(l, s, stop);
	if (l->next >= stop || (count <= 0 && t >= until_ns))
		stop_issuing(l);
	if (post_chains(l))
		return -1;

	while (l->inflight > 0 || (l->nparked > 0 && !l->stopped)) {
		if (l->nparked > 0 && !l->stopped) {
			unpark(l, stop);
			if (l->ntouched && post_chains(l))
				return -1;
			if (l->inflight == 0) {
				// Waiting for the server's next region with nothing in
				// flight: nothing can stall, and the gate is Go's to
				// open (or the cancel flag, when the server failed).
				if (measure && !idle_from)
					idle_from = now_ns();
				struct timespec ts = {0, 20000};
				nanosleep(&ts, NULL);
				if (*a->cancel && o->status == RS_OK) {
					o->status = RS_CANCELLED;
					stop_issuing(l);
				}
				last_done = now_ns();
				continue;
			}
		}
		int n = poll_cq(l, wc);
		if (n < 0)
			return -1;
		// rxe may complete a READ inside ibv_post_send, so a poll can find
		// work every time: look at the cancel flag on every pass, not only
		// when idle. It is one load.
		if (*a->cancel && o->status == RS_OK) {
			o->status = RS_CANCELLED;
			stop_issuing(l);
		}
		if (n == 0) {
			if (l->ntouched && post_chains(l)) // fences queued by a cancel
				return -1;
			if (measure && !idle_from) // once a wait: not on every empty poll
				idle_from = now_ns();
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
		if (idle_from) {
			o->idle_ns += t - idle_from;
			idle_from = 0;
		}
		if (count <= 0 && t >= until_ns)
			stop_issuing(l);
		interval_at(l, t);
		if (reap(l, wc, n, t, measure, stop))
			return -1;
		if (post_chains(l))
			return -1;
	}
	if (measure)
		o->seconds_ns = last_done - start;
	return o->status == RS_OK ? 0 : -1;
}

// open_phase posts the reads of sched each at or after its due time, never
// early, while fewer than qd are in flight, then drains. A read is held
// back when it fell due while qd were in flight: the window was full when
// its time came, or it fell due before the window last opened (as in
// node/transport/tcp's open loop). The clock is read on every pass: the
// next due time is the loop's other event beside a completion.
static int open_phase(loop *l, rs_sched *sched, int measure) {
	const rs_run_args *a = l->a;
	rs_run_out *o = l->o;
	struct ibv_wc wc[RS_POLL_BATCH];

	l->nfree = 0;
	for (int s = a->qd - 1; s >= 0; s--)
		l->free_slots[l->nfree++] = s;
	uint64_t t = now_ns();
	uint64_t start = t, last_done = t, last_post = t;
	if (begin(l, start, measure))
		return -1;
	uint64_t due = start + rs_sched_next(sched); // valid while issued < n
	int64_t issued = 0;
	uint64_t opened = 0; // when the window last opened after it was full
	uint64_t idle_from = 0; // when the loop last found nothing to do
	int waiting = 0;     // a due read found the window full
	if (sched->n == 0)
		l->stopped = 1;
	while (l->inflight > 0 || !l->stopped) {
		if (*a->cancel && o->status == RS_OK) {
			o->status = RS_CANCELLED;
			l->stopped = 1; // every READ is signalled: no fences needed
		}
		t = now_ns();
		while (!l->stopped && due <= t) {
			if (l->nfree == 0) {
				waiting = 1;
				break;
			}
			int slot = l->free_slots[--l->nfree];
			l->due_at[slot] = due;
			if (measure && due < opened)
				o->held_back++;
			queue_read(l, slot, l->next++);
			last_post = t;
			if (++issued >= sched->n)
				l->stopped = 1;
			else
				due = start + rs_sched_next(sched);
		}
		if (l->ntouched && post_chains(l))
			return -1;
		int n = poll_cq(l, wc);
		if (n < 0)
			return -1;
		if (n == 0) {
			if (measure && !idle_from)
				idle_from = t;
			uint64_t since = last_done > last_post ? last_done : last_post;
			if (l->inflight > 0 && t - since > a->stall_ns) {
				o->status = RS_STALLED;
				return -1;
			}
			continue;
		}
		t = now_ns();
		last_done = t;
		if (idle_from) {
			o->idle_ns += t - idle_from;
			idle_from = 0;
		}
		interval_at(l, t);
		if (reap(l, wc, n, t, measure, INT64_MAX))
			return -1;
		if (o->status != RS_OK)
			l->stopped = 1; // a mismatch: drain
		if (waiting && l->nfree > 0) {
			opened = t;
			waiting = 0;
		}
	}
	if (measure) {
		o->seconds_ns = last_done - start;
		o->due = sched->n;
	}
	return o->status == RS_OK ? 0 : -1;
}

void rs_run(const rs_run_args *a, rs_run_out *o) {
	memset(o, 0, sizeof(*o));
	o->next = a->start;
	// The plan's bounds were checked by node's flags; these are the
	// loop's own arrays' (the Go side refuses more first), whose ring
	// holds per_qp slots for each QP: results.DepthPerQP's, at most
	// qd + nqp - 1 in all.
	if (a->qd > RS_MAX_QD || a->nqp > RS_MAX_QP || a->per_qp < 1 ||
	    (int64_t)a->per_qp * a->nqp >= (int64_t)a->qd + a->nqp) {
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
	for (int qi = 0; qi < a->nqp; qi++) {
		qpstate *q = &l->q[qi];
		q->base = qi * a->per_qp;
		q->cap = (a->qd - qi + a->nqp - 1) / a->nqp; // slots qi, qi+nqp, … (none when qi >= qd)
		// cq_mod comes resolved (results.CQModeration: 1 in an open loop,
		// at most the depth per QP); the last QPs may hold one slot fewer
		// when the QPs do not divide the depth, and must still signal.
		q->mod = a->cq_mod < q->cap ? a->cq_mod : q->cap;
		if (q->mod < 1)
			q->mod = 1;
	}
	if (a->open) {
		rs_sched sched;
		rs_sched_init(&sched, a->warm_reads, a->per_read_ns, a->poisson, a->arrival_seed);
		if (a->warm_reads == 0 || open_phase(l, &sched, 0) == 0) {
			rs_sched_init(&sched, a->reads, a->per_read_ns, a->poisson, a->arrival_seed);
			open_phase(l, &sched, 1);
		}
	} else if (a->warmup_ns == 0 || phase(l, 0, now_ns() + a->warmup_ns, 0) == 0) {
		if (a->count > 0)
			phase(l, a->count, 0, 1);
		else
			phase(l, 0, now_ns() + a->duration_ns, 1);
	}
	o->next = l->next;
	if (l->series.counts) {
		o->intervals = l->series.counts; // the caller's, by rs_run_free
		o->nintervals = l->series.len;
	}
	free(l);
}

void rs_run_free(rs_run_out *o) {
	free(o->intervals);
	o->intervals = NULL;
	o->nintervals = 0;
}

// rdma_cm.
