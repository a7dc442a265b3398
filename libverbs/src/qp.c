/*
 * qp.c: RC queue pairs: create, modify (RESET -> INIT -> RTR -> RTS, and
 * ERR), query, destroy, and the posting calls ctx->ops.post_send and
 * post_recv. A post flattens the program's work request list into a
 * scratch array and crosses into Go once per call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mrv.h"

static int grow(void **buf, int *cap, int need, size_t elem)
{
	if (need <= *cap)
		return 0;
	int ncap = *cap ? *cap : 16;
	while (ncap < need)
		ncap *= 2;
	void *p = realloc(*buf, (size_t)ncap * elem);
	if (!p)
		return ENOMEM;
	*buf = p;
	*cap = ncap;
	return 0;
}

static struct mrv_qp *to_mqp(struct ibv_qp *qp) { return mrv_container_of(qp, struct mrv_qp, qp); }

MRV_EXPORT struct ibv_qp *mrv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	if (!pd || !a || !a->send_cq || !a->recv_cq)
		return mrv_fail_ptr(EINVAL);
	if (a->qp_type != IBV_QPT_RC || a->srq) {
		static int said_type, said_srq;
		if (a->qp_type != IBV_QPT_RC)
			mrv_refuse(&said_type, a->qp_type == IBV_QPT_UD ? "a UD QP (RC only)"
					       : a->qp_type == IBV_QPT_UC ? "a UC QP (RC only)"
									  : "this QP type (RC only)");
		else
			mrv_refuse(&said_srq, "a QP on a shared receive queue (SRQ)");
		return mrv_fail_ptr(EOPNOTSUPP); /* RC only, no SRQ */
	}
	struct ibv_qp_cap cap = a->cap;
	if (cap.max_send_wr > MRV_MAX_QP_WR || cap.max_recv_wr > MRV_MAX_QP_WR ||
	    cap.max_send_sge > MRV_MAX_SGE || cap.max_recv_sge > MRV_MAX_SGE ||
	    cap.max_inline_data > MRV_MAX_INLINE)
		return mrv_fail_ptr(EINVAL);
	cap.max_send_wr = cap.max_send_wr ? cap.max_send_wr : 1;
	cap.max_recv_wr = cap.max_recv_wr ? cap.max_recv_wr : 1;
	cap.max_send_sge = cap.max_recv_sge = MRV_MAX_SGE;
	struct mrv_qp *q = calloc(1, sizeof *q);
	if (!q)
		return mrv_fail_ptr(ENOMEM);
	uint32_t h = 0, qpn = 0;
	int err = mrg.MetaroceVerbsCreateQP(pd->handle, a->send_cq->handle, a->recv_cq->handle,
					    (int)cap.max_send_wr, (int)cap.max_recv_wr, &h, &qpn);
	if (err) {
		free(q);
		return mrv_fail_ptr(err);
	}
	/* Inline is always granted (up to MRV_MAX_INLINE), as HCAs grant a
	 * default: programs such as ibv_rc_pingpong ask for none and send
	 * inline when ibv_query_qp reports enough. */
	{
		cap.max_inline_data = MRV_MAX_INLINE;
		q->bounce_slots = 2 * cap.max_send_wr;
		q->bounce = malloc((size_t)q->bounce_slots * MRV_MAX_INLINE);
		uint32_t rkey;
		if (!q->bounce || mrg.MetaroceVerbsRegMR(pd->handle, q->bounce, (uint64_t)q->bounce_slots * MRV_MAX_INLINE,
							 (uintptr_t)q->bounce, IBV_ACCESS_LOCAL_WRITE,
							 &q->bounce_mr, &q->bounce_lkey, &rkey)) {
			mrg.MetaroceVerbsDestroyQP(h);
			free(q->bounce);
			free(q);
			return mrv_fail_ptr(ENOMEM);
		}
	}
	pthread_mutex_init(&q->mu, NULL);
	q->sq_sig_all = a->sq_sig_all;
	q->cap = cap;
	a->cap = cap; /* what was granted, as verbs reports it back */
	q->qp.context = pd->context;
	q->qp.qp_context = a->qp_context;
	q->qp.pd = pd;
	q->qp.send_cq = a->send_cq;
	q->qp.recv_cq = a->recv_cq;
	q->qp.handle = h;
	q->qp.qp_num = qpn;
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_type = IBV_QPT_RC;
	pthread_mutex_init(&q->qp.mutex, NULL);
	pthread_cond_init(&q->qp.cond, NULL);
	mrv_async_qp_add(q);
	return &q->qp;
}

