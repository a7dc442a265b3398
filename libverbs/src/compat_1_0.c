/*
 * compat_1_0.c: the IBVERBS_1.0 versions of the calls whose default
 * version is IBVERBS_1.1. rdma-core keeps them for binaries linked before
 * 2006, whose struct ibv_context had another layout (ibv_context_1_0
 * wrappers); nothing built against a current <infiniband/verbs.h> binds to
 * them. They exist so that the version nodes match Debian's library, and
 * fail cleanly: NULL with errno ENOSYS, or ENOSYS.
 */
#include "mrv.h"

#define COMPAT_PTR(name)                                              \
	void *mrv_##name##_1_0(void);                                 \
	void *mrv_##name##_1_0(void) { return mrv_fail_ptr(ENOSYS); } \
	MRV_SYMVER(mrv_##name##_1_0, ibv_##name, IBVERBS_1.0)
#define COMPAT_INT(name)                                \
	int mrv_##name##_1_0(void);                     \
	int mrv_##name##_1_0(void) { return ENOSYS; }   \
	MRV_SYMVER(mrv_##name##_1_0, ibv_##name, IBVERBS_1.0)
#define COMPAT_VOID(name)                    \
	void mrv_##name##_1_0(void);         \
	void mrv_##name##_1_0(void) {}       \
	MRV_SYMVER(mrv_##name##_1_0, ibv_##name, IBVERBS_1.0)

COMPAT_PTR(get_device_list);
COMPAT_VOID(free_device_list);
COMPAT_PTR(get_device_name);
uint64_t mrv_get_device_guid_1_0(void);
uint64_t mrv_get_device_guid_1_0(void)
{
	errno = ENOSYS;
	return 0;
}
MRV_SYMVER(mrv_get_device_guid_1_0, ibv_get_device_guid, IBVERBS_1.0);
COMPAT_PTR(open_device);
COMPAT_INT(close_device);
COMPAT_INT(get_async_event);
COMPAT_VOID(ack_async_event);
COMPAT_INT(query_device);
COMPAT_INT(query_port);
COMPAT_INT(query_gid);
COMPAT_INT(query_pkey);
COMPAT_PTR(alloc_pd);
COMPAT_INT(dealloc_pd);
COMPAT_PTR(reg_mr);
COMPAT_INT(dereg_mr);
COMPAT_PTR(create_cq);
COMPAT_INT(resize_cq);
COMPAT_INT(destroy_cq);
COMPAT_INT(get_cq_event);
COMPAT_VOID(ack_cq_events);
COMPAT_PTR(create_srq);
COMPAT_INT(modify_srq);
COMPAT_INT(query_srq);
COMPAT_INT(destroy_srq);
COMPAT_PTR(create_qp);
COMPAT_INT(query_qp);
COMPAT_INT(modify_qp);
COMPAT_INT(destroy_qp);
COMPAT_PTR(create_ah);
COMPAT_INT(destroy_ah);
COMPAT_INT(attach_mcast);
COMPAT_INT(detach_mcast);
