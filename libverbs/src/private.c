/*
 * private.c: IBVERBS_PRIVATE_34, the node rdma-core's own libraries import
 * (providers such as libmlx5 and libefa, which perftest links, and
 * librdmacm). The binaries load those libraries, so every symbol must
 * resolve (they are linked BIND_NOW), but nothing here is ever a device of
 * theirs: a provider's constructor registers its driver, which does
 * nothing, and no kernel command is ever issued. The ibv_cmd_* calls return
 * EOPNOTSUPP (their errno-value convention); none is reached, since the
 * library never hands a provider a context.
 *
 * The prototypes are not rdma-core's driver.h (not installed): arguments
 * are ignored, which the x86-64 and aarch64 calling conventions allow, and
 * only the return types matter (int, void, pointer).
 */
#include <stdbool.h>

#include "mrv.h"

/* Read by providers on device disassociation; never set here. */
MRV_EXPORT bool verbs_allow_disassociate_destroy;

#define CMD_STUB(name)                   \
	MRV_EXPORT int name(void);       \
	MRV_EXPORT int name(void) { return EOPNOTSUPP; }

CMD_STUB(ibv_cmd_advise_mr)
CMD_STUB(ibv_cmd_alloc_dm)
CMD_STUB(ibv_cmd_alloc_mw)
CMD_STUB(ibv_cmd_alloc_pd)
CMD_STUB(ibv_cmd_attach_mcast)
CMD_STUB(ibv_cmd_close_xrcd)
CMD_STUB(ibv_cmd_create_ah)
CMD_STUB(ibv_cmd_create_counters)
CMD_STUB(ibv_cmd_create_cq)
CMD_STUB(ibv_cmd_create_cq_ex)
CMD_STUB(ibv_cmd_create_flow)
CMD_STUB(ibv_cmd_create_flow_action_esp)
CMD_STUB(ibv_cmd_create_qp)
CMD_STUB(ibv_cmd_create_qp_ex)
CMD_STUB(ibv_cmd_create_qp_ex2)
CMD_STUB(ibv_cmd_create_rwq_ind_table)
CMD_STUB(ibv_cmd_create_srq)
CMD_STUB(ibv_cmd_create_srq_ex)
CMD_STUB(ibv_cmd_create_wq)
CMD_STUB(ibv_cmd_dealloc_mw)
CMD_STUB(ibv_cmd_dealloc_pd)
CMD_STUB(ibv_cmd_dereg_mr)
CMD_STUB(ibv_cmd_destroy_ah)
CMD_STUB(ibv_cmd_destroy_counters)
CMD_STUB(ibv_cmd_destroy_cq)
CMD_STUB(ibv_cmd_destroy_flow)
CMD_STUB(ibv_cmd_destroy_flow_action)
CMD_STUB(ibv_cmd_destroy_qp)
CMD_STUB(ibv_cmd_destroy_rwq_ind_table)
CMD_STUB(ibv_cmd_destroy_srq)
CMD_STUB(ibv_cmd_destroy_wq)
CMD_STUB(ibv_cmd_detach_mcast)
CMD_STUB(ibv_cmd_free_dm)
CMD_STUB(ibv_cmd_get_context)
CMD_STUB(ibv_cmd_modify_cq)
CMD_STUB(ibv_cmd_modify_flow_action_esp)
CMD_STUB(ibv_cmd_modify_qp)
CMD_STUB(ibv_cmd_modify_qp_ex)
CMD_STUB(ibv_cmd_modify_srq)
CMD_STUB(ibv_cmd_modify_wq)
CMD_STUB(ibv_cmd_open_qp)
CMD_STUB(ibv_cmd_open_xrcd)
CMD_STUB(ibv_cmd_poll_cq)
CMD_STUB(ibv_cmd_post_recv)
CMD_STUB(ibv_cmd_post_send)
CMD_STUB(ibv_cmd_post_srq_recv)
CMD_STUB(ibv_cmd_query_context)
CMD_STUB(ibv_cmd_query_device_any)
CMD_STUB(ibv_cmd_query_mr)
CMD_STUB(ibv_cmd_query_port)
CMD_STUB(ibv_cmd_query_qp)
CMD_STUB(ibv_cmd_query_srq)
CMD_STUB(ibv_cmd_read_counters)
CMD_STUB(ibv_cmd_reg_dm_mr)
CMD_STUB(ibv_cmd_reg_dmabuf_mr)
CMD_STUB(ibv_cmd_reg_mr)
CMD_STUB(ibv_cmd_req_notify_cq)
CMD_STUB(ibv_cmd_rereg_mr)
CMD_STUB(ibv_cmd_resize_cq)

MRV_EXPORT int execute_ioctl(void);
MRV_EXPORT int execute_ioctl(void) { return EOPNOTSUPP; }
MRV_EXPORT unsigned int __ioctl_final_num_attrs(void);
MRV_EXPORT unsigned int __ioctl_final_num_attrs(void) { return 0; }
MRV_EXPORT int ibv_read_ibdev_sysfs_file(void);
MRV_EXPORT int ibv_read_ibdev_sysfs_file(void)
{
	errno = ENOENT;
	return -1;
}
MRV_EXPORT void __verbs_log(void);
MRV_EXPORT void __verbs_log(void) {}
MRV_EXPORT void verbs_register_driver_34(void);
MRV_EXPORT void verbs_register_driver_34(void) {}
MRV_EXPORT void verbs_set_ops(void);
MRV_EXPORT void verbs_set_ops(void) {}
MRV_EXPORT void verbs_uninit_context(void);
MRV_EXPORT void verbs_uninit_context(void) {}
MRV_EXPORT void verbs_init_cq(void);
MRV_EXPORT void verbs_init_cq(void) {}
MRV_EXPORT void *_verbs_init_and_alloc_context(void);
MRV_EXPORT void *_verbs_init_and_alloc_context(void) { return mrv_fail_ptr(EOPNOTSUPP); }
MRV_EXPORT void *verbs_open_device(void);
MRV_EXPORT void *verbs_open_device(void) { return mrv_fail_ptr(EOPNOTSUPP); }