/* The transitions an RC QP may take (IB spec's state diagram, the part
 * the library implements). */
static int transition_ok(enum ibv_qp_state from, enum ibv_qp_state to)
{
	switch (to) {
	case IBV_QPS_INIT:
		return from == IBV_QPS_RESET || from == IBV_QPS_INIT;
	case IBV_QPS_RTR:
		return from == IBV_QPS_INIT;
	case IBV_QPS_RTS:
		return from == IBV_QPS_RTR || from == IBV_QPS_RTS;
	case IBV_QPS_ERR:
		return 1;
	case IBV_QPS_RESET:
		return from == IBV_QPS_RESET || from == IBV_QPS_INIT;
	default:
		return 0;
	}
}

MRV_EXPORT int mrv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	if (!ibqp || !attr)
		return EINVAL;
	struct mrv_qp *q = to_mqp(ibqp);
	enum ibv_qp_state from = ibqp->state;
	enum ibv_qp_state to = (mask & IBV_QP_STATE) ? attr->qp_state : from;
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != from)
		return EINVAL;
	if (!transition_ok(from, to) && to != from)
		return EINVAL;
	struct mrg_qp_attr ga = {.state = (uint32_t)to};
	if (to == IBV_QPS_RTR && from == IBV_QPS_INIT) {
		if ((mask & (IBV_QP_AV | IBV_QP_DEST_QPN)) != (IBV_QP_AV | IBV_QP_DEST_QPN))
			return EINVAL;
		const union ibv_gid *g = &attr->ah_attr.grh.dgid;
		static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		if (!attr->ah_attr.is_global || memcmp(g->raw, mapped, 12) != 0) {
			fprintf(stderr, "metaroce verbs: RTR needs a GRH with the peer's IPv4-mapped GID "
					"(ah_attr.is_global = 1; ibv_rc_pingpong: -g 0)\n");
			return EINVAL;
		}
		memcpy(&ga.peer_ipv4, &g->raw[12], 4);
		ga.dest_qpn = attr->dest_qp_num;
		ga.min_rnr_timer = (mask & IBV_QP_MIN_RNR_TIMER) ? attr->min_rnr_timer : 0;
		ga.rq_psn = (mask & IBV_QP_RQ_PSN) ? attr->rq_psn & 0xffffff : 0;
	}
	if (to == IBV_QPS_RTS) {
		/* What the mask omits keeps its earlier value (RTS -> RTS), or
		 * takes the library's default (14, 7, 7). */
		pthread_mutex_lock(&q->mu);
		int had = q->attr_mask;
		struct ibv_qp_attr old = q->attr;
		pthread_mutex_unlock(&q->mu);
		ga.timeout = (mask & IBV_QP_TIMEOUT) ? attr->timeout : (had & IBV_QP_TIMEOUT) ? old.timeout : 14;
		ga.retry_cnt = (mask & IBV_QP_RETRY_CNT) ? attr->retry_cnt : (had & IBV_QP_RETRY_CNT) ? old.retry_cnt : 7;
		ga.rnr_retry = (mask & IBV_QP_RNR_RETRY) ? attr->rnr_retry : (had & IBV_QP_RNR_RETRY) ? old.rnr_retry : 7;
		ga.sq_psn = ((mask & IBV_QP_SQ_PSN) ? attr->sq_psn : (had & IBV_QP_SQ_PSN) ? old.sq_psn : 0) & 0xffffff;
		/* Values above the IBA's 3 bits are the program's error. */
		if (ga.timeout > 31 || ga.retry_cnt > 7 || ga.rnr_retry > 7)
			return EINVAL;
	}
	if (to != from || to == IBV_QPS_RTS) {
		char msg[256] = "";
		int err = mrg.MetaroceVerbsModifyQP(ibqp->handle, &ga, msg, sizeof msg);
		if (err) {
			if (msg[0])
				fprintf(stderr, "%s\n", msg);
			return err;
		}
	}
	pthread_mutex_lock(&q->mu);
	/* Keep what was set, for ibv_query_qp. */
	int m = mask & ~IBV_QP_STATE;
	if (m & IBV_QP_AV)
		q->attr.ah_attr = attr->ah_attr;
	if (m & IBV_QP_DEST_QPN)
		q->attr.dest_qp_num = attr->dest_qp_num;
	if (m & IBV_QP_PATH_MTU)
		q->attr.path_mtu = attr->path_mtu;
	if (m & IBV_QP_RQ_PSN)
		q->attr.rq_psn = attr->rq_psn;
	if (m & IBV_QP_SQ_PSN)
		q->attr.sq_psn = attr->sq_psn;
	if (m & IBV_QP_TIMEOUT)
		q->attr.timeout = attr->timeout;
	if (m & IBV_QP_RETRY_CNT)
		q->attr.retry_cnt = attr->retry_cnt;
	if (m & IBV_QP_RNR_RETRY)
		q->attr.rnr_retry = attr->rnr_retry;
	if (m & IBV_QP_MIN_RNR_TIMER)
		q->attr.min_rnr_timer = attr->min_rnr_timer;
	if (m & IBV_QP_ACCESS_FLAGS)
		q->attr.qp_access_flags = attr->qp_access_flags;
	if (m & IBV_QP_MAX_QP_RD_ATOMIC)
		q->attr.max_rd_atomic = attr->max_rd_atomic;
	if (m & IBV_QP_MAX_DEST_RD_ATOMIC)
		q->attr.max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (m & IBV_QP_PORT)
		q->attr.port_num = attr->port_num;
	if (m & IBV_QP_PKEY_INDEX)
		q->attr.pkey_index = attr->pkey_index;
	q->attr_mask |= m;
	ibqp->state = to;
	pthread_mutex_unlock(&q->mu);
	return 0;
}

