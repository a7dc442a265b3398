/*
 * stubs.c: the public calls the library does not implement. Each fails the
 * way its documented API fails, so a program gets an error it can report
 * instead of a crash: int calls return EOPNOTSUPP (the errno-value
 * convention of verbs), pointer calls return NULL with errno EOPNOTSUPP,
 * void calls do nothing. docs/verbs.md lists what is supported and why the
 * rest is not (no SRQ, UD, address handles, multicast, imports, ECE).
 */
#include <stdio.h>

#include "mrv.h"

#define NOTSUP EOPNOTSUPP

/* --- SRQ: receives are matched per queue pair; no shared queues. --- */
MRV_EXPORT struct ibv_srq *mrv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
	(void)pd, (void)a;
	static int said;
	mrv_refuse(&said, "a shared receive queue (SRQ)");
	return mrv_fail_ptr(NOTSUP);
}
MRV_EXPORT int mrv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *a, int mask)
{
	(void)srq, (void)a, (void)mask;
	return NOTSUP;
}
MRV_EXPORT int mrv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *a)
{
	(void)srq, (void)a;
	return NOTSUP;
}
MRV_EXPORT int mrv_destroy_srq(struct ibv_srq *srq)
{
	(void)srq;
	return NOTSUP;
}

/* --- Address handles (UD) and multicast: RC only. --- */
MRV_EXPORT struct ibv_ah *mrv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *a)
{
	(void)pd, (void)a;
	return mrv_fail_ptr(NOTSUP);
}
MRV_EXPORT int mrv_destroy_ah(struct ibv_ah *ah)
{
	(void)ah;
	return NOTSUP;
}
MRV_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
						struct ibv_grh *grh, uint8_t port)
{
	(void)pd, (void)wc, (void)grh, (void)port;
	return mrv_fail_ptr(NOTSUP);
}
MRV_EXPORT int ibv_init_ah_from_wc(struct ibv_context *c, uint8_t port, struct ibv_wc *wc,
				   struct ibv_grh *grh, struct ibv_ah_attr *a)
{
	(void)c, (void)port, (void)wc, (void)grh, (void)a;
	return NOTSUP;
}
MRV_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *c, struct ibv_ah_attr *a,
					   uint8_t mac[6], uint16_t *vid)
{
	(void)c, (void)a, (void)mac, (void)vid;
	return NOTSUP;
}
MRV_EXPORT int mrv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp, (void)gid, (void)lid;
	return NOTSUP;
}
MRV_EXPORT int mrv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp, (void)gid, (void)lid;
	return NOTSUP;
}

/* --- Sharing objects between processes through a kernel fd. --- */
MRV_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	(void)cmd_fd;
	return mrv_fail_ptr(NOTSUP);
}
MRV_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *c, uint32_t h)
{
	(void)c, (void)h;
	return mrv_fail_ptr(NOTSUP);
}
MRV_EXPORT void ibv_unimport_pd(struct ibv_pd *pd) { (void)pd; }
MRV_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t h)
{
	(void)pd, (void)h;
	return mrv_fail_ptr(NOTSUP);
}
MRV_EXPORT void ibv_unimport_mr(struct ibv_mr *mr) { (void)mr; }
MRV_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *c, uint32_t h)
{
	(void)c, (void)h;
	return mrv_fail_ptr(NOTSUP);
}
MRV_EXPORT void ibv_unimport_dm(struct ibv_dm *dm) { (void)dm; }

/* --- Enhanced connection establishment: no vendor options. --- */
MRV_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp, (void)ece;
	return NOTSUP;
}
MRV_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp, (void)ece;
	return NOTSUP;
}

/* --- Memory the library cannot register. --- */
MRV_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t off, size_t len,
					    uint64_t iova, int fd, int access)
{
	(void)pd, (void)off, (void)len, (void)iova, (void)fd, (void)access;
	return mrv_fail_ptr(NOTSUP);
}
MRV_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
			    size_t len, int access)
{
	(void)mr, (void)flags, (void)pd, (void)addr, (void)len, (void)access;
	/* IBV_REREG_MR_ERR_INPUT: the documented "nothing changed" failure. */
	errno = NOTSUP;
	return IBV_REREG_MR_ERR_INPUT;
}

/* --- Fork: registered memory is ordinary process memory read and written
 * by this process (no DMA), so fork never corrupts it: fork support is
 * "unneeded" and the range calls have nothing to do. --- */
MRV_EXPORT int ibv_fork_init(void) { return 0; }
MRV_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }
MRV_EXPORT int ibv_dontfork_range(void *base, size_t size)
{
	(void)base, (void)size;
	return 0;
}
MRV_EXPORT int ibv_dofork_range(void *base, size_t size)
{
	(void)base, (void)size;
	return 0;
}

/* --- Historical helpers other rdma-core libraries import (kernel command
 * structs and sysfs): there is no kernel device and no sysfs entry. --- */
MRV_EXPORT const char *ibv_get_sysfs_path(void) { return mrv_fail_ptr(ENOENT); }
MRV_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	(void)dir, (void)file, (void)buf, (void)size;
	errno = ENOENT;
	return -1;
}
MRV_EXPORT void ibv_copy_ah_attr_from_kern(void *dst, void *src) { (void)dst, (void)src; }
MRV_EXPORT void ibv_copy_path_rec_from_kern(void *dst, void *src) { (void)dst, (void)src; }
MRV_EXPORT void ibv_copy_path_rec_to_kern(void *dst, void *src) { (void)dst, (void)src; }
MRV_EXPORT void ibv_copy_qp_attr_from_kern(void *dst, void *src) { (void)dst, (void)src; }

/* ibv_register_driver@IBVERBS_1.1 (compat only): loadable providers are
 * not used; registering one does nothing. */
void mrv_register_driver_1_1(const char *name, void *init);
void mrv_register_driver_1_1(const char *name, void *init) { (void)name, (void)init; }
MRV_SYMVER(mrv_register_driver_1_1, ibv_register_driver, IBVERBS_1.1);

MRV_DEFAULT_1_1(attach_mcast);
MRV_DEFAULT_1_1(create_ah);
MRV_DEFAULT_1_1(create_srq);
MRV_DEFAULT_1_1(destroy_ah);
MRV_DEFAULT_1_1(destroy_srq);
MRV_DEFAULT_1_1(detach_mcast);
MRV_DEFAULT_1_1(modify_srq);
MRV_DEFAULT_1_1(query_srq);
