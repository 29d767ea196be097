//go:build rdma

// The connection manager: RC queue pairs connected by rdma_cm (connect
// cm), which iWARP devices need. See shim.h for the rules of the shim.

#include "shim_impl.h"

rs_status rs_cm_channel(struct rdma_event_channel **ch) {
	errno = 0;
	*ch = rdma_create_event_channel();
	return *ch ? ok() : fail("rdma_create_event_channel", errno);
}

void rs_cm_destroy_channel(struct rdma_event_channel *ch) {
	if (ch)
		rdma_destroy_event_channel(ch);
}

rs_status rs_cm_create_id(struct rdma_event_channel *ch, struct rdma_cm_id **id) {
	errno = 0;
	if (rdma_create_id(ch, id, NULL, RDMA_PS_TCP))
		return fail("rdma_create_id", errno);
	return ok();
}

// sockaddr_of fills ss with ip:port; 0 on a bad address.
static int sockaddr_of(const char *ip, int port, struct sockaddr_storage *ss) {
	memset(ss, 0, sizeof(*ss));
	struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, ip, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)port);
		return 1;
	}
	if (inet_pton(AF_INET6, ip, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)port);
		return 1;
	}
	return 0;
}

rs_status rs_cm_listen(struct rdma_cm_id *id, const char *ip, int port, int *bound) {
	struct sockaddr_storage ss;
	if (!sockaddr_of(ip, port, &ss))
		return fail("inet_pton", EINVAL);
	errno = 0;
	if (rdma_bind_addr(id, (struct sockaddr *)&ss))
		return fail("rdma_bind_addr", errno);
	errno = 0;
	if (rdma_listen(id, 64))
		return fail("rdma_listen", errno);
	*bound = ntohs(rdma_get_src_port(id));
	return ok();
}

rs_status rs_cm_resolve_addr(struct rdma_cm_id *id, const char *src, const char *dst, int port, int timeout_ms) {
	struct sockaddr_storage s, d;
	if (!sockaddr_of(src, 0, &s) || !sockaddr_of(dst, port, &d))
		return fail("inet_pton", EINVAL);
	errno = 0;
	if (rdma_resolve_addr(id, (struct sockaddr *)&s, (struct sockaddr *)&d, timeout_ms))
		return fail("rdma_resolve_addr", errno);
	return ok();
}

rs_status rs_cm_resolve_route(struct rdma_cm_id *id, int timeout_ms) {
	errno = 0;
	if (rdma_resolve_route(id, timeout_ms))
		return fail("rdma_resolve_route", errno);
	return ok();
}

rs_status rs_cm_wait(struct rdma_event_channel *ch, int timeout_ms, rs_cm_event *ev) {
	memset(ev, 0, sizeof(*ev));
	ev->event = -1;
	struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
	int rc = poll(&pfd, 1, timeout_ms);
	if (rc < 0)
		return errno == EINTR ? ok() : fail("poll(rdma_cm channel)", errno);
	if (rc == 0)
		return ok();
	struct rdma_cm_event *e;
	errno = 0;
	if (rdma_get_cm_event(ch, &e))
		return fail("rdma_get_cm_event", errno);
	ev->event = e->event;
	ev->status = e->status;
	ev->id = e->id;
	if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		const struct rdma_conn_param *c = &e->param.conn;
		int n = c->private_data_len;
		if (n > (int)sizeof(ev->private_data))
			n = sizeof(ev->private_data);
		if (c->private_data && n > 0)
			memcpy(ev->private_data, c->private_data, n);
		ev->private_data_len = n;
		ev->initiator_depth = c->initiator_depth;
		ev->responder_resources = c->responder_resources;
	}
	rdma_ack_cm_event(e);
	return ok();
}

rs_status rs_cm_set_options(struct rdma_cm_id *id, int tos, int timeout) {
	uint8_t t = (uint8_t)tos, to = (uint8_t)timeout;
	errno = 0;
	if (tos >= 0 && rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &t, sizeof(t)))
		return fail("rdma_set_option(TOS)", errno);
	errno = 0;
	if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &to, sizeof(to)))
		return fail("rdma_set_option(ACK_TIMEOUT)", errno);
	return ok();
}

rs_status rs_cm_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_cq *cq, int send_depth, struct ibv_qp **qp) {
	struct ibv_qp_init_attr ia = rc_init_attr(cq, send_depth);
	errno = 0;
	if (rdma_create_qp(id, pd, &ia))
		return fail("rdma_create_qp", errno);
	*qp = id->qp;
	return ok();
}

rs_status rs_cm_connect(struct rdma_cm_id *id, const void *pdata, int plen, int initiator_depth,
			int responder_resources, int retry_cnt, int rnr_retry) {
	struct rdma_conn_param p = {
		.private_data = pdata,
		.private_data_len = (uint8_t)plen,
		.initiator_depth = (uint8_t)initiator_depth,
		.responder_resources = (uint8_t)responder_resources,
		.retry_count = (uint8_t)retry_cnt,
		.rnr_retry_count = (uint8_t)rnr_retry,
	};
	errno = 0;
	if (rdma_connect(id, &p))
		return fail("rdma_connect", errno);
	return ok();
}

rs_status rs_cm_accept(struct rdma_cm_id *id, int responder_resources, int rnr_retry) {
	struct rdma_conn_param p = {
		.responder_resources = (uint8_t)responder_resources,
		.initiator_depth = 0,
		.rnr_retry_count = (uint8_t)rnr_retry,
	};
	errno = 0;
	if (rdma_accept(id, &p))
		return fail("rdma_accept", errno);
	return ok();
}

void rs_cm_reject(struct rdma_cm_id *id) {
	rdma_reject(id, NULL, 0);
	rdma_destroy_id(id);
}

void rs_cm_destroy(struct rdma_cm_id *id) {
	if (!id)
		return;
	if (id->qp) {
		rdma_disconnect(id);
		rdma_destroy_qp(id);
	}
	rdma_destroy_id(id);
}

struct ibv_context *rs_cm_verbs(struct rdma_cm_id *id) { return id->verbs; }
uint8_t rs_cm_port(struct rdma_cm_id *id) { return id->port_num; }