MRV_EXPORT int mrv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
			    struct ibv_qp_init_attr *init)
{
	(void)mask; /* everything known is filled */
	if (!ibqp || !attr || !init)
		return EINVAL;
	struct mrv_qp *q = to_mqp(ibqp);
	pthread_mutex_lock(&q->mu);
	*attr = q->attr;
	attr->qp_state = attr->cur_qp_state = ibqp->state;
	attr->cap = q->cap;
	attr->path_mig_state = IBV_MIG_MIGRATED;
	memset(init, 0, sizeof *init);
	init->qp_context = ibqp->qp_context;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->cap = q->cap;
	init->qp_type = IBV_QPT_RC;
	init->sq_sig_all = q->sq_sig_all;
	pthread_mutex_unlock(&q->mu);
	return 0;
}

MRV_EXPORT int mrv_destroy_qp(struct ibv_qp *ibqp)
{
	if (!ibqp)
		return EINVAL;
	struct mrv_qp *q = to_mqp(ibqp);
	int err = mrg.MetaroceVerbsDestroyQP(ibqp->handle);
	if (err)
		return err;
	/* No event is raised for it from here on; wait for the program to
	 * acknowledge those it took (rdma-core's events_completed). */
	mrv_async_qp_gone(q);
	if (q->bounce) {
		mrg.MetaroceVerbsDeregMR(q->bounce_mr);
		free(q->bounce);
	}
	free(q->sbuf);
	free(q->rbuf);
	pthread_mutex_destroy(&q->mu);
	pthread_mutex_destroy(&ibqp->mutex);
	pthread_cond_destroy(&ibqp->cond);
	free(q);
	return 0;
}

