/*
 * pd.c: protection domains and memory regions. A region is registered at
 * the program's own virtual address (or the iova it names): sge.addr and
 * remote_addr are virtual addresses, and the transport places received
 * data straight into this memory.
 */
#include <stdlib.h>

#include "mrv.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

static int valid_ctx(struct ibv_context *c)
{
	return c && c->device == &mrv_device_get()->dev;
}

MRV_EXPORT struct ibv_pd *mrv_alloc_pd(struct ibv_context *c)
{
	if (!valid_ctx(c))
		return mrv_fail_ptr(EINVAL);
	struct mrv_pd *p = calloc(1, sizeof *p);
	if (!p)
		return mrv_fail_ptr(ENOMEM);
	uint32_t h = 0;
	int err = mrg.MetaroceVerbsAllocPD(&h);
	if (err) {
		free(p);
		return mrv_fail_ptr(err);
	}
	p->pd.context = c;
	p->pd.handle = h;
	return &p->pd;
}

MRV_EXPORT int mrv_dealloc_pd(struct ibv_pd *pd)
{
	if (!pd)
		return EINVAL;
	int err = mrg.MetaroceVerbsDeallocPD(pd->handle);
	if (err)
		return err;
	free(pd);
	return 0;
}

/* The access flags the library understands; IBV_ACCESS_REMOTE_ATOMIC is
 * accepted (programs ask for it by habit) but no atomic is ever served,
 * and the optional hints (relaxed ordering) need no action. */
#define MRV_ACCESS_KNOWN (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
			  IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_OPTIONAL_RANGE)

static struct ibv_mr *reg(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova, unsigned access)
{
	if (!pd || (!addr && len))
		return mrv_fail_ptr(EINVAL);
	if (access & ~(unsigned)MRV_ACCESS_KNOWN)
		return mrv_fail_ptr(EOPNOTSUPP); /* MW bind, ODP, zero-based... */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
		return mrv_fail_ptr(EINVAL); /* as verbs requires */
	struct mrv_mr *m = calloc(1, sizeof *m);
	if (!m)
		return mrv_fail_ptr(ENOMEM);
	uint32_t h = 0, lkey = 0, rkey = 0;
	int err = mrg.MetaroceVerbsRegMR(pd->handle, addr, len, iova, (int)access, &h, &lkey, &rkey);
	if (err) {
		free(m);
		return mrv_fail_ptr(err);
	}
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = len;
	m->mr.handle = h;
	m->mr.lkey = lkey;
	m->mr.rkey = rkey;
	return &m->mr;
}

MRV_EXPORT struct ibv_mr *mrv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	return reg(pd, addr, len, (uintptr_t)addr, (unsigned)access);
}

MRV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova, int access)
{
	return reg(pd, addr, len, iova, (unsigned)access);
}

MRV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
					   unsigned int access)
{
	return reg(pd, addr, len, iova, access);
}

/* Deregistering revokes at once, even with I/O in flight: later work on
 * its keys fails, nothing is placed into the memory afterwards. */
MRV_EXPORT int mrv_dereg_mr(struct ibv_mr *mr)
{
	if (!mr)
		return EINVAL;
	int err = mrg.MetaroceVerbsDeregMR(mr->handle);
	if (err)
		return err;
	free(mr);
	return 0;
}

MRV_DEFAULT_1_1(alloc_pd);
MRV_DEFAULT_1_1(dealloc_pd);
MRV_DEFAULT_1_1(reg_mr);
MRV_DEFAULT_1_1(dereg_mr);
