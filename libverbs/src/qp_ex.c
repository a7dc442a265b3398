/*
 * qp_ex.c: ibv_create_qp_ex and the ibv_wr_* posting API (struct
 * ibv_qp_ex), rdma-core v44's "new send API" (ibv_rc_pingpong -N).
 *
 * A batch runs from ibv_wr_start to ibv_wr_complete (or ibv_wr_abort)
 * under the QP's post mutex, as providers hold their send-queue lock:
 * each wr_<opcode> call starts a work request, taking the QP's wr_id and
 * wr_flags as they are at that moment, and the wr_set_* calls give it its
 * data. The work requests are flattened into the same scratch array
 * ibv_post_send uses, and wr_complete crosses into Go once for the whole
 * batch (MetaroceVerbsPostSendAll: all of it is posted, or none).
 *
 * Contract: nothing here crashes on a call the library does not offer.
 * An operation it does not support (atomics, memory-window binds, local
 * invalidate, SEND with invalidate, TSO, UD or XRC addressing), a second
 * SGE, inline data beyond max_inline_data or a batch longer than the send
 * queue marks the batch failed: wr_complete returns the first error
 * (EOPNOTSUPP or EINVAL, ENOMEM for a full queue) and posts nothing, as
 * mlx5 rolls its batch back.
 */
#include <stdlib.h>
#include <string.h>

#include "mrv.h"

/* What wr_* supports: the opcodes of ibv_post_send. */
#define MRV_SEND_OPS                                                                          \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND | \
	 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ)

static struct mrv_qp *to_xqp(struct ibv_qp_ex *qpx) { return mrv_container_of(qpx, struct mrv_qp, qpx); }

/* fail records the batch's first error. */
static void fail(struct mrv_qp *q, int err)
{
	if (!q->wr_err)
		q->wr_err = err;
}

/* cur is the work request the wr_set_* calls fill: the last one started;
 * NULL (and the batch failed) when there is none. */
static struct mrg_send_wr *cur(struct mrv_qp *q)
{
	if (!q->wr_open || q->wr_err || q->wr_n == 0) {
		if (q->wr_open)
			fail(q, EINVAL);
		return NULL;
	}
	return &q->sbuf[q->wr_n - 1];
}

/* begin starts a work request of opcode op. */
static struct mrg_send_wr *begin(struct mrv_qp *q, uint8_t op)
{
	if (!q->wr_open || q->wr_err)
		return NULL;
	if ((uint32_t)q->wr_n >= q->cap.max_send_wr) {
		fail(q, ENOMEM); /* more than the send queue holds */
		return NULL;
	}
	if (q->wr_n >= q->sbuf_cap) {
		int ncap = q->sbuf_cap ? 2 * q->sbuf_cap : 16;
		void *p = realloc(q->sbuf, (size_t)ncap * sizeof *q->sbuf);
		if (!p) {
			fail(q, ENOMEM);
			return NULL;
		}
		q->sbuf = p;
		q->sbuf_cap = ncap;
	}
	struct mrg_send_wr *s = &q->sbuf[q->wr_n++];
	memset(s, 0, sizeof *s);
	s->wr_id = q->qpx.wr_id;
	s->opcode = op;
	s->signaled = q->sq_sig_all || (q->qpx.wr_flags & IBV_SEND_SIGNALED);
	/* The flags the data calls need: kept in the reserved bytes, which
	 * the Go side ignores. */
	s->reserved[0] = (q->qpx.wr_flags & IBV_SEND_INLINE) != 0;
	return s;
}

static void wr_start(struct ibv_qp_ex *qpx)
{
	struct mrv_qp *q = to_xqp(qpx);
	pthread_mutex_lock(&q->mu);
	q->wr_open = 1;
	q->wr_n = 0;
	q->wr_err = 0;
}

static void end_batch(struct mrv_qp *q)
{
	q->wr_open = 0;
	q->wr_n = 0;
	q->wr_err = 0;
	pthread_mutex_unlock(&q->mu);
}

static int wr_complete(struct ibv_qp_ex *qpx)
{
	struct mrv_qp *q = to_xqp(qpx);
	if (!q->wr_open)
		return EINVAL; /* no ibv_wr_start: the mutex is not ours */
	int err = q->wr_err, deferred = 0;
	if (!err && q->wr_n > 0) /* an empty batch posts nothing, in any state */
		err = q->qp.state != IBV_QPS_RTS ? EINVAL
						 : mrg.MetaroceVerbsPostSendAll(q->qp.handle, q->sbuf, q->wr_n, mrv_will_poll(), &deferred);
	end_batch(q);
	if (deferred)
		mrv_sends_left();
	return err;
}