static int send_opcode(enum ibv_wr_opcode op, uint8_t *out)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE: *out = MRG_OP_WRITE; return 0;
	case IBV_WR_RDMA_WRITE_WITH_IMM: *out = MRG_OP_WRITE_IMM; return 0;
	case IBV_WR_SEND: *out = MRG_OP_SEND; return 0;
	case IBV_WR_SEND_WITH_IMM: *out = MRG_OP_SEND_IMM; return 0;
	case IBV_WR_RDMA_READ: *out = MRG_OP_READ; return 0;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD: {
		static int said;
		mrv_refuse(&said, "an atomic work request (max_atomic_cap is IBV_ATOMIC_NONE)");
		return EINVAL;
	}
	default: return EINVAL; /* invalidate, bind, TSO: not offered */
	}
}

int mrv_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct mrv_qp *q = to_mqp(ibqp);
	if (ibqp->state != IBV_QPS_RTS) {
		*bad = wr;
		return EINVAL;
	}
	pthread_mutex_lock(&q->mu);
	int n = 0, err = 0;
	struct ibv_send_wr *w;
	for (w = wr; w; w = w->next, n++) {
		if ((err = grow((void **)&q->sbuf, &q->sbuf_cap, n + 1, sizeof *q->sbuf)))
			break;
		struct mrg_send_wr *s = &q->sbuf[n];
		memset(s, 0, sizeof *s);
		s->wr_id = w->wr_id;
		if ((err = send_opcode(w->opcode, &s->opcode)))
			break;
		s->signaled = q->sq_sig_all || (w->send_flags & IBV_SEND_SIGNALED);
		s->imm = w->imm_data;
		if (s->opcode != MRG_OP_SEND && s->opcode != MRG_OP_SEND_IMM) {
			s->remote_addr = w->wr.rdma.remote_addr;
			s->rkey = w->wr.rdma.rkey;
		}
		if (w->num_sge < 0 || (w->num_sge > MRV_MAX_SGE && !(w->send_flags & IBV_SEND_INLINE))) {
			err = EINVAL;
			break;
		}
		if ((w->send_flags & IBV_SEND_INLINE) && s->opcode != MRG_OP_READ) {
			size_t total = 0;
			for (int i = 0; i < w->num_sge; i++)
				total += w->sg_list[i].length;
			if (!q->bounce || total > q->cap.max_inline_data) {
				err = EINVAL;
				break;
			}
			uint8_t *slot = q->bounce + (q->bounce_seq++ % q->bounce_slots) * MRV_MAX_INLINE;
			size_t off = 0;
			for (int i = 0; i < w->num_sge; i++) {
				memcpy(slot + off, (void *)(uintptr_t)w->sg_list[i].addr, w->sg_list[i].length);
				off += w->sg_list[i].length;
			}
			s->addr = (uintptr_t)slot;
			s->length = (uint32_t)total;
			s->lkey = q->bounce_lkey;
		} else if (w->num_sge == 1) {
			s->addr = w->sg_list[0].addr;
			s->length = w->sg_list[0].length;
			s->lkey = w->sg_list[0].lkey;
		}
	}
	int posted = 0, deferred = 0;
	if (n > 0) {
		int e = mrg.MetaroceVerbsPostSend(ibqp->handle, q->sbuf, n, mrv_will_poll(), &posted, &deferred);
		if (e && !err)
			err = e;
		if (deferred)
			mrv_sends_left();
	}
	pthread_mutex_unlock(&q->mu);
	if (err) {
		/* The WRs before *bad were posted. */
		struct ibv_send_wr *b = wr;
		for (int i = 0; i < posted && b; i++)
			b = b->next;
		*bad = b;
	}
	return err;
}

