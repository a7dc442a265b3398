/*
 * cq_ex.c: ibv_create_cq_ex and the extended polling API (struct
 * ibv_cq_ex: ibv_start_poll, ibv_next_poll, ibv_end_poll, ibv_wc_read_*).
 *
 * An extended CQ is the same CQ as ibv_create_cq's (the Go side fills its
 * ring; ibv_poll_cq on ibv_cq_ex_to_cq works too), with the ibv_cq_ex
 * table filled. start_poll takes the ring's mutex and the first
 * completion; next_poll takes the next; end_poll releases the mutex, as
 * providers hold their CQ lock across a poll batch (a completion the Go
 * side delivers meanwhile waits for end_poll). start_poll on an empty CQ
 * returns ENOENT with the mutex released: the program must not call
 * end_poll then (rdma-core's contract).
 *
 * Fields: every IBV_WC_STANDARD_FLAGS field reads as ibv_poll_cq reports
 * it (src_qp, slid, sl and dlid_path_bits are 0 on RoCE RC). Completion
 * timestamps (the device has no clock: hca_core_clock is 0), CVLAN, flow
 * tags and tag matching are refused at creation (EOPNOTSUPP); their read
 * calls exist and return 0, so a program calling one anyway does not crash.
 */
#include <string.h>

#include "mrv.h"

static struct mrv_cq *to_xcq(struct ibv_cq_ex *x) { return mrv_container_of(x, struct mrv_cq, cqx); }

/* take moves the ring's head into cur (mu held); ENOENT when empty. */
static int take(struct mrv_cq *cq)
{
	if (cq->count == 0)
		return ENOENT;
	cq->cur = cq->ring[cq->head];
	cq->head = (cq->head + 1) % cq->size;
	cq->count--;
	cq->cqx.status = cq->cur.status;
	cq->cqx.wr_id = cq->cur.wr_id;
	return 0;
}

static int start_poll(struct ibv_cq_ex *x, struct ibv_poll_cq_attr *attr)
{
	if (attr && attr->comp_mask)
		return EINVAL;
	struct mrv_cq *cq = to_xcq(x);
	pthread_mutex_lock(&cq->mu);
	int err = take(cq);
	if (err)
		pthread_mutex_unlock(&cq->mu);
	return err;
}

static int next_poll(struct ibv_cq_ex *x) { return take(to_xcq(x)); }

static void end_poll(struct ibv_cq_ex *x) { pthread_mutex_unlock(&to_xcq(x)->mu); }

static enum ibv_wc_opcode read_opcode(struct ibv_cq_ex *x) { return to_xcq(x)->cur.opcode; }
static uint32_t read_vendor_err(struct ibv_cq_ex *x) { return to_xcq(x)->cur.vendor_err; }
static uint32_t read_byte_len(struct ibv_cq_ex *x) { return to_xcq(x)->cur.byte_len; }
static __be32 read_imm_data(struct ibv_cq_ex *x) { return to_xcq(x)->cur.imm_data; }
static uint32_t read_qp_num(struct ibv_cq_ex *x) { return to_xcq(x)->cur.qp_num; }
static uint32_t read_src_qp(struct ibv_cq_ex *x) { return to_xcq(x)->cur.src_qp; }
static unsigned int read_wc_flags(struct ibv_cq_ex *x) { return to_xcq(x)->cur.wc_flags; }
static uint32_t read_slid(struct ibv_cq_ex *x) { return to_xcq(x)->cur.slid; }
static uint8_t read_sl(struct ibv_cq_ex *x) { return to_xcq(x)->cur.sl; }
static uint8_t read_dlid_path_bits(struct ibv_cq_ex *x) { return to_xcq(x)->cur.dlid_path_bits; }

/* The refused fields: never requested successfully, harmless if called. */
static uint64_t read_zero64(struct ibv_cq_ex *x) { (void)x; return 0; }
static uint16_t read_cvlan(struct ibv_cq_ex *x) { (void)x; return 0; }
static uint32_t read_flow_tag(struct ibv_cq_ex *x) { (void)x; return 0; }
static void read_tm_info(struct ibv_cq_ex *x, struct ibv_wc_tm_info *tm)
{
	(void)x;
	if (tm)
		memset(tm, 0, sizeof *tm);
}

struct ibv_cq_ex *mrv_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *a)
{
	static int said_flags, said_pd;
	if (!c || !a)
		return mrv_fail_ptr(EINVAL);
	if (a->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD))
		return mrv_fail_ptr(EINVAL); /* a mask bit this ABI does not define */
	if (a->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) {
		mrv_refuse(&said_pd, "a CQ in a parent domain");
		return mrv_fail_ptr(EOPNOTSUPP);
	}
	if ((a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && (a->flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED))
		return mrv_fail_ptr(EOPNOTSUPP); /* IGNORE_OVERRUN: the ring never overruns anyway */
	if (a->wc_flags & ~(uint64_t)IBV_WC_STANDARD_FLAGS) {
		mrv_refuse(&said_flags, "a completion timestamp, CVLAN, flow tag or tag-matching field in a CQ "
					"(the device has no clock: hca_core_clock 0)");
		return mrv_fail_ptr(EOPNOTSUPP);
	}
	if (a->cqe < 1 || a->cqe > MRV_MAX_CQE)
		return mrv_fail_ptr(EINVAL);
	struct ibv_cq *ibcq = mrv_create_cq(c, (int)a->cqe, a->cq_context, a->channel, (int)a->comp_vector);
	if (!ibcq)
		return NULL;
	struct mrv_cq *cq = mrv_container_of(ibcq, struct mrv_cq, cq);
	struct ibv_cq_ex *x = &cq->cqx;
	x->start_poll = start_poll;
	x->next_poll = next_poll;
	x->end_poll = end_poll;
	x->read_opcode = read_opcode;
	x->read_vendor_err = read_vendor_err;
	x->read_byte_len = read_byte_len;
	x->read_imm_data = read_imm_data;
	x->read_qp_num = read_qp_num;
	x->read_src_qp = read_src_qp;
	x->read_wc_flags = read_wc_flags;
	x->read_slid = read_slid;
	x->read_sl = read_sl;
	x->read_dlid_path_bits = read_dlid_path_bits;
	x->read_completion_ts = read_zero64;
	x->read_cvlan = read_cvlan;
	x->read_flow_tag = read_flow_tag;
	x->read_tm_info = read_tm_info;
	x->read_completion_wallclock_ns = read_zero64;
	return x;
}