static void wr_abort(struct ibv_qp_ex *qpx)
{
	struct mrv_qp *q = to_xqp(qpx);
	if (q->wr_open)
		end_batch(q);
}

/* --- the opcodes --- */

static void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr)
{
	struct mrg_send_wr *s = begin(to_xqp(qpx), MRG_OP_WRITE);
	if (s)
		s->rkey = rkey, s->remote_addr = raddr;
}

static void wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr, __be32 imm)
{
	struct mrg_send_wr *s = begin(to_xqp(qpx), MRG_OP_WRITE_IMM);
	if (s)
		s->rkey = rkey, s->remote_addr = raddr, s->imm = imm;
}

static void wr_send(struct ibv_qp_ex *qpx) { begin(to_xqp(qpx), MRG_OP_SEND); }

static void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm)
{
	struct mrg_send_wr *s = begin(to_xqp(qpx), MRG_OP_SEND_IMM);
	if (s)
		s->imm = imm;
}

static void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr)
{
	struct mrg_send_wr *s = begin(to_xqp(qpx), MRG_OP_READ);
	if (s)
		s->rkey = rkey, s->remote_addr = raddr;
}

/* refuse fails the batch of an operation the library does not offer and
 * says so once on stderr. */
static void refuse(struct ibv_qp_ex *qpx, int *said, const char *what)
{
	struct mrv_qp *q = to_xqp(qpx);
	mrv_refuse(said, what);
	if (q->wr_open)
		fail(q, EOPNOTSUPP);
}

static int said_atomic, said_mw, said_inv, said_tso, said_ud, said_xrc;

static void wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr, uint64_t cmp, uint64_t swap)
{
	(void)rkey, (void)raddr, (void)cmp, (void)swap;
	refuse(qpx, &said_atomic, "an atomic work request (max_atomic_cap is IBV_ATOMIC_NONE)");
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr, uint64_t add)
{
	(void)rkey, (void)raddr, (void)add;
	refuse(qpx, &said_atomic, "an atomic work request (max_atomic_cap is IBV_ATOMIC_NONE)");
}

static void wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr, const void *wr)
{
	(void)rkey, (void)raddr, (void)wr;
	refuse(qpx, &said_atomic, "an atomic work request (max_atomic_cap is IBV_ATOMIC_NONE)");
}

static void wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw, uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	(void)mw, (void)rkey, (void)info;
	refuse(qpx, &said_mw, "a memory window bind");
}

static void wr_local_inv(struct ibv_qp_ex *qpx, uint32_t rkey)
{
	(void)rkey;
	refuse(qpx, &said_inv, "a local or remote invalidate");
}

static void wr_send_inv(struct ibv_qp_ex *qpx, uint32_t rkey)
{
	(void)rkey;
	refuse(qpx, &said_inv, "a local or remote invalidate");
}

static void wr_send_tso(struct ibv_qp_ex *qpx, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	(void)hdr, (void)hdr_sz, (void)mss;
	refuse(qpx, &said_tso, "a TSO send (raw packet QPs)");
}

static void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	(void)ah, (void)qpn, (void)qkey;
	refuse(qpx, &said_ud, "a UD address (RC only)");
}

static void wr_set_xrc_srqn(struct ibv_qp_ex *qpx, uint32_t srqn)
{
	(void)srqn;
	refuse(qpx, &said_xrc, "an XRC SRQ number (RC only)");
}

/* --- the data --- */

/* inline_slot returns the next bounce slot for total bytes of inline data
 * (qp.c's rule: 2 x max_send_wr slots, reused only after max_send_wr later
 * posts), or NULL with the batch failed. */
static uint8_t *inline_slot(struct mrv_qp *q, struct mrg_send_wr *s, size_t total)
{
	if (s->opcode == MRG_OP_READ || !q->bounce || total > q->cap.max_inline_data) {
		fail(q, EINVAL);
		return NULL;
	}
	uint8_t *slot = q->bounce + (q->bounce_seq++ % q->bounce_slots) * MRV_MAX_INLINE;
	s->addr = (uintptr_t)slot;
	s->length = (uint32_t)total;
	s->lkey = q->bounce_lkey;
	return slot;
}

static void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t len)
{
	struct mrv_qp *q = to_xqp(qpx);
	struct mrg_send_wr *s = cur(q);
	uint8_t *slot = s ? inline_slot(q, s, len) : NULL;
	if (slot && len)
		memcpy(slot, addr, len);
}

static void wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_data_buf *bufs)
{
	struct mrv_qp *q = to_xqp(qpx);
	struct mrg_send_wr *s = cur(q);
	if (!s)
		return;
	size_t total = 0;
	for (size_t i = 0; i < n; i++) {
		total += bufs[i].length;
		if (total > MRV_MAX_INLINE)
			break; /* inline_slot refuses it: no overflow below */
	}
	uint8_t *slot = inline_slot(q, s, total);
	for (size_t i = 0, off = 0; slot && i < n; off += bufs[i].length, i++)
		memcpy(slot + off, bufs[i].addr, bufs[i].length);
}