int mrv_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct mrv_qp *q = to_mqp(ibqp);
	if (ibqp->state == IBV_QPS_RESET || ibqp->state == IBV_QPS_ERR) {
		*bad = wr;
		return EINVAL;
	}
	pthread_mutex_lock(&q->mu);
	int n = 0, err = 0;
	for (struct ibv_recv_wr *w = wr; w; w = w->next, n++) {
		if ((err = grow((void **)&q->rbuf, &q->rbuf_cap, n + 1, sizeof *q->rbuf)))
			break;
		if (w->num_sge < 0 || w->num_sge > MRV_MAX_SGE) {
			err = EINVAL;
			break;
		}
		struct mrg_recv_wr *r = &q->rbuf[n];
		memset(r, 0, sizeof *r);
		r->wr_id = w->wr_id;
		if (w->num_sge == 1) {
			r->addr = w->sg_list[0].addr;
			r->length = w->sg_list[0].length;
			r->lkey = w->sg_list[0].lkey;
		}
	}
	int posted = 0;
	if (n > 0) {
		int e = mrg.MetaroceVerbsPostRecv(ibqp->handle, q->rbuf, n, &posted);
		if (e && !err)
			err = e;
	}
	pthread_mutex_unlock(&q->mu);
	if (err) {
		struct ibv_recv_wr *b = wr;
		for (int i = 0; i < posted && b; i++)
			b = b->next;
		*bad = b;
	}
	return err;
}

int mrv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)srq;
	*bad = wr;
	return EOPNOTSUPP;
}

/* rdma-core's later IBV_QUERY_QP_DATA_IN_ORDER_RETURN_CAPS; v44's header
 * says flags must be 0 (the call answers 1 or 0). */
#define MRV_IN_ORDER_RETURN_CAPS (1u << 0)

/*
 * ibv_query_qp_data_in_order: whether a reader may poll the data of a work
 * request of opcode op instead of its completion, at this QP's receiving
 * side (remote WRITEs and SENDs into it, responses of READs posted on it).
 * flags 0 (v44's only value) answers 1 when the whole message is visible
 * once its last byte is, 0 otherwise; flags RETURN_CAPS (rdma-core 47's
 * extension, for programs built against a later header) answers the
 * capability bits (WHOLE_MSG 1, ALIGNED_128_BYTES 2). The answer is the
 * transport's (libverbs/golib/inorder.go); any other flag, or an opcode
 * that carries no data to a receiving side, answers 0.
 */
MRV_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	uint8_t mop;
	uint32_t caps = 0;
	if (!qp || (flags & ~MRV_IN_ORDER_RETURN_CAPS))
		return 0;
	switch (op) {
	case IBV_WR_RDMA_WRITE: mop = MRG_OP_WRITE; break;
	case IBV_WR_RDMA_WRITE_WITH_IMM: mop = MRG_OP_WRITE_IMM; break;
	case IBV_WR_SEND: mop = MRG_OP_SEND; break;
	case IBV_WR_SEND_WITH_IMM: mop = MRG_OP_SEND_IMM; break;
	case IBV_WR_RDMA_READ: mop = MRG_OP_READ; break;
	default: return 0;
	}
	if (mrg.MetaroceVerbsDataInOrder(mop, &caps))
		return 0;
	if (flags & MRV_IN_ORDER_RETURN_CAPS)
		return (int)caps;
	return (caps & MRG_IN_ORDER_WHOLE_MSG) ? 1 : 0;
}

MRV_DEFAULT_1_1(create_qp);
MRV_DEFAULT_1_1(modify_qp);
MRV_DEFAULT_1_1(query_qp);
MRV_DEFAULT_1_1(destroy_qp);
