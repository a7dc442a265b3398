/*
 * notyet.c: the calls of the data path (issue 14, step 4) that are not
 * implemented yet. They fail cleanly like the stubs in stubs.c, so a
 * program that opens the device and tries to move data gets an error it
 * can print (ib_write_bw: "Couldn't allocate PD"), never a crash. Each
 * call leaves this file when its implementation lands.
 */
#include "mrv.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define NOTYET EOPNOTSUPP

MRV_EXPORT struct ibv_pd *mrv_alloc_pd(struct ibv_context *c)
{
	(void)c;
	return mrv_fail_ptr(NOTYET);
}
MRV_EXPORT int mrv_dealloc_pd(struct ibv_pd *pd)
{
	(void)pd;
	return NOTYET;
}
MRV_EXPORT struct ibv_mr *mrv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	(void)pd, (void)addr, (void)len, (void)access;
	return mrv_fail_ptr(NOTYET);
}
MRV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t len,
					  uint64_t iova, int access)
{
	(void)pd, (void)addr, (void)len, (void)iova, (void)access;
	return mrv_fail_ptr(NOTYET);
}
MRV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len,
					   uint64_t iova, unsigned int access)
{
	(void)pd, (void)addr, (void)len, (void)iova, (void)access;
	return mrv_fail_ptr(NOTYET);
}
MRV_EXPORT int mrv_dereg_mr(struct ibv_mr *mr)
{
	(void)mr;
	return NOTYET;
}
MRV_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *c)
{
	(void)c;
	return mrv_fail_ptr(NOTYET);
}
MRV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	(void)ch;
	return NOTYET;
}
MRV_EXPORT struct ibv_cq *mrv_create_cq(struct ibv_context *c, int cqe, void *cq_context,
					struct ibv_comp_channel *ch, int comp_vector)
{
	(void)c, (void)cqe, (void)cq_context, (void)ch, (void)comp_vector;
	return mrv_fail_ptr(NOTYET);
}
MRV_EXPORT int mrv_resize_cq(struct ibv_cq *cq, int cqe)
{
	(void)cq, (void)cqe;
	return NOTYET;
}
MRV_EXPORT int mrv_destroy_cq(struct ibv_cq *cq)
{
	(void)cq;
	return NOTYET;
}
MRV_EXPORT int mrv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **ctx)
{
	(void)ch, (void)cq, (void)ctx;
	errno = NOTYET;
	return -1;
}
MRV_EXPORT void mrv_ack_cq_events(struct ibv_cq *cq, unsigned int n) { (void)cq, (void)n; }
MRV_EXPORT struct ibv_qp *mrv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	(void)pd, (void)a;
	return mrv_fail_ptr(NOTYET);
}
MRV_EXPORT int mrv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
			    struct ibv_qp_init_attr *init)
{
	(void)qp, (void)a, (void)mask, (void)init;
	return NOTYET;
}
MRV_EXPORT int mrv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	(void)qp, (void)a, (void)mask;
	return NOTYET;
}
MRV_EXPORT int mrv_destroy_qp(struct ibv_qp *qp)
{
	(void)qp;
	return NOTYET;
}
/* 0: no in-order guarantee claimed (the truthful answer without a QP). */
MRV_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp, (void)op, (void)flags;
	return 0;
}
MRV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	(void)qp;
	return mrv_fail_ptr(NOTYET);
}
MRV_EXPORT int mrv_get_async_event(struct ibv_context *c, struct ibv_async_event *ev)
{
	(void)c, (void)ev;
	errno = NOTYET;
	return -1;
}
MRV_EXPORT void mrv_ack_async_event(struct ibv_async_event *ev) { (void)ev; }

MRV_DEFAULT_1_1(ack_async_event);
MRV_DEFAULT_1_1(ack_cq_events);
MRV_DEFAULT_1_1(alloc_pd);
MRV_DEFAULT_1_1(create_cq);
MRV_DEFAULT_1_1(create_qp);
MRV_DEFAULT_1_1(dealloc_pd);
MRV_DEFAULT_1_1(dereg_mr);
MRV_DEFAULT_1_1(destroy_cq);
MRV_DEFAULT_1_1(destroy_qp);
MRV_DEFAULT_1_1(get_async_event);
MRV_DEFAULT_1_1(get_cq_event);
MRV_DEFAULT_1_1(modify_qp);
MRV_DEFAULT_1_1(query_qp);
MRV_DEFAULT_1_1(reg_mr);
MRV_DEFAULT_1_1(resize_cq);