static void set_sges(struct mrv_qp *q, size_t n, const struct ibv_sge *sg)
{
	struct mrg_send_wr *s = cur(q);
	if (!s)
		return;
	if (s->reserved[0] && s->opcode != MRG_OP_READ) {
		/* IBV_SEND_INLINE in wr_flags: copied now, as ibv_post_send
		 * does (ibv_rc_pingpong -N sends inline this way). */
		size_t total = 0;
		for (size_t i = 0; i < n; i++) {
			total += sg[i].length;
			if (total > MRV_MAX_INLINE)
				break;
		}
		uint8_t *slot = inline_slot(q, s, total);
		for (size_t i = 0, off = 0; slot && i < n; off += sg[i].length, i++)
			memcpy(slot + off, (void *)(uintptr_t)sg[i].addr, sg[i].length);
		return;
	}
	if (n > MRV_MAX_SGE) {
		fail(q, EINVAL); /* max_send_sge is 1 */
		return;
	}
	if (n == 1) {
		s->addr = sg[0].addr;
		s->length = sg[0].length;
		s->lkey = sg[0].lkey;
	}
}

static void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t len)
{
	struct ibv_sge sge = {.addr = addr, .length = len, .lkey = lkey};
	set_sges(to_xqp(qpx), 1, &sge);
}

static void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_sge *sg)
{
	set_sges(to_xqp(qpx), n, sg);
}

struct ibv_qp *mrv_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *a)
{
	static int said_mask, said_ops;
	if (!c || !a)
		return mrv_fail_ptr(EINVAL);
	uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;
	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd)
		return mrv_fail_ptr(EINVAL); /* an XRC target QP (no PD) is not offered */
	if ((a->comp_mask & ~known) || ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags)) {
		mrv_refuse(&said_mask, "this ibv_create_qp_ex attribute (TSO, RSS, XRC or create flags)");
		return mrv_fail_ptr(EOPNOTSUPP);
	}
	uint64_t ops = (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ? a->send_ops_flags : 0;
	if (ops & ~(uint64_t)MRV_SEND_OPS) {
		mrv_refuse(&said_ops, "an ibv_wr_* operation other than WRITE, WRITE_IMM, SEND, SEND_IMM "
				      "and READ (send_ops_flags)");
		return mrv_fail_ptr(EOPNOTSUPP);
	}
	if (a->pd->context != c)
		return mrv_fail_ptr(EINVAL);
	/* struct ibv_qp_init_attr is the prefix of ibv_qp_init_attr_ex (the
	 * header's inline casts it the same way). */
	struct ibv_qp *qp = mrv_create_qp(a->pd, (struct ibv_qp_init_attr *)a);
	if (!qp || !(a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		return qp;
	struct mrv_qp *q = mrv_container_of(qp, struct mrv_qp, qp);
	struct ibv_qp_ex *x = &q->qpx;
	q->is_ex = 1;
	x->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	x->wr_atomic_fetch_add = wr_atomic_fetch_add;
	x->wr_bind_mw = wr_bind_mw;
	x->wr_local_inv = wr_local_inv;
	x->wr_rdma_read = wr_rdma_read;
	x->wr_rdma_write = wr_rdma_write;
	x->wr_rdma_write_imm = wr_rdma_write_imm;
	x->wr_send = wr_send;
	x->wr_send_imm = wr_send_imm;
	x->wr_send_inv = wr_send_inv;
	x->wr_send_tso = wr_send_tso;
	x->wr_set_ud_addr = wr_set_ud_addr;
	x->wr_set_xrc_srqn = wr_set_xrc_srqn;
	x->wr_set_inline_data = wr_set_inline_data;
	x->wr_set_inline_data_list = wr_set_inline_data_list;
	x->wr_set_sge = wr_set_sge;
	x->wr_set_sge_list = wr_set_sge_list;
	x->wr_start = wr_start;
	x->wr_complete = wr_complete;
	x->wr_abort = wr_abort;
	x->wr_atomic_write = wr_atomic_write;
	return qp;
}

/* ibv_qp_to_qp_ex: as rdma-core, the extended QP of one created with
 * ibv_create_qp_ex and send_ops_flags; NULL for any other. */
MRV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	if (!qp)
		return mrv_fail_ptr(EINVAL);
	struct mrv_qp *q = mrv_container_of(qp, struct mrv_qp, qp);
	if (!q->is_ex)
		return mrv_fail_ptr(EOPNOTSUPP);
	return &q->qpx;
}
